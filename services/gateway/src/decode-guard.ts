import { type DescMessage, fromBinary, fromJsonString } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";

/**
 * Connect answers INTERNAL for a binary body it cannot decode (`parse binary: premature EOF`) and
 * for a compressed envelope without an encoding; both are the caller's fault. This guard reads
 * binary request bodies first (Connect unary `application/proto`, Connect streaming and gRPC-Web
 * envelopes; JSON bodies too, to name the field of an unknown enum name) and answers
 * INVALID_ARGUMENT itself when they do not decode; otherwise the body is
 * handed on unchanged. Written here because Connect has no hook between reading and parsing.
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

function decodes(schema: DescMessage, bytes: Uint8Array): string | null {
  try {
    fromBinary(schema, bytes);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * The snake_case name of the field a JSON decoding error is about: protobuf-es names the field for
 * wrong types but only the enum type for an unknown enum name.
 */
function fieldOfJsonError(schema: DescMessage, message: string): string {
  const named = /cannot decode field [\w.]+\.(\w+) from JSON/.exec(message);
  if (named?.[1]) return schema.fields.find((f) => f.name === named[1] || f.jsonName === named[1])?.name ?? named[1];
  const enumName = /cannot decode enum ([\w.]+) from JSON/.exec(message)?.[1];
  const field = enumName ? schema.fields.find((f) => f.enum?.typeName === enumName) : undefined;
  return field?.name ?? "request";
}

/** What is wrong with the body, or null when it decodes (or is compressed and left to Connect). */
function problemOf(schema: DescMessage, kind: Kind, encoding: string | null, body: Uint8Array): string | null {
  const json = kind === "json" || kind === "connect-json-stream";
  const check = (bytes: Uint8Array): string | null => {
    if (json) {
      try {
        fromJsonString(schema, new TextDecoder().decode(bytes), { ignoreUnknownFields: false });
        return null;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        return `${fieldOfJsonError(schema, message)}: ${message}`;
      }
    }
    const failure = decodes(schema, bytes);
    return failure === null ? null : `request: is not a valid ${schema.typeName} message (${failure})`;
  };
  if (kind === "unary" || kind === "json") return encoding ? null : check(body);
  let offset = 0;
  while (offset < body.length) {
    if (body.length - offset < 5) return "request: truncated envelope";
    const flags = body[offset]!;
    const length = new DataView(body.buffer, body.byteOffset + offset + 1, 4).getUint32(0);
    const end = offset + 5 + length;
    if (end > body.length) return "request: truncated envelope";
    if (flags & 0x01) {
      if (!encoding) return "request: compressed envelope without a message encoding";
    } else {
      const failure = check(body.subarray(offset + 5, end));
      if (failure !== null) return failure;
    }
    offset = end;
  }
  return null;
}

function refusal(kind: Kind, message: string): UniversalServerResponse {
  const bytes = (text: string) => new TextEncoder().encode(text);
  const once = (chunk: Uint8Array) =>
    (async function* () {
      yield chunk;
    })();
  if (kind === "unary" || kind === "json") {
    const body = bytes(JSON.stringify({ code: "invalid_argument", message }));
    return { status: 400, header: new Headers({ "content-type": "application/json" }), body: once(body) };
  }
  if (kind === "grpc-web") {
    const header = new Headers({
      "content-type": "application/grpc-web+proto",
      "grpc-status": "3",
      "grpc-message": encodeURIComponent(message),
    });
    return { status: 200, header, body: once(new Uint8Array(0)) };
  }
  const end = bytes(JSON.stringify({ error: { code: "invalid_argument", message } }));
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
      // Over the limit: Connect refuses it with its own error; nothing more is buffered here.
      if (size > maxBytes) return handler({ ...request, body: replay(chunks, iterator) });
    }
    const all = Buffer.concat(chunks);
    const problem = problemOf(handler.method.input, kind, encodingOf(request, kind), all);
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

/** Wraps registered routes so undecodable binary bodies answer INVALID_ARGUMENT (see above). */
export function guardDecoding(routes: (router: ConnectRouter) => void, maxBytes: number) {
  return (router: ConnectRouter) => {
    routes(router);
    const handlers = router.handlers;
    for (let i = 0; i < handlers.length; i++) handlers[i] = guard(handlers[i]!, maxBytes);
  };
}
