import { once } from "node:events";
import { create, type DescMessage, type DescService } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { Health as HealthService } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { ServerReflection as ReflectionService } from "@unimatrix/contracts/grpc/reflection/v1/reflection_pb";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal";
import { ShutdownReason, UnauthenticatedError, UnimplementedError } from "../errors";
import { REQUEST_ID_HEADER, requestIdFrom } from "../logger";
import type { CallObservation, CallObserver } from "../observe/calls";
import { TRACEPARENT_HEADER } from "../observe/trace";
import type { Authenticate, CallContext, ServiceImpl } from "./call";
import { serviceDefinition } from "./definition";
import { HealthRegistry, healthImpl, LIVENESS_SERVICE } from "./health";
import { reflectionImpl } from "./reflection";
import { withRequestRules } from "./request-rules";
import { toCallStatus } from "./status";

/** Options of a gRPC host. */
export interface GrpcHostOptions {
  readonly logger: Logger;
  /** How callers are authenticated; without it every `ctx.principal()` is UNAUTHENTICATED. */
  readonly authenticate?: Authenticate;
  /** Largest accepted request message, bytes (default 4 MiB). */
  readonly maxReceiveMessageBytes?: number;
  /** Watches every call (metrics, access log); see `callObserver`. */
  readonly observe?: CallObserver;
  /**
   * Age after which a client connection is sent GOAWAY, so clients re-resolve and spread onto new
   * replicas (0 or unset: never). Calls in flight keep running on it for `maxConnectionAgeGraceMs`.
   */
  readonly maxConnectionAgeMs?: number;
  /** How long calls may go on on an aged connection before it is closed (unset: until they end). */
  readonly maxConnectionAgeGraceMs?: number;
}

/** grpc-js method kinds as the go-grpc-prometheus `grpc_type` label names them. */
const GRPC_TYPES: Record<string, string> = {
  unary: "unary",
  server_streaming: "server_stream",
  client_streaming: "client_stream",
  bidi_streaming: "bidi_stream",
};

type AnyCall =
  | grpc.ServerUnaryCall<unknown, unknown>
  | grpc.ServerWritableStream<unknown, unknown>
  | grpc.ServerReadableStream<unknown, unknown>
  | grpc.ServerDuplexStream<unknown, unknown>;

/**
 * Hosts protobuf-es described services on `@grpc/grpc-js`, with `grpc.health.v1`, server
 * reflection, typed error mapping, request ids and graceful shutdown.
 */
export class GrpcHost {
  readonly health = new HealthRegistry();
  readonly #server: grpc.Server;
  readonly #logger: Logger;
  readonly #authenticate: Authenticate | undefined;
  readonly #observe: CallObserver | undefined;
  readonly #services: DescService[] = [];
  readonly #open = new Set<AbortController>();
  #stopping = false;

