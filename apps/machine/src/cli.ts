import { readFileSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { parseArgs } from "node:util";
import type { Daemon } from "./daemon";
import { HOOK_EVENTS, type HookEvent, runHook } from "./hook";
import { defaultDoorPath, defaultHookStateDir, defaultSpoolDir } from "./paths";
import { DoorClient } from "./protocol";

/** The daemon's version, sent in the Link's hello. */
const AGENT_VERSION = "unimatrix-machine/0.1.0";

const MACHINE_HELP = `Usage: unimatrix machine <command>

Commands:
  run       run the machine daemon: link to presence, open the local door, spool notices
  status    print the running daemon's state (asks the door)

Run "unimatrix machine <command> --help" for a command's options.
`;

const RUN_HELP = `Usage: unimatrix machine run [options]

Links this machine to presence, opens the local door for agent-host sessions and keeps notices in
a crash-safe spool until a hook puts them in front of the agent; confirms each one then.

Options:
  --presence <target>   presence's gRPC target (env UNIMATRIX_PRESENCE; default 127.0.0.1:7003)
  --cube <target>       cube's gRPC target, to check drone session tokens while presence is away
                        (env UNIMATRIX_CUBE); sessions are checked and tied to this machine
                        through presence otherwise; with neither, a session declares its drone
                        id (UNIMATRIX_DRONE_ID)
  --token-file <path>   file holding the machine token (else env UNIMATRIX_MACHINE_TOKEN)
  --tls                 use TLS with the system's roots (env UNIMATRIX_TLS=1)
  --ca-file <path>      use TLS trusting this CA bundle (PEM) (env UNIMATRIX_CA_FILE)
  --door <path>         the local door (env UNIMATRIX_DOOR; default
                        $XDG_RUNTIME_DIR/unimatrix/machine.sock or ~/.unimatrix/run/machine.sock)
  --spool <dir>         the notice spool (env UNIMATRIX_SPOOL; default ~/.local/state/unimatrix/spool)
  --hostname <name>     the hostname sent to presence (default: this host's)
  -h, --help            show this help

Exit codes: 0 stopped by SIGTERM/SIGINT; 1 could not start (e.g. the door is in use);
3 presence ended the link for good (machine revoked, token refused, replaced by another daemon).
`;

const STATUS_HELP = `Usage: unimatrix machine status [--door <path>]

Prints the running daemon's state as JSON (linked, machineId, pending, handed, sessions, links).
Exit code 1 when no daemon answers at the door.
`;

const HOOK_HELP = `Usage: unimatrix hook <event> [options]

Events: ${HOOK_EVENTS.join(", ")}

Reads the agent host's hook JSON on stdin (session_id, hook_event_name, …), asks the local door
for what waits for that session, prints it in the host's format and marks it delivered. Prints
nothing when nothing waits; never fails the host (errors go to stderr, exit code 0).
With no daemon at the door and a gateway configured, it reads the drone's inbox at the gateway
instead (one HTTP call with the drone token; 304 when nothing is new).
The fast client, unimatrix-hook <event> (same arguments, environment and output; sh and curl,
no Node start-up), is what a host should run: it calls this command when it cannot take its path.

  session-start        introduces the session (UNIMATRIX_DRONE_TOKEN): the daemon ties its drone
                       to this machine; prints what waits
  post-tool-use        Claude Code: {"hookSpecificOutput":{"hookEventName":"PostToolUse",
                       "additionalContext":"…"}}
  user-prompt-submit   prints the lines (a host adds this stdout to the context)
  stop                 blocks once ({"decision":"block","reason":"…"}) for a direct message or a
                       reply; never when stop_hook_active is set
  session-end          forgets the session and unties its drone from this machine

Options:
  --door <path>        the local door (env UNIMATRIX_DOOR; same default as the daemon)
  --harness <name>     the agent host's name (env UNIMATRIX_HARNESS; default claude-code)
  --format <f>         claude (default) or text: plain lines on stdout for any host
  --gateway <url>      the gateway's base URL, used when no daemon runs (env UNIMATRIX_GATEWAY)
  -h, --help           show this help

Environment: UNIMATRIX_DRONE_TOKEN (the drone session token), UNIMATRIX_DRONE_ID (only for a
daemon with no --cube and no presence link), UNIMATRIX_HOOK_STATE (where a hook with no daemon
keeps each session's inbox cursor; default $XDG_STATE_HOME/unimatrix/hook).
`;

/** Standard streams and environment of one CLI run (the seam tests use). */
export interface CliIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly readStdin: () => Promise<string>;
}

const processIo: CliIo = {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  readStdin: async () => {
    if (process.stdin.isTTY) return "";
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size > 1024 * 1024) throw new Error("the hook input is larger than 1 MiB");
    }
    return Buffer.concat(chunks).toString("utf8");
  },
};

/** `unimatrix machine …` and `unimatrix hook …`; `argv` starts at the command. Resolves with the exit code. */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const [command, sub, ...rest] = argv;
  if (command === "machine") {
    if (sub === "run") return machineRun(rest, io);
    if (sub === "status") return machineStatus(rest, io);
    io.stdout(MACHINE_HELP);
    return sub === undefined || sub === "--help" || sub === "-h" ? 0 : 2;
  }
  if (command === "hook") {
    if (sub === undefined || sub === "--help" || sub === "-h") {
      io.stdout(HOOK_HELP);
      return sub === undefined ? 2 : 0;
    }
    return hook(sub, rest, io);
  }
  io.stderr(`unknown command ${command ?? ""}\n`);
  return 2;
}

