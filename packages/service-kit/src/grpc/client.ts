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

/**
 * Method-name prefixes of the RPCs that are safe to retry on UNAVAILABLE: reads (Get, List, Read,
 * Check, and the DronesSince page), token lookups (Authenticate) and the server streams (Subscribe,
 * Watch: grpc-js retries a stream only before its first message, and the caller resumes from its
 * cursor after that). No write is in the list: a write whose reply was lost is not replayed blindly.
 */
const RETRY_SAFE_PREFIXES = ["Get", "List", "Read", "Check", "Authenticate", "Subscribe", "Watch"] as const;
/** Whole method names safe to retry that the prefixes do not cover. */
const RETRY_SAFE_METHODS = new Set(["DronesSince"]);

/** True when `method` (a contract method name such as `ListCubes`) may be retried on UNAVAILABLE. */
export function isRetrySafe(method: string): boolean {
  return RETRY_SAFE_METHODS.has(method) || RETRY_SAFE_PREFIXES.some((prefix) => method.startsWith(prefix));
}

const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::\d{1,5})?$/;
const IPV4_PORT = /^\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?$/;
const IPV6_PORT = /^(?:\[[0-9A-Fa-f:.]+\](?::\d{1,5})?|[0-9A-Fa-f:.]+)$/;

/**
 * True for a gRPC target grpc-js can dial: `host:port`, `[::1]:7001`, `dns:///host:port`
 * (or `dns://authority/host:port`), `ipv4:a:port,b:port`, `ipv6:[::1]:port,…`, `unix:/path`.
 * Empty names, spaces and empty list items are refused.
 */
export function isGrpcTarget(target: string): boolean {
  if (/\s/.test(target) || target.length === 0) return false;
  const list = (rest: string, item: RegExp) => rest.length > 0 && rest.split(",").every((part) => item.test(part));
  if (target.startsWith("dns:")) {
    const rest = target.slice(4).replace(/^\/\/[^/]*\//, "");
    return rest.length > 0 && HOST_PORT.test(rest);
  }
  if (target.startsWith("ipv4:")) return list(target.slice(5), IPV4_PORT);
  if (target.startsWith("ipv6:")) return list(target.slice(5), IPV6_PORT);
  if (target.startsWith("unix:")) return target.length > 5;
  return HOST_PORT.test(target) && /:\d{1,5}$/.test(target);
}

/**
 * The receive window of a kit client's connection and streams: 4 MiB, what one connection may
 * hold unread across all its streams (grpc-java opens 1 MiB, grpc-go's estimator grows to 16).
 */
export const FLOW_CONTROL_WINDOW = 4 * 1024 * 1024;

/** Dialing settings of internal clients (keepalive, retry budget); the defaults suit a cluster. */
export interface DialOptions {
  /** Interval of keepalive pings on an open connection (ms). */
  readonly keepaliveMs?: number;
  /** Most attempts of a retry-safe call that meets UNAVAILABLE (first try included). */
  readonly maxAttempts?: number;
}

/**
 * grpc-js channel options for an internal client of `service`: `round_robin` over every address
 * the target resolves to, keepalive pings (so a dead peer is noticed and its calls fail over), and
 * a retry policy for UNAVAILABLE on the service's retry-safe methods (see `isRetrySafe`).
 */
function dialOptions(service: DescService, options: DialOptions = {}): grpc.ChannelOptions {
  const safe = service.methods.filter((method) => isRetrySafe(method.name));
  const serviceConfig = {
    loadBalancingConfig: [{ round_robin: {} }],
    methodConfig:
      safe.length === 0
        ? []
        : [
            {
              name: safe.map((method) => ({ service: service.typeName, method: method.name })),
              retryPolicy: {
                maxAttempts: options.maxAttempts ?? 4,
                initialBackoff: "0.05s",
                maxBackoff: "1s",
                backoffMultiplier: 2,
                retryableStatusCodes: ["UNAVAILABLE"],
              },
            },
          ],
  };
  return {
    "grpc.service_config": JSON.stringify(serviceConfig),
    "grpc.service_config_disable_resolution": 1,
    "grpc.enable_retries": 1,
    "grpc.keepalive_time_ms": options.keepaliveMs ?? 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.keepalive_permit_without_calls": 1,
    // Re-resolve DNS at most this often (ms) when a connection drops, so new pods are found soon.
    "grpc.dns_min_time_between_resolutions_ms": 5_000,
    // HTTP/2 receive window of the connection and of each stream (default 64 KiB). Every stream
    // of a client shares one connection: at the default, a fan-out of 1,000 streams waited on
    // window updates with both processes half idle. See FLOW_CONTROL_WINDOW.
    "grpc-node.flow_control_window": FLOW_CONTROL_WINDOW,
  };
}

/**
 * A typed client for `service` at `target` (any gRPC target, see `isGrpcTarget`), plaintext
 * unless credentials are given, dialed with `dialOptions` (extra `channelOptions` win).
 */
export function createClient<S extends DescService>(
  service: S,
  target: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  channelOptions: grpc.ChannelOptions = {},
): TypedClient<S> {
  const Ctor = grpc.makeGenericClientConstructor(serviceDefinition(service), service.typeName);
  const raw = new Ctor(target, credentials, { ...dialOptions(service), ...channelOptions }) as unknown as Record<
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
