import { status } from "@grpc/grpc-js";

// Probes of open streams for the credential tests: what a stream said last, and how a reopen is answered.

/** An open stream: whether it is ready, whether it ended with access_revoked, and its closer. */
export interface Opened {
  readonly ready: () => boolean;
  readonly revoked: () => boolean;
  readonly close: () => void;
}

/** What the streams read: SSE frames by event name. */
export function sseStream(url: string, token: string): Opened {
  const controller = new AbortController();
  const events: string[] = [];
  void (async () => {
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      for (const match of buffer.matchAll(/^event: (\S+)$/gm)) events.push(match[1]!);
      buffer = buffer.slice(buffer.lastIndexOf("\n\n") + 1);
    }
  })().catch(() => {});
  return {
    ready: () => events.some((e) => e === "ready" || e === "machine_ready"),
    revoked: () => events.at(-1) === "access_revoked",
    close: () => controller.abort(),
  };
}

export async function sseRefusal(url: string, token: string): Promise<string> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  controller.abort();
  return String(response.status);
}

/** Reads an async iterable of watch/activity responses (Connect or grpc-js) into event cases. */
export function iterate(stream: AsyncIterable<{ event: { case: string | undefined } }>, abort: () => void): Opened {
  const cases: (string | undefined)[] = [];
  void (async () => {
    for await (const message of stream) cases.push(message.event.case);
  })().catch(() => {});
  return {
    ready: () => cases.some((c) => c === "ready" || c === "machineReady"),
    revoked: () => cases.at(-1) === "accessRevoked",
    close: abort,
  };
}

/** The first answer of a stream opened afresh: the code of its refusal, or "open" when it was served. */
export async function firstAnswer(stream: AsyncIterable<unknown>): Promise<string> {
  try {
    for await (const _ of stream) return "open";
    return "ended";
  } catch (error) {
    const code = (error as { code?: number | string }).code;
    return typeof code === "number" ? (status[code] ?? String(code)) : String(code);
  }
}