  constructor(options: GrpcHostOptions) {
    this.#logger = options.logger;
    this.#authenticate = options.authenticate;
    this.#observe = options.observe;
    this.#server = new grpc.Server({
      "grpc.max_receive_message_length": options.maxReceiveMessageBytes ?? 4 * 1024 * 1024,
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_permit_without_calls": 1,
      ...(options.maxConnectionAgeMs ? { "grpc.max_connection_age_ms": options.maxConnectionAgeMs } : {}),
      ...(options.maxConnectionAgeMs && options.maxConnectionAgeGraceMs
        ? { "grpc.max_connection_age_grace_ms": options.maxConnectionAgeGraceMs }
        : {}),
    });
  }

  /** Serves a service. Methods missing from `impl` answer UNIMPLEMENTED. */
  addService<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): this {
    this.#server.addService(serviceDefinition(service), this.#handlers(service, impl));
    this.#services.push(service);
    this.health.set(service.typeName, "SERVING");
    return this;
  }

  /** Binds and starts serving; resolves with the bound port (useful with port 0). */
  async listen(host: string, port: number): Promise<number> {
    this.#server.addService(serviceDefinition(HealthService), this.#handlers(HealthService, healthImpl(this.health)));
    this.#server.addService(
      serviceDefinition(ReflectionService),
      this.#handlers(ReflectionService, reflectionImpl([...this.#services, HealthService])),
    );
    this.health.set("", "SERVING");
    this.health.set(LIVENESS_SERVICE, "SERVING");
    const address = host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
    return new Promise((resolve, reject) => {
      this.#server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      );
    });
  }

  /**
   * Stops: health NOT_SERVING at once; keeps serving (new calls too) for `drainDelayMs` so load
   * balancers and resolvers move away; then aborts every open call with `ShutdownReason` (streams
   * send their typed going-away and end), refuses new calls, and cuts whatever is still open after
   * `graceMs`.
   */
  async shutdown(graceMs: number, drainDelayMs = 0): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    this.health.shutdown();
    // Let health watchers send NOT_SERVING before their streams are told to end.
    await new Promise((resolve) => setImmediate(resolve));
    if (drainDelayMs > 0) {
      this.#logger.info({ drainDelayMs }, "draining: NOT_SERVING, still serving until the delay is over");
      await new Promise((resolve) => setTimeout(resolve, drainDelayMs));
    }
    for (const controller of this.#open) controller.abort(new ShutdownReason());
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#server.forceShutdown();
        resolve();
      }, graceMs);
      timer.unref();
      this.#server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Stops like a crash (chaos drills and tests): every connection is cut at once, no going-away. */
  kill(): void {
    this.#stopping = true;
    this.#server.forceShutdown();
  }

  #context(
    call: AnyCall,
    method: string,
    observed: { service: string; name: string; kind: string },
    /** A streaming call's response type: the context can `sendNow`. */
    output?: DescMessage,
  ): { ctx: CallContext; observation: CallObservation | undefined; done: () => void } {
    const controller = new AbortController();
    this.#open.add(controller);
    const requestId = requestIdFrom(call.metadata.get(REQUEST_ID_HEADER)[0]?.toString());
    const observation = this.#observe?.({
      service: observed.service,
      method: observed.name,
      type: GRPC_TYPES[observed.kind] ?? observed.kind,
      requestId,
      traceparent: call.metadata.get(TRACEPARENT_HEADER)[0]?.toString(),
    });
    const deadline = call.getDeadline();
    const deadlineDate =
      deadline instanceof Date ? deadline : Number.isFinite(deadline) ? new Date(deadline) : undefined;
    const onCancel = () => controller.abort(new Error("call cancelled"));
    const events = call as unknown as NodeJS.EventEmitter;
    events.on("cancelled", onCancel);
    let principal: Promise<Principal> | undefined;
    const authenticate = this.#authenticate;
    const ctx: CallContext = {
      method,
      metadata: call.metadata,
      requestId,
      // trace_id / span_id come from the active span (the logger's mixin): the handler runs inside it.
      logger: this.#logger.child({ requestId, method }),
      signal: controller.signal,
      deadline: deadlineDate,
      abort: (reason?: unknown) => controller.abort(reason),
      principal() {
        principal ??= authenticate
          ? authenticate(call.metadata, { deadline: deadlineDate, signal: controller.signal })
          : Promise.reject(new UnauthenticatedError());
        principal.then(
          (p) => observation?.principal(p.kind),
          () => {},
        );
        return principal;
      },
      sendNow: output ? sendNow(call as unknown as WritableCall, output, observation) : undefined,
    };
    const responseMetadata = new grpc.Metadata();
    responseMetadata.set(REQUEST_ID_HEADER, requestId);
    call.sendMetadata(responseMetadata);
    return {
      ctx,
      observation,
      done: () => {
        events.removeListener("cancelled", onCancel);
        this.#open.delete(controller);
      },
    };
  }

  #handler(
    service: DescService,
    name: string,
    kind: string,
    output: DescMessage,
    fn: ((...args: never[]) => unknown) | undefined,
  ): grpc.UntypedHandleCall {
    const method = `/${service.typeName}/${name}`;
    const unimplemented =
      kind === "server_streaming" || kind === "bidi_streaming"
        ? async function* () {
            yield* [];
            throw new UnimplementedError(method);
          }
        : () => Promise.reject(new UnimplementedError(method));
    const impl = fn ?? unimplemented;
    const logger = this.#logger;
    const fail = (error: unknown) => toCallStatus(error, logger, method);
    const observed = { service: service.typeName, name, kind };
    switch (kind) {
      case "unary":
      case "client_streaming": {
        const single = kind === "unary";
        return (
          call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerReadableStream<unknown, unknown>,
          callback: grpc.sendUnaryData<unknown>,
        ) => {
          const { ctx, observation, done } = this.#context(call, method, observed);
          const request = single
            ? (call as grpc.ServerUnaryCall<unknown, unknown>).request
            : requestsOf(call as grpc.ServerReadableStream<unknown, unknown>);
          // Inside the call's span (when observed): the handler, and the lines logged as it ends.
          const handle = () =>
            (impl as (r: unknown, c: CallContext) => Promise<unknown>)(request, ctx).then(
              (response) => {
                done();
                observation?.end(grpc.status.OK);
                callback(null, create(output, response as never));
              },
              (error: unknown) => {
                done();
                const failure = fail(error);
                observation?.end(failure.code);
                callback(failure);
              },
            );
          if (observation) observation.run(handle);
          else void handle();
        };
      }
      default: {
        const bidi = kind === "bidi_streaming";
        return (call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>) => {
          const { ctx, observation, done } = this.#context(call, method, observed, output);
          const source = bidi
            ? requestsOf(call as grpc.ServerDuplexStream<unknown, unknown>)
            : (call as grpc.ServerWritableStream<unknown, unknown>).request;
          const serve = () =>
            pump(
              call,
              (impl as (r: unknown, c: CallContext) => AsyncIterable<unknown>)(source, ctx),
              output,
              ctx.signal,
              observation,
            ).then(
              () => {
                done();
                observation?.end(call.cancelled ? grpc.status.CANCELLED : grpc.status.OK);
                if (!call.cancelled) call.end();
              },
              (error: unknown) => {
                done();
                const failure = fail(error);
                observation?.end(call.cancelled ? grpc.status.CANCELLED : failure.code);
                if (!call.cancelled) call.emit("error", failure);
              },
            );
          if (observation) observation.run(serve);
          else void serve();
        };
      }
    }
  }

  #handlers<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): grpc.UntypedServiceImplementation {
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const method of service.methods) {
      const fn = (impl as Record<string, unknown>)[method.localName] as ((...args: never[]) => unknown) | undefined;
      const checked = withRequestRules(method, fn); // the contract's rules, before the handler
      handlers[method.localName] = this.#handler(service, method.name, method.methodKind, method.output, checked);
    }
    return handlers;
  }
}

