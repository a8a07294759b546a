import { writeSync } from "node:fs";
import { forgetInboxState, inboxStateFile, readInbox } from "./direct";
import { DoorClient, type DoorItem } from "./protocol";

/** The host events `unimatrix hook` answers (Claude Code's names, kebab-cased). */
export const HOOK_EVENTS = ["session-start", "post-tool-use", "user-prompt-submit", "stop", "session-end"] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

/** How the hook prints: Claude Code's documented contract, or plain lines any host can add to context. */
export type HookFormat = "claude" | "text";

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

/** Claude Code's hook input: the fields this hook reads. */
interface HookInput {
  session_id?: unknown;
  stop_hook_active?: unknown;
}

/** Items that justify blocking a Stop once: a direct message, or a reply (an answer to the agent's question). */
const URGENT = /^\[(DIRECT|REPLY)\]/;

const writeStdout = (text: string) => {
  writeSync(1, text);
};

/**
 * What the hook prints for `lines` at `event` in the host's format; "" when it prints nothing (a
 * Stop blocks only for an urgent item, and only in Claude Code's format).
 */
function hostOutput(event: HookEvent, format: HookFormat, lines: readonly string[], urgent: boolean): string {
  const text = lines.join("\n");
  if (event === "stop") {
    if (format !== "claude" || !urgent) return "";
    return `${JSON.stringify({ decision: "block", reason: `New messages from your team:\n${text}` })}\n`;
  }
  if (event === "post-tool-use" && format === "claude")
    return `${JSON.stringify({ hookSpecificOutput: { hookEventName: "PostToolUse", additionalContext: text } })}\n`;
  return `${text}\n`;
}

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
  let input: HookInput = {};
  if (options.input.trim().length > 0) input = JSON.parse(options.input) as HookInput;
  const session = typeof input.session_id === "string" ? input.session_id : "";
  if (session.length === 0) throw new Error("the hook input has no session_id");
  if (event === "stop" && input.stop_hook_active === true) return "";

  let door: DoorClient;
  try {
    door = await DoorClient.connect(options.door);
  } catch (error) {
    if (options.gateway && noDaemon(error)) return runDirect(event, options, session, options.gateway);
    throw error;
  }
  try {
    const who = { harness: options.harness, session };
    const token = options.droneToken ? { droneToken: options.droneToken } : {};
    const declared = options.droneId ? { droneId: options.droneId } : {};
    if (event === "session-end") {
      await door.request({ op: "bye", ...who, ...token });
      return "";
    }
    if (event === "session-start") {
      if (!options.droneToken) return "";
      await door.request({ op: "hello", ...who, droneToken: options.droneToken, ...declared });
    }
    const { items } = await door.request<{ items: DoorItem[] }>({ op: "take", ...who, ...token, ...declared });
    if (items.length === 0) return "";
    const urgent = items.some((item) => URGENT.test(item.text));
    const out = hostOutput(
      event,
      options.format,
      items.map((item) => item.text),
      urgent,
    );
    if (out === "") return "";
    write(out);
    await door.request({ op: "handed", ids: items.map((item) => item.id) });
    return out;
  } finally {
    door.close();
  }
}
