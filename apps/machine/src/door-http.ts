import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  answerHook,
  HOOK_EVENTS,
  HOOK_FORMATS,
  type HookEvent,
  type HookFormat,
  HookInputError,
  parseHookInput,
} from "./hook-answer";
import type { DoorItem } from "./protocol";

/** Handles one request line from a door connection; the answer is written back as one line. */
export type DoorHandler = (request: Record<string, unknown>, connection: Socket) => Promise<unknown> | unknown;

/** The largest hook input the door reads (the Node hook's stdin limit). */
const MAX_BODY = 1024 * 1024;

/** Notices answered on a connection and not yet reported handed, by connection. */
const answered = new WeakMap<Socket, string[]>();

/** The request's header `name` (one value), or undefined. */
function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

function reply(res: ServerResponse, status: number, body = "", headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    "Content-Type": status === 200 ? "application/octet-stream" : "text/plain; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(body)),
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(body);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new HookInputError(`the hook input is larger than ${MAX_BODY} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** A header value the door accepts: non-empty, at most `max` characters. */
function field(req: IncomingMessage, name: string, max: number, fallback?: string): string | undefined {
  const value = header(req, name) ?? fallback;
  if (value !== undefined && value.length > max) throw new HookInputError(`${name} must be at most ${max} characters`);
  return value;
}

/**
 * `POST /v1/hook/<event>`: the hook's whole run in the daemon. Headers `x-unimatrix-harness`,
 * `x-unimatrix-format` (claude | text), `x-unimatrix-drone-token`, `x-unimatrix-drone-id`; the
 * body is the host's hook JSON. Answers 200 with exactly the bytes the hook prints (empty when
 * nothing), and keeps the notices in them reserved for this connection.
 */
async function hookRun(event: HookEvent, req: IncomingMessage, res: ServerResponse, handle: DoorHandler) {
  const socket = req.socket;
  const harness = field(req, "x-unimatrix-harness", 64, "claude-code") as string;
  const format = field(req, "x-unimatrix-format", 16, "claude") as string;
  if (!(HOOK_FORMATS as readonly string[]).includes(format))
    throw new HookInputError("x-unimatrix-format must be claude or text");
  const droneToken = field(req, "x-unimatrix-drone-token", 4096);
  const droneId = field(req, "x-unimatrix-drone-id", 4096);
  const { session, stopHookActive } = parseHookInput(await readBody(req));
  if (session.length > 512) throw new HookInputError("session_id must be at most 512 characters");
  const call = async (request: Record<string, unknown>) => {
    const answer = (await handle(request, socket)) as { ok?: boolean; error?: string };
    if (answer.ok !== true) throw new Error(answer.error ?? "the daemon refused the request");
    return answer;
  };
  const { out, ids } = await answerHook(
    event,
    session,
    stopHookActive,
    {
      harness,
      format: format as HookFormat,
      ...(droneToken ? { droneToken } : {}),
      ...(droneId ? { droneId } : {}),
    },
    {
      hello: (request) => call({ op: "hello", ...request }),
      take: async (request) => ((await call({ op: "take", ...request })) as unknown as { items: DoorItem[] }).items,
      bye: (request) => call({ op: "bye", ...request }),
    },
  );
  answered.set(socket, [...(answered.get(socket) ?? []), ...ids]);
  reply(res, 200, out);
}

/**
 * The door's HTTP/1.1 face, for a client with no JSON-lines code (the `unimatrix-hook` sh script
 * over `curl --unix-socket`). It is fed connections by the door (never listens itself: no TCP),
 * answers only `POST /v1/hook/<event>` and `POST /v1/handed` (on the same connection, after the
 * client printed the answer: the notices are then handed, as the `handed` line does), sends no
 * CORS header and refuses any request carrying an `Origin`.
 */
export function hookHttp(handle: DoorHandler): Server {
  const server = createServer({ keepAliveTimeout: 5_000, headersTimeout: 5_000, requestTimeout: 10_000 });
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? "";
    if (req.headers.origin !== undefined) return reply(res, 403, "the door answers local clients only\n");
    const event = url.startsWith("/v1/hook/") ? url.slice("/v1/hook/".length) : undefined;
    if (url !== "/v1/handed" && event === undefined) return reply(res, 404, `no such path ${url}\n`);
    if (req.method !== "POST") return reply(res, 405, "use POST\n", { Allow: "POST" });
    if (url === "/v1/handed") {
      const ids = answered.get(req.socket) ?? [];
      answered.delete(req.socket);
      req.resume();
      void Promise.resolve(handle({ op: "handed", ids }, req.socket)).then(
        () => reply(res, 204),
        (error: Error) => reply(res, 503, `${error.message}\n`),
      );
      return;
    }
    if (!(HOOK_EVENTS as readonly string[]).includes(event as string))
      return reply(res, 404, `unknown hook event ${event}; choose from ${HOOK_EVENTS.join(", ")}\n`);
    hookRun(event as HookEvent, req, res, handle).catch((error: Error) => {
      if (res.headersSent) return;
      reply(res, error instanceof HookInputError ? 400 : 503, `${error.message}\n`);
    });
  });
  return server;
}
