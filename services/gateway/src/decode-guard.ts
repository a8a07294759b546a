import { brotliDecompressSync, gunzipSync } from "node:zlib";
import type { DescMessage } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { status } from "@grpc/grpc-js";
import { binaryFault, jsonTextFault } from "@unimatrix/service-kit/grpc";
import { errorJson, statusRow, TOO_LARGE_HTTP } from "./status-table";

/**
 * Connect answers INTERNAL for a binary body it cannot decode (`parse binary: premature EOF`) and
 * for a compressed envelope without an encoding, names no field for a bad binary string or JSON
 * timestamp, and answers 429 resource_exhausted (retry later) for a body over the limit. This
 * guard reads request bodies first (Connect unary and streaming, JSON and binary, gRPC-Web
 * envelopes; gzip and br decompressed up to the limit, so a gzip bomb is caught too) and answers
 * itself: INVALID_ARGUMENT naming the field at fault (the kit's `binaryFault`/`jsonTextFault`)
 * when they do not decode, HTTP 413 when they are over the limit (docs/decisions.md); otherwise
 * the body is handed on unchanged. Written here because Connect has no hook between reading and
 * parsing.
 */
type Kind = "unary" | "json" | "connect-stream" | "connect-json-stream" | "grpc-web";

function kindOf(request: UniversalServerRequest): Kind | null {
  if (request.method !== "POST") return null;
  const type = (request.header.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "application/proto") return "unary";
  if (type === "application/json") return "json";
  if (type === "application/connect+proto") return "connect-stream";
  if (type === "application/connect+json") return "connect-json-stream";
  if (type === "application/grpc-web" || type === "application/grpc-web+proto") return "grpc-web";
  return null;
}

/** The request's encoding header (`identity` or absent = none). */
function encodingOf(request: UniversalServerRequest, kind: Kind): string | null {
  const name =
    kind === "unary" || kind === "json"
      ? "content-encoding"
      : kind === "grpc-web"
        ? "grpc-encoding"
        : "connect-content-encoding";
  const value = request.header.get(name)?.trim().toLowerCase();
  return value && value !== "identity" ? value : null;
}

/** Over the body limit (before or after decompression): 413, whatever the protocol (docs/decisions.md). */
class TooLarge {
  constructor(readonly limit: number) {}
  get message() {
    return `request: body is larger than the limit of ${this.limit} bytes`;
  }
}

