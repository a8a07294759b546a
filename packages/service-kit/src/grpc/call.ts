import type { DescMessage, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal";

/** What every handler receives besides its request. */
export interface CallContext {
  /** `/<package.Service>/<Method>`. */
  readonly method: string;
  readonly metadata: grpc.Metadata;
  readonly requestId: string;
  /** A child logger carrying the request id and method. */
  readonly logger: Logger;
  /** Aborted when the caller cancels, the deadline passes, or the server shuts down (reason: `ShutdownReason`). */
  readonly signal: AbortSignal;
  readonly deadline: Date | undefined;
  /**
   * Aborts `signal` from the handler's side (e.g. to cut a stream whose consumer stopped reading):
   * a write waiting for the client gives up and the handler is resumed to end the call.
   */
  abort(reason?: unknown): void;
  /** The authenticated caller; throws UNAUTHENTICATED when the call carries no valid credential. */
  principal(): Promise<Principal>;
  /**
   * Streaming calls: writes one response at once, outside the handler's iterator. Only for a
   * handler whose iterator is parked in an await (not at a yield), so that the response follows
   * every one it yielded: a fan-out hands a live stream's message to the call without resuming
   * the iterator. Returns false, writing nothing, when the client has not drained what was
   * written or the call ended: the handler then yields the response as usual.
   */
  readonly sendNow?: ((response: unknown) => boolean) | undefined;
}

type Init<O extends DescMessage> = MessageInitShape<O>;
type Shape<I extends DescMessage> = MessageShape<I>;

/** Implementation of one method, by kind. */
export type MethodImpl<M> = M extends {
  methodKind: "unary";
  input: infer I extends DescMessage;
  output: infer O extends DescMessage;
}
  ? (request: Shape<I>, ctx: CallContext) => Promise<Init<O>>
  : M extends {
        methodKind: "server_streaming";
        input: infer I extends DescMessage;
        output: infer O extends DescMessage;
      }
    ? (request: Shape<I>, ctx: CallContext) => AsyncIterable<Init<O>>
    : M extends {
          methodKind: "client_streaming";
          input: infer I extends DescMessage;
          output: infer O extends DescMessage;
        }
      ? (requests: AsyncIterable<Shape<I>>, ctx: CallContext) => Promise<Init<O>>
      : M extends {
            methodKind: "bidi_streaming";
            input: infer I extends DescMessage;
            output: infer O extends DescMessage;
          }
        ? (requests: AsyncIterable<Shape<I>>, ctx: CallContext) => AsyncIterable<Init<O>>
        : never;

/** Implementation of a service: one function per method, keyed by the method's local name. */
export type ServiceImpl<S extends DescService> = { [K in keyof S["method"]]: MethodImpl<S["method"][K]> };

/** The bounds of the call being authenticated, for lookups it makes on the caller's behalf. */
export interface CallScope {
  /** The caller's deadline, if it set one: calls made to resolve it should not outlive it. */
  readonly deadline: Date | undefined;
  /** Aborted when the call ends (cancelled, deadline, shutdown). */
  readonly signal: AbortSignal;
}

/** Resolves the caller from call metadata (signed principal or bearer token). */
export type Authenticate = (metadata: grpc.Metadata, scope?: CallScope) => Promise<Principal>;
