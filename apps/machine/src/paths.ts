import { homedir } from "node:os";
import { join } from "node:path";

/** The door's default path: `$XDG_RUNTIME_DIR/unimatrix/machine.sock`, else `~/.unimatrix/run/machine.sock`. */
export function defaultDoorPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.UNIMATRIX_DOOR) return env.UNIMATRIX_DOOR;
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, "unimatrix", "machine.sock");
  return join(homedir(), ".unimatrix", "run", "machine.sock");
}

const stateHome = (env: NodeJS.ProcessEnv) => env.XDG_STATE_HOME || join(homedir(), ".local", "state");

/** The spool's default directory: `$XDG_STATE_HOME/unimatrix/spool`, else `~/.local/state/unimatrix/spool`. */
export function defaultSpoolDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.UNIMATRIX_SPOOL) return env.UNIMATRIX_SPOOL;
  return join(stateHome(env), "unimatrix", "spool");
}

/** Where a hook with no daemon keeps its sessions' inbox cursors: `$XDG_STATE_HOME/unimatrix/hook`. */
export function defaultHookStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.UNIMATRIX_HOOK_STATE) return env.UNIMATRIX_HOOK_STATE;
  return join(stateHome(env), "unimatrix", "hook");
}