/** The decompressed bytes, at most `limit` of them; null for an encoding left to Connect (it refuses those). */
function decompress(encoding: string, bytes: Uint8Array, limit: number): Buffer | TooLarge | string | null {
  const options = { maxOutputLength: limit + 1 };
  try {
    const out =
      encoding === "gzip"
        ? gunzipSync(bytes, options)
        : encoding === "br"
          ? brotliDecompressSync(bytes, options)
          : null;
    return out && out.length > limit ? new TooLarge(limit) : out;
  } catch (error) {
    if ((error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") return new TooLarge(limit);
    return `request: cannot decompress the ${encoding} body (${(error as Error).message})`;
  }
}

/** What is wrong with the body, or null when it decodes (or uses an encoding left to Connect). */
function problemOf(
  schema: DescMessage,
  kind: Kind,
  encoding: string | null,
  body: Uint8Array,
  limit: number,
): string | TooLarge | null {
  const json = kind === "json" || kind === "connect-json-stream";
  const check = (bytes: Uint8Array): string | TooLarge | null => {
    const fault = json ? jsonTextFault(schema, new TextDecoder().decode(bytes)) : binaryFault(schema, bytes);
    if (!fault) return null;
    return json
      ? `${fault.field}: ${fault.reason}`
      : `${fault.field}: is not a valid ${schema.typeName} message (${fault.reason})`;
  };
  const plain = (bytes: Uint8Array): string | TooLarge | null => {
    if (!encoding) return check(bytes);
    const out = decompress(encoding, bytes, limit);
    return out === null || typeof out === "string" || out instanceof TooLarge ? out : check(out);
  };
  if (kind === "unary" || kind === "json") return plain(body);
  let offset = 0;
  while (offset < body.length) {
    if (body.length - offset < 5) return "request: truncated envelope";
    const flags = body[offset]!;
    const length = new DataView(body.buffer, body.byteOffset + offset + 1, 4).getUint32(0);
    const end = offset + 5 + length;
    if (end > body.length) return "request: truncated envelope";
    const payload = body.subarray(offset + 5, end);
    if (flags & 0x01) {
      if (!encoding) return "request: compressed envelope without a message encoding";
      const failure = plain(payload);
      if (failure !== null) return failure;
    } else {
      const failure = check(payload);
      if (failure !== null) return failure;
    }
    offset = end;
  }
  return null;
}

function refusal(kind: Kind, message: string, http = statusRow(status.INVALID_ARGUMENT).http): UniversalServerResponse {
  const bytes = (text: string) => new TextEncoder().encode(text);
  const once = (chunk: Uint8Array) =>
    (async function* () {
      yield chunk;
    })();
  if (kind === "unary" || kind === "json") {
    const body = bytes(JSON.stringify(errorJson(status.INVALID_ARGUMENT, message)));
    return { status: http, header: new Headers({ "content-type": "application/json" }), body: once(body) };
  }
  if (kind === "grpc-web") {
    const header = new Headers({
      "content-type": "application/grpc-web+proto",
      "grpc-status": String(status.INVALID_ARGUMENT),
      "grpc-message": encodeURIComponent(message),
    });
    return { status: 200, header, body: once(new Uint8Array(0)) };
  }
  const end = bytes(JSON.stringify({ error: errorJson(status.INVALID_ARGUMENT, message) }));
  const frame = new Uint8Array(5 + end.length);
  frame[0] = 0x02;
  new DataView(frame.buffer).setUint32(1, end.length);
  frame.set(end, 5);
  const type = kind === "connect-json-stream" ? "application/connect+json" : "application/connect+proto";
  return { status: 200, header: new Headers({ "content-type": type }), body: once(frame) };
}

async function* replay(chunks: Uint8Array[], rest: AsyncIterator<Uint8Array> | null) {
  yield* chunks;
  if (!rest) return;
  for (;;) {
    const next = await rest.next();
    if (next.done) return;
    yield next.value;
  }
}

function guard(handler: UniversalHandler, maxBytes: number): UniversalHandler {
  const guarded = async (request: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const kind = kindOf(request);
    const body = request.body as AsyncIterable<Uint8Array> | undefined;
    if (!kind || !body || typeof body !== "object" || !(Symbol.asyncIterator in body)) return handler(request);
    const iterator = body[Symbol.asyncIterator]();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      chunks.push(next.value);
      size += next.value.length;
      // Over the limit: refused here, nothing more is buffered (the rest is drained by Node).
      if (size > maxBytes) return refusal(kind, new TooLarge(maxBytes).message, TOO_LARGE_HTTP);
    }
    const all = Buffer.concat(chunks);
    const problem = problemOf(handler.method.input, kind, encodingOf(request, kind), all, maxBytes);
    if (problem instanceof TooLarge) return refusal(kind, problem.message, TOO_LARGE_HTTP);
    if (problem) return refusal(kind, problem);
    return handler({ ...request, body: replay([all], null) });
  };
  return Object.assign(guarded, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}

/** Wraps registered routes so undecodable bodies answer INVALID_ARGUMENT and oversized ones 413 (see above). */
export function guardDecoding(routes: (router: ConnectRouter) => void, maxBytes: number) {
  return (router: ConnectRouter) => {
    routes(router);
    const handlers = router.handlers;
    for (let i = 0; i < handlers.length; i++) handlers[i] = guard(handlers[i]!, maxBytes);
  };
}