/**
 * The requests of a client-streaming or bidi call. Not the stream's own iterator: that one
 * destroys the whole call when the requests end, before the responses are written.
 */
function requestsOf(call: grpc.ServerReadableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>) {
  return call.iterator({ destroyOnReturn: false });
}

/** The grpc-js server stream as `pump` uses it: a Writable in object mode over the call's message sender. */
type WritableCall = NodeJS.EventEmitter & {
  readonly cancelled: boolean;
  readonly writable: boolean;
  readonly writableNeedDrain: boolean;
  write(message: unknown): boolean;
  /** grpc-js' own call (serializes and writes one message to the HTTP/2 stream). */
  readonly call?: { sendMessage?(message: unknown, callback: () => void): void };
  _writev?: (chunks: { chunk: unknown; encoding: BufferEncoding }[], callback: (error?: Error | null) => void) => void;
};

/**
 * Lets the call hand every message buffered behind an unfinished write to HTTP/2 at once. The
 * grpc-js stream has no `_writev`, so its Writable passes one message per completed write: a
 * stream could send about one message per event-loop turn, and a busy fan-out (100 streams at
 * 200 messages/s) queued behind it. The messages go out in the same order, each framed as before.
 */
function coalesceWrites(call: WritableCall): void {
  const sender = call.call;
  if (call._writev || typeof sender?.sendMessage !== "function") return;
  call._writev = (chunks, callback) => {
    let pending = chunks.length;
    const done = () => {
      pending -= 1;
      if (pending === 0) callback();
    };
    // Like grpc-js' `_write`: a cancelled call or a failed write calls nothing back (the call ends).
    for (const { chunk } of chunks) sender.sendMessage?.(chunk, done);
  };
}

/** `CallContext.sendNow` of a streaming call: writes unless the call ended or waits for the client to drain. */
function sendNow(call: WritableCall, output: DescMessage, observation: CallObservation | undefined) {
  return (response: unknown): boolean => {
    if (call.cancelled || !call.writable || call.writableNeedDrain) return false;
    call.write(create(output, response as never));
    observation?.sent();
    return true;
  };
}

/** Writes a handler's responses with backpressure until it ends, the call is cancelled or aborted. */
async function pump(
  call: WritableCall,
  responses: AsyncIterable<unknown>,
  output: DescMessage,
  signal: AbortSignal,
  observation: CallObservation | undefined,
): Promise<void> {
  coalesceWrites(call);
  for await (const response of responses) {
    if (call.cancelled) break;
    const written = call.write(create(output, response as never));
    observation?.sent();
    if (!written) {
      try {
        await once(call, "drain", { signal });
      } catch {
        // Aborted while waiting for the client: the handler decides how to end (it sees `signal`).
      }
    }
  }
}