function readToken(path: string | undefined, env: NodeJS.ProcessEnv, stderr: (text: string) => void): string {
  if (path) {
    const mode = statSync(path).mode;
    if ((mode & 0o077) !== 0) stderr(`warning: ${path} is readable by others (chmod 600 it)\n`);
    return readFileSync(path, "utf8").trim();
  }
  return env.UNIMATRIX_MACHINE_TOKEN?.trim() ?? "";
}

async function machineRun(args: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      presence: { type: "string" },
      cube: { type: "string" },
      "token-file": { type: "string" },
      tls: { type: "boolean" },
      "ca-file": { type: "string" },
      door: { type: "string" },
      spool: { type: "string" },
      hostname: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    io.stdout(RUN_HELP);
    return 0;
  }
  const env = io.env;
  const token = readToken(values["token-file"], env, io.stderr);
  if (!token.startsWith("umx_machine_")) {
    io.stderr("no machine token: pass --token-file <path> or set UNIMATRIX_MACHINE_TOKEN (umx_machine_…)\n");
    return 1;
  }
  const caFile = values["ca-file"] ?? env.UNIMATRIX_CA_FILE;
  const tls = values.tls === true || env.UNIMATRIX_TLS === "1" || caFile !== undefined;
  // Loaded only here: gRPC and the daemon stay out of a hook's start-up.
  const { runDaemon, tlsCredentials } = await import("./daemon.js");
  const credentials = tls ? tlsCredentials(caFile ? readFileSync(caFile) : null) : undefined;
  const cubeTarget = values.cube ?? env.UNIMATRIX_CUBE;
  const log = (event: string, fields: Record<string, unknown> = {}) =>
    io.stdout(`${JSON.stringify({ at: new Date().toISOString(), event, ...fields })}\n`);
  let daemon: Daemon;
  try {
    daemon = await runDaemon({
      token,
      presenceTarget: values.presence ?? env.UNIMATRIX_PRESENCE ?? "127.0.0.1:7003",
      ...(cubeTarget ? { cubeTarget } : {}),
      ...(credentials ? { credentials } : {}),
      doorPath: values.door ?? defaultDoorPath(env),
      spoolDir: values.spool ?? defaultSpoolDir(env),
      hostname: values.hostname ?? hostname(),
      agentVersion: AGENT_VERSION,
      log,
    });
  } catch (error) {
    io.stderr(`unimatrix machine run: ${(error as Error).message}\n`);
    return 1;
  }
  const signalled = new Promise<number>((resolve) => {
    const stop = () => resolve(0);
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  const ended = daemon.linkEnded.then((reason) => {
    if (reason === "stopped") return 0;
    io.stderr(`unimatrix machine run: presence ended the link (${reason}); not retrying\n`);
    return 3;
  });
  const code = await Promise.race([signalled, ended]);
  await daemon.stop();
  return code;
}

async function machineStatus(args: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: { door: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    io.stdout(STATUS_HELP);
    return 0;
  }
  try {
    const door = await DoorClient.connect(values.door ?? defaultDoorPath(io.env));
    try {
      io.stdout(`${JSON.stringify(await door.request({ op: "status" }))}\n`);
    } finally {
      door.close();
    }
    return 0;
  } catch (error) {
    io.stderr(`unimatrix machine status: ${(error as Error).message}\n`);
    return 1;
  }
}

async function hook(event: string, args: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      door: { type: "string" },
      harness: { type: "string" },
      format: { type: "string" },
      gateway: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    io.stdout(HOOK_HELP);
    return 0;
  }
  if (!(HOOK_EVENTS as readonly string[]).includes(event)) {
    io.stderr(`unknown hook event ${event}; choose from ${HOOK_EVENTS.join(", ")}\n`);
    return 2;
  }
  const format = values.format ?? "claude";
  if (format !== "claude" && format !== "text") {
    io.stderr("--format is claude or text\n");
    return 2;
  }
  // A hook never fails the agent's host: any trouble is a line on stderr and exit code 0.
  try {
    const env = io.env;
    const gateway = values.gateway ?? env.UNIMATRIX_GATEWAY;
    await runHook(event as HookEvent, {
      door: values.door ?? defaultDoorPath(env),
      harness: values.harness ?? env.UNIMATRIX_HARNESS ?? "claude-code",
      format,
      ...(gateway ? { gateway, stateDir: defaultHookStateDir(env) } : {}),
      ...(env.UNIMATRIX_DRONE_TOKEN ? { droneToken: env.UNIMATRIX_DRONE_TOKEN } : {}),
      ...(env.UNIMATRIX_DRONE_ID ? { droneId: env.UNIMATRIX_DRONE_ID } : {}),
      input: await io.readStdin(),
      write: io.stdout,
    });
  } catch (error) {
    io.stderr(`unimatrix hook ${event}: ${(error as Error).message}\n`);
  }
  return 0;
}
