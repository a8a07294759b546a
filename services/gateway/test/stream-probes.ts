import { status } from "@grpc/grpc-js";
import { readSseFrames } from "@unimatrix/service-kit/testing";

// Probes of open streams for the credential tests: what a stream said last, and how a reopen is answered.

/** An open stream: whether it is ready, whether it ended with access_revoked, and its closer. */
export interface Opened {
  readonly ready: () => boolean;
  readonly revoked: () => boolean;
  readonly close: () => void;
}

/** An SSE stream read with the kit's frame reader: its event names, in order. */
export function sseStream(url: string, token: string): Opened {
  const controller = new AbortController();
  const events: string[] = [];
  void readSseFrames(url, token, controller.signal, (frame) => {
    const event = /^event: (\S+)$/m.exec(frame)?.[1];
    if (event) events.push(event);
  }).catch(() => {});
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
