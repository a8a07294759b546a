import type { DescMethod } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { PRINCIPAL_HEADER } from "@unimatrix/service-kit/auth";
import { PUBLIC_SERVICES } from "../../src/upstreams";
import type { System } from "../system";

/** What one request got back: a gRPC status name (lower snake, Connect's spelling) and message. */
export interface Answer {
  readonly code: string;
  readonly message: string;
  /** The HTTP status (Connect) or 200 (gRPC). */
  readonly http: number;
  /** The whole answer as text, for leak checks. */
  readonly text: string;
}

const CODE_NAMES = Object.fromEntries(
  Object.entries(grpc.status)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v as number, k.toLowerCase()]),
);

function envelope(flags: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(5 + payload.length);
  frame[0] = flags;
  new DataView(frame.buffer).setUint32(1, payload.length);
  frame.set(payload, 5);
  return frame;
}

/** The services the gateway forwards (internal ones, such as NoticeService, are gRPC only). */
const FORWARDED = new Set(PUBLIC_SERVICES.map((s) => s.service.typeName));

/** Whether the gateway serves the method over Connect (bidi streams, Authenticate and internal services are gRPC only). */
export function servedByGateway(method: DescMethod): boolean {
  return (
    FORWARDED.has(method.parent.typeName) && method.methodKind !== "bidi_streaming" && method.name !== "Authenticate"
  );
}

/** A Connect call through the gateway with a raw body: JSON or binary, unary or server-streaming. */
export async function connectCall(
  system: System,
  method: DescMethod,
  format: "json" | "proto",
  body: Uint8Array,
  token: string,
): Promise<Answer> {
  const url = `${system.url}/${method.parent.typeName}/${method.name}`;
  const streaming = method.methodKind === "server_streaming";
  const type = streaming ? `application/connect+${format}` : `application/${format}`;
  const signal = AbortSignal.timeout(streaming ? 3_000 : 15_000);
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": type, authorization: `Bearer ${token}`, "connect-protocol-version": "1" },
    body: Buffer.from(streaming ? envelope(0, body) : body),
    signal,
  });
  if (!streaming) {
    const text = await response.text();
    if (response.status === 200) return { code: "ok", message: "", http: 200, text };
    const parsed = JSON.parse(text) as { code?: string; message?: string };
    return { code: parsed.code ?? "unknown", message: parsed.message ?? "", http: response.status, text };
  }
  // Read frames until the end-stream frame (or a data frame: the stream was accepted).
  const chunks: Buffer[] = [];
  const reader = response.body!.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(Buffer.from(value));
      const all = Buffer.concat(chunks);
      const offset = 0;
      while (all.length - offset >= 5) {
        const flags = all[offset]!;
        const length = all.readUInt32BE(offset + 1);
        if (all.length - offset - 5 < length) break;
        const payload = all.subarray(offset + 5, offset + 5 + length);
        if (flags & 0x02) {
          const end = JSON.parse(payload.toString("utf8") || "{}") as { error?: { code: string; message?: string } };
          const text = payload.toString("utf8");
          return end.error
            ? { code: end.error.code, message: end.error.message ?? "", http: response.status, text }
            : { code: "ok", message: "", http: response.status, text };
        }
        return { code: "ok", message: "", http: response.status, text: payload.toString("latin1") };
      }
    }
  } catch {
    return { code: "ok", message: "stream stayed open", http: response.status, text: "" };
  } finally {
    void reader.cancel().catch(() => {});
  }
  return { code: "unknown", message: "stream ended without an end frame", http: response.status, text: "" };
}

/** A raw gRPC call (bytes in, first answer out) straight to a service, as grpc-js would make it. */
export function grpcCall(
  client: grpc.Client,
  method: DescMethod,
  body: Uint8Array,
  auth: { readonly bearer: string } | { readonly principal: string },
): Promise<Answer> {
  const path = `/${method.parent.typeName}/${method.name}`;
  const metadata = new grpc.Metadata();
  if ("bearer" in auth) metadata.set("authorization", `Bearer ${auth.bearer}`);
  else metadata.set(PRINCIPAL_HEADER, auth.principal);
  const identity = (b: Buffer) => b;
  const fromError = (error: grpc.ServiceError): Answer => ({
    code: CODE_NAMES[error.code] ?? "unknown",
    message: error.details,
    http: 200,
    text: error.details,
  });
  return new Promise<Answer>((resolve) => {
    const options = { deadline: Date.now() + 8_000 };
    if (method.methodKind === "unary") {
      client.makeUnaryRequest(path, identity, identity, Buffer.from(body), metadata, options, (error, value) =>
        resolve(
          error ? fromError(error) : { code: "ok", message: "", http: 200, text: value?.toString("latin1") ?? "" },
        ),
      );
      return;
    }
    const call =
      method.methodKind === "server_streaming"
        ? client.makeServerStreamRequest(path, identity, identity, Buffer.from(body), metadata, options)
        : client.makeBidiStreamRequest(path, identity, identity, metadata, options);
    let settled = false;
    const settle = (answer: Answer) => {
      if (settled) return;
      settled = true;
      resolve(answer);
      call.cancel();
    };
    call.on("data", (value: Buffer) => settle({ code: "ok", message: "", http: 200, text: value.toString("latin1") }));
    call.on("error", (error: grpc.ServiceError) => settle(fromError(error)));
    call.on("end", () => settle({ code: "ok", message: "", http: 200, text: "" }));
    if (method.methodKind === "bidi_streaming")
      (call as grpc.ClientDuplexStream<Buffer, Buffer>).write(Buffer.from(body));
  });
}
