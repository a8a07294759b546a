import type { DoorItem } from "./protocol";

/** The host events `unimatrix hook` answers (Claude Code's names, kebab-cased). */
export const HOOK_EVENTS = ["session-start", "post-tool-use", "user-prompt-submit", "stop", "session-end"] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

/** How the hook prints: Claude Code's documented contract, or plain lines any host can add to context. */
export type HookFormat = "claude" | "text";
export const HOOK_FORMATS: readonly HookFormat[] = ["claude", "text"];

/** A caller's mistake in a hook's input (the door answers it 400, never as its own failure). */
export class HookInputError extends Error {}

/** Who asks: the host session's harness and format, with the drone's token or declared id. */
export interface HookCaller {
  readonly harness: string;
  readonly format: HookFormat;
  readonly droneToken?: string;
  readonly droneId?: string;
}

/** The door operations one hook run needs (over the JSON-lines protocol, or in the daemon itself). */
export interface HookOps {
  hello(request: { harness: string; session: string; droneToken: string; droneId?: string }): Promise<unknown>;
  take(request: { harness: string; session: string; droneToken?: string; droneId?: string }): Promise<DoorItem[]>;
  bye(request: { harness: string; session: string; droneToken?: string }): Promise<unknown>;
}

/** What a hook run prints (exactly these bytes on stdout; "" when nothing), and the notices it hands. */
export interface HookAnswer {
  readonly out: string;
  readonly ids: readonly string[];
}

/** Items that justify blocking a Stop once: a direct message, or a reply (an answer to the agent's question). */
const URGENT = /^\[(DIRECT|REPLY)\]/;

/**
 * What the hook prints for `lines` at `event` in the host's format; "" when it prints nothing (a
 * Stop blocks only for an urgent item, and only in Claude Code's format).
 */
export function hostOutput(event: HookEvent, format: HookFormat, lines: readonly string[], urgent: boolean): string {
  const text = lines.join("\n");
  if (event === "stop") {
    if (format !== "claude" || !urgent) return "";
    return `${JSON.stringify({ decision: "block", reason: `New messages from your team:\n${text}` })}\n`;
  }
  if (event === "post-tool-use" && format === "claude")
    return `${JSON.stringify({ hookSpecificOutput: { hookEventName: "PostToolUse", additionalContext: text } })}\n`;
  return `${text}\n`;
}

/** The host's session id from its hook JSON; a Stop the host is already continuing from is marked. */
export function parseHookInput(input: string): { session: string; stopHookActive: boolean } {
  let parsed: { session_id?: unknown; stop_hook_active?: unknown } = {};
  if (input.trim().length > 0) {
    try {
      parsed = JSON.parse(input) as typeof parsed;
    } catch (error) {
      throw new HookInputError(`the hook input is not JSON: ${(error as Error).message}`);
    }
    if (typeof parsed !== "object" || parsed === null) throw new HookInputError("the hook input is not a JSON object");
  }
  const session = typeof parsed.session_id === "string" ? parsed.session_id : "";
  if (session.length === 0) throw new HookInputError("the hook input has no session_id");
  return { session, stopHookActive: parsed.stop_hook_active === true };
}

/**
 * One hook run's answer: introduces the session at `session-start`, forgets it at `session-end`,
 * otherwise takes what waits for it and formats it in the host's format. A Stop the host already
 * continues from (`stop_hook_active`) asks for nothing. The caller prints `out` and only then
 * reports `ids` handed (on the same door connection that took them).
 */
export async function answerHook(
  event: HookEvent,
  session: string,
  stopHookActive: boolean,
  caller: HookCaller,
  ops: HookOps,
): Promise<HookAnswer> {
  const none: HookAnswer = { out: "", ids: [] };
  if (event === "stop" && stopHookActive) return none;
  const who = { harness: caller.harness, session };
  const token = caller.droneToken ? { droneToken: caller.droneToken } : {};
  const declared = caller.droneId ? { droneId: caller.droneId } : {};
  if (event === "session-end") {
    await ops.bye({ ...who, ...token });
    return none;
  }
  if (event === "session-start") {
    if (!caller.droneToken) return none;
    await ops.hello({ ...who, droneToken: caller.droneToken, ...declared });
  }
  const items = await ops.take({ ...who, ...token, ...declared });
  if (items.length === 0) return none;
  const urgent = items.some((item) => URGENT.test(item.text));
  const out = hostOutput(
    event,
    caller.format,
    items.map((item) => item.text),
    urgent,
  );
  if (out === "") return none;
  return { out, ids: items.map((item) => item.id) };
}
