import type { DescMessage, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { serviceDefinition } from "./definition";

/** Per-call options of a typed client. */
export interface ClientCallOptions {
  readonly metadata?: grpc.Metadata | Record<string, string>;
  /** Absolute deadline, or milliseconds from now. */
  readonly deadline?: Date | number;
  /** Cancels the call when aborted. */
  readonly signal?: AbortSignal;
}

/** A bidirectional call: send requests, iterate responses. */
export interface BidiCall<I extends DescMessage, O extends DescMessage> extends AsyncIterable<MessageShape<O>> {
  send(request: MessageInitShape<I>): void;
  /** Half-closes: no more requests. */
  end(): void;
  cancel(): void;
  /** The underlying grpc-js call (events, status). */
  readonly call: grpc.ClientDuplexStream<MessageInitShape<I>, MessageShape<O>>;
}

type ClientMethod<M> = M extends {
  methodKind: "unary";
  input: infer I extends DescMessage;
  output: infer O extends DescMessage;
}
  ? (request: MessageInitShape<I>, options?: ClientCallOptions) => Promise<MessageShape<O>>
  : M extends {
        methodKind: "server_streaming";
        input: infer I extends DescMessage;
        output: infer O extends DescMessage;
      }
    ? (request: MessageInitShape<I>, options?: ClientCallOptions) => grpc.ClientReadableStream<MessageShape<O>>
    : M extends {
          methodKind: "bidi_streaming";
          input: infer I extends DescMessage;
          output: infer O extends DescMessage;
        }
      ? (options?: ClientCallOptions) => BidiCall<I, O>
      : never;

/** A promise/async-iterator client of a protobuf-es described service, over a stock grpc-js client. */
export type TypedClient<S extends DescService> = { [K in keyof S["method"]]: ClientMethod<S["method"][K]> } & {
  /** The grpc-js client underneath. */
  readonly raw: grpc.Client;
  close(): void;
};

function metadataOf(options?: ClientCallOptions): grpc.Metadata {
  if (!options?.metadata) return new grpc.Metadata();
  if (options.metadata instanceof grpc.Metadata) return options.metadata;
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(options.metadata)) metadata.set(key, value);
  return metadata;
}

function callOptionsOf(options?: ClientCallOptions): grpc.CallOptions {
  if (options?.deadline === undefined) return {};
  return { deadline: typeof options.deadline === "number" ? Date.now() + options.deadline : options.deadline };
}

/** Cancels `call` when `signal` aborts; the listener goes when the call ends, so long-lived signals do not pile up. */
function linkSignal(
  call: { cancel(): void; once(event: "status", listener: () => void): unknown },
  signal?: AbortSignal,
) {
  if (!signal) return;
  if (signal.aborted) return call.cancel();
  const cancel = () => call.cancel();
  signal.addEventListener("abort", cancel, { once: true });
  call.once("status", () => signal.removeEventListener("abort", cancel));
}

/** A typed client for `service` at `address` (`host:port`), plaintext unless credentials are given. */
export function createClient<S extends DescService>(
  service: S,
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  channelOptions: grpc.ChannelOptions = {},
): TypedClient<S> {
  const Ctor = grpc.makeGenericClientConstructor(serviceDefinition(service), service.typeName);
  const raw = new Ctor(address, credentials, channelOptions) as unknown as Record<
    string,
    (...args: unknown[]) => unknown
  > &
    grpc.Client;
  const client: Record<string, unknown> = { raw, close: () => raw.close() };
  for (const method of service.methods) {
    const fn = raw[method.localName]!.bind(raw);
    switch (method.methodKind) {
      case "unary":
        client[method.localName] = (request: unknown, options?: ClientCallOptions) =>
          new Promise((resolve, reject) => {
            const call = fn(
              request,
              metadataOf(options),
              callOptionsOf(options),
              (error: unknown, response: unknown) => (error ? reject(error) : resolve(response)),
            ) as grpc.ClientUnaryCall;
            linkSignal(call, options?.signal);
          });
        break;
      case "server_streaming":
        client[method.localName] = (request: unknown, options?: ClientCallOptions) => {
          const call = fn(request, metadataOf(options), callOptionsOf(options)) as grpc.ClientReadableStream<unknown>;
          linkSignal(call, options?.signal);
          return call;
        };
        break;
      case "bidi_streaming":
        client[method.localName] = (options?: ClientCallOptions) => {
          const call = fn(metadataOf(options), callOptionsOf(options)) as grpc.ClientDuplexStream<unknown, unknown>;
          linkSignal(call, options?.signal);
          return {
            call,
            send: (request: unknown) => call.write(request),
            end: () => call.end(),
            cancel: () => call.cancel(),
            [Symbol.asyncIterator]: () => call[Symbol.asyncIterator](),
          };
        };
        break;
      default:
        break;
    }
  }
  return client as TypedClient<S>;
}
