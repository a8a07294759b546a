/**
 * Server-sent events over fetch: EventSource cannot send an Authorization header, and the token
 * must never go in a URL. This reader sends `Authorization` and `Last-Event-ID` itself, parses the
 * stream, remembers the last id, and reconnects with capped exponential backoff.
 */

import { credentialsOf } from "./api";

export type StreamState = "connecting" | "live" | "reconnecting" | "ended";

export interface StreamOptions {
  /** Path of the SSE endpoint, e.g. `/v1/cubes/<id>/events`. */
  readonly path: string;
  /** The bearer token (read on each connect). */
  readonly token: () => string;
  /** Resume position; `""` asks for everything retained, `undefined` for only new events. */
  readonly lastEventId?: string;
  /** Event types after which the stream counts as live (the backlog is delivered). */
  readonly readyEvents: readonly string[];
  /** Event types that end the stream for good. */
  readonly terminalEvents: readonly string[];
  readonly onEvent: (type: string, data: unknown, id: string | undefined) => void;
  readonly onState: (state: StreamState, detail: string) => void;
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
}

export interface EventStream {
  /** The id of the last event received (the resume cursor). */
  lastEventId(): string | undefined;
  /** Drops the current connection; the reader reconnects as after any drop. */
  drop(): void;
  close(): void;
  /** Settles once the reader has stopped for good (closed, refused, or a terminal event): it never connects again. */
  readonly stopped: Promise<void>;
}

interface Frame {
  event: string;
  data: string[];
  id: string | undefined;
}

/** Errors that retrying cannot fix: stop and say so. */
const FATAL_STATUS = new Set([400, 401, 403, 404, 412]);

export function openEventStream(options: StreamOptions): EventStream {
  let lastId = options.lastEventId;
  let closed = false;
  let current: AbortController | undefined;
  let attempt = 0;
  let wake: (() => void) | undefined;
  const initial = options.initialDelayMs ?? 500;
  const max = options.maxDelayMs ?? 10_000;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const connect = async (): Promise<"retry" | "stop"> => {
    const controller = new AbortController();
    current = controller;
    const credentials = credentialsOf(options.token());
    const headers: Record<string, string> = { accept: "text/event-stream", ...credentials.headers };
    let path = options.path;
    if (lastId) headers["last-event-id"] = lastId;
    else if (lastId === "") path += `${path.includes("?") ? "&" : "?"}after=`;
    const response = await fetch(path, {
      headers,
      signal: controller.signal,
      cache: "no-store",
      credentials: credentials.credentials,
    });
    if (!response.ok || !response.body) {
      let message = `HTTP ${response.status}`;
      try {
        const body = (await response.json()) as { message?: string };
        if (body.message) message = body.message;
      } catch {
        // not JSON
      }
      if (FATAL_STATUS.has(response.status)) {
        options.onState("ended", message);
        return "stop";
      }
      throw new Error(message);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let frame: Frame = { event: "message", data: [], id: undefined };
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return "retry";
      buffer += value;
      // A CR at the end of a chunk may be the first half of a CRLF: keep it for the next chunk.
      const held = buffer.endsWith("\r") ? "\r" : "";
      const lines = buffer.slice(0, buffer.length - held.length).split(/\r\n|\r|\n/);
      buffer = (lines.pop() ?? "") + held;
      for (const line of lines) {
        if (line === "") {
          if (frame.id !== undefined) lastId = frame.id;
          if (frame.data.length > 0 || frame.event !== "message") {
            const text = frame.data.join("\n");
            let data: unknown = text;
            try {
              data = text ? JSON.parse(text) : {};
            } catch {
              // keep the text
            }
            if (options.readyEvents.includes(frame.event)) {
              attempt = 0;
              options.onState("live", "");
            }
            options.onEvent(frame.event, data, frame.id);
            if (options.terminalEvents.includes(frame.event)) {
              controller.abort();
              return "stop";
            }
          }
          frame = { event: "message", data: [], id: undefined };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") frame.event = value;
        else if (field === "data") frame.data.push(value);
        else if (field === "id" && !value.includes("\0")) frame.id = value;
      }
    }
  };

  const run = async () => {
    options.onState("connecting", "");
    while (!closed) {
      let outcome: "retry" | "stop" = "retry";
      let reason = "the stream ended";
      try {
        outcome = await connect();
      } catch (error) {
        reason = (error as Error).message || "connection lost";
      }
      if (closed || outcome === "stop") return;
      const delay = Math.min(max, initial * 2 ** attempt) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      options.onState("reconnecting", `${reason}; retrying in ${Math.ceil(delay / 1000)} s`);
      await sleep(delay);
    }
  };
  const stopped = run();

  return {
    stopped,
    lastEventId: () => lastId,
    drop: () => current?.abort(),
    close() {
      closed = true;
      current?.abort();
      wake?.();
    },
  };
}
