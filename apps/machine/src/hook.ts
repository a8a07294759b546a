import { writeSync } from "node:fs";
import { forgetInboxState, inboxStateFile, readInbox } from "./direct";
import { answerHook, type HookEvent, type HookFormat, hostOutput, parseHookInput } from "./hook-answer";
import { DoorClient, type DoorItem } from "./protocol";

export { HOOK_EVENTS, type HookEvent, type HookFormat } from "./hook-answer";

/** What one hook run needs. */
export interface HookOptions {
  readonly door: string;
  /** The agent host's name, recorded with the session (`claude-code`). */
  readonly harness: string;
  readonly format: HookFormat;
  /** The drone session token (UNIMATRIX_DRONE_TOKEN). */
  readonly droneToken?: string;
  /** The drone id, for a daemon with no cube target (UNIMATRIX_DRONE_ID). */
  readonly droneId?: string;
  /**
   * The gateway's base URL (UNIMATRIX_GATEWAY): with no daemon at the door, the hook reads the
   * drone's inbox there directly with the drone token.
   */
  readonly gateway?: string;
  /** Where the hook keeps each session's inbox cursor when it reads the gateway directly. */
  readonly stateDir?: string;
  /** The host's hook JSON, as read from stdin. */
  readonly input: string;
  /** Writes to stdout, synchronously (what the host reads). */
  readonly write?: (text: string) => void;
}

const writeStdout = (text: string) => {
  writeSync(1, text);
};

/** True when nothing listens at the door (no daemon runs): the hook may go to the gateway instead. */
function noDaemon(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === "ENOENT" || code === "ECONNREFUSED";
}

/** The hook without a daemon: one call to the gateway's inbox with the drone token. */
async function runDirect(event: HookEvent, options: HookOptions, session: string, gateway: string): Promise<string> {
  const token = options.droneToken;
  if (!token || !options.stateDir) return "";
  const stateFile = inboxStateFile(options.stateDir, options.harness, session);
  if (event === "session-end") {
    forgetInboxState(stateFile);
    return "";
  }
  const read = await readInbox(gateway, token, stateFile);
  if (read.lines.length === 0) return "";
  const out = hostOutput(event, options.format, read.lines, read.urgent);
  if (out === "") return "";
  (options.write ?? writeStdout)(out);
  read.commit();
  return out;
}

/**
 * Runs one hook: parses the host's input, asks the door for what waits for the session (one
 * connection), prints it in the host's format, and only after the text is written tells the
 * daemon it was handed (so it is confirmed and never offered again). A Stop blocks once, only for
 * a direct message or a reply, and never when the host says it is already continuing from a Stop
 * hook (`stop_hook_active`). Returns what it printed (empty when nothing).
 */
export async function runHook(event: HookEvent, options: HookOptions): Promise<string> {
  const write = options.write ?? writeStdout;
  const { session, stopHookActive } = parseHookInput(options.input);
  if (event === "stop" && stopHookActive) return "";

  let door: DoorClient;
  try {
    door = await DoorClient.connect(options.door);
  } catch (error) {
    if (options.gateway && noDaemon(error)) return runDirect(event, options, session, options.gateway);
    throw error;
  }
  try {
    const caller = {
      harness: options.harness,
      format: options.format,
      ...(options.droneToken ? { droneToken: options.droneToken } : {}),
      ...(options.droneId ? { droneId: options.droneId } : {}),
    };
    const { out, ids } = await answerHook(event, session, stopHookActive, caller, {
      hello: (request) => door.request({ op: "hello", ...request }),
      take: async (request) => (await door.request<{ items: DoorItem[] }>({ op: "take", ...request })).items,
      bye: (request) => door.request({ op: "bye", ...request }),
    });
    if (out === "") return "";
    write(out);
    await door.request({ op: "handed", ids: [...ids] });
    return out;
  } finally {
    door.close();
  }
}
