import { create, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, createContextKey, type HandlerContext } from "@connectrpc/connect";
import { Metadata } from "@grpc/grpc-js";
import { PRINCIPAL_HEADER, type Principal, signPrincipal } from "@unimatrix/service-kit/auth";
import { ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import { REQUEST_ID_HEADER, requestIdFrom } from "@unimatrix/service-kit/logger";
import { TRACEPARENT_HEADER } from "@unimatrix/service-kit/observe";
import type { EdgeAuthenticator, EdgeCaller } from "./auth";
import type { CredentialDoors } from "./doors";
import type { RateLimiter } from "./rate-limit";
import { currentRequest } from "./request-context";
import { toConnectError } from "./status-table";
import { INTERNAL_METHODS, PUBLIC_SERVICES, type Upstreams } from "./upstreams";

/** What forwarding needs. */
export interface ForwardDeps {
  readonly upstreams: Upstreams;
  readonly auth: EdgeAuthenticator;
  readonly limiter: RateLimiter;
  readonly internalKey: string;
  /** Deadline for a forwarded call when the caller set none. */
  readonly defaultTimeoutMs: number;
  /** Counts open server streams (for metrics). */
  readonly onStream?: (delta: 1 | -1) => void;
  /** Ends a server stream when its credential stops authenticating. */
  readonly doors?: CredentialDoors;
}

/**
 * The final message a server stream of `output` ends with when its credential is revoked: its
 * `access_revoked` event (a oneof member every watch contract has), or undefined when it has none.
 */
function accessRevokedMessage(output: DescMessage, reason: string): unknown {
  const field = output.fields.find((f) => f.name === "access_revoked");
  if (!field?.oneof || field.message === undefined) return undefined;
  const hasReason = field.message.fields.some((f) => f.name === "reason");
  return create(output, {
    [field.oneof.localName]: {
      case: field.localName,
      value: create(field.message, hasReason ? { reason } : {}),
    },
  } as never);
}

/** Carries the client's address from the HTTP request into Connect handlers. */
export const PEER = createContextKey<string>("", { description: "remote address" });

/** Charges the per-address limit (refused token lookups, and RPCs whose credential is in the body). */
export async function chargeAddress(limiter: RateLimiter, address: string): Promise<void> {
  if (!(await limiter.take(`addr:${address}`))) {
    throw new ResourceExhaustedError("too many requests from this address; slow down");
  }
}

/** RPCs that carry their credential in the body (an enroll token): forwarded without a principal. */
const BODY_CREDENTIAL_METHODS = new Set(["unimatrix.device.v1.DeviceService.EnrollDevice"]);

/** Authenticates the caller of a Connect call and charges its rate limit. */
async function callerOf(deps: ForwardDeps, ctx: HandlerContext): Promise<EdgeCaller> {
  const caller = await deps.auth.authenticate(ctx.requestHeader.get("authorization"), () =>
    chargeAddress(deps.limiter, ctx.values.get(PEER)),
  );
  if (!(await deps.limiter.take(caller.credentialKey))) {
    throw new ConnectError("rate limit exceeded for this credential; slow down", Code.ResourceExhausted);
  }
  return caller;
}

/**
 * Metadata of a call the gateway makes upstream: the request id (the caller's when sane) and,
 * for an authenticated caller, its principal signed with the internal key.
 */
export function upstreamMetadata(
  internalKey: string,
  principal: Principal | null,
  requestId?: string | null,
): Metadata {
  const metadata = new Metadata();
  const request = currentRequest();
  if (principal) metadata.set(PRINCIPAL_HEADER, signPrincipal(principal, internalKey));
  metadata.set(REQUEST_ID_HEADER, requestIdFrom(requestId ?? request?.requestId));
  if (request?.traceparent) metadata.set(TRACEPARENT_HEADER, request.traceparent);
  return metadata;
}

/** Call options for the upstream: the signed principal, the request id, deadline and cancellation. */
function upstreamOptions(deps: ForwardDeps, caller: EdgeCaller, ctx: HandlerContext) {
  const metadata = upstreamMetadata(deps.internalKey, caller.principal, ctx.requestHeader.get(REQUEST_ID_HEADER));
  const timeoutMs = ctx.timeoutMs();
  return { metadata, deadline: timeoutMs ?? deps.defaultTimeoutMs, signal: ctx.signal };
}

type Forwarder = (...args: never[]) => unknown;

function forwarder(deps: ForwardDeps, method: DescMethod, call: (...args: unknown[]) => unknown): Forwarder | null {
  switch (method.methodKind) {
    case "unary":
      if (BODY_CREDENTIAL_METHODS.has(`${method.parent.typeName}.${method.name}`)) {
        return (async (request: unknown, ctx: HandlerContext) => {
          try {
            await chargeAddress(deps.limiter, ctx.values.get(PEER));
            const metadata = upstreamMetadata(deps.internalKey, null, ctx.requestHeader.get(REQUEST_ID_HEADER));
            const options = { metadata, deadline: ctx.timeoutMs() ?? deps.defaultTimeoutMs, signal: ctx.signal };
            return await (call(request, options) as Promise<unknown>);
          } catch (error) {
            throw toConnectError(error);
          }
        }) as Forwarder;
      }
      return (async (request: unknown, ctx: HandlerContext) => {
        try {
          const caller = await callerOf(deps, ctx);
          return await (call(request, upstreamOptions(deps, caller, ctx)) as Promise<unknown>);
        } catch (error) {
          throw toConnectError(error);
        }
      }) as Forwarder;
    case "server_streaming":
      return async function* (request: unknown, ctx: HandlerContext) {
        const caller = await callerOf(deps, ctx).catch((error: unknown) => {
          throw toConnectError(error);
        });
        // The credential's door: when it stops authenticating, the upstream call is cancelled and
        // the stream ends with the contract's `access_revoked` (or UNAUTHENTICATED without one).
        const revoked = new AbortController();
        const shut = deps.doors?.open(ctx.requestHeader.get("authorization") ?? undefined, caller.principal, () =>
          revoked.abort(),
        );
        const options = {
          ...upstreamOptions(deps, caller, ctx),
          deadline: ctx.timeoutMs(),
          signal: AbortSignal.any([ctx.signal, revoked.signal]),
        };
        deps.onStream?.(1);
        try {
          for await (const message of call(request, options) as AsyncIterable<unknown>) {
            if (revoked.signal.aborted) break;
            yield message;
          }
        } catch (error) {
          if (!ctx.signal.aborted && !revoked.signal.aborted) throw toConnectError(error);
        } finally {
          shut?.();
          deps.onStream?.(-1);
        }
        if (revoked.signal.aborted && !ctx.signal.aborted) {
          const final = accessRevokedMessage(method.output, "credential revoked");
          if (final === undefined) throw toConnectError(new ConnectError("credential revoked", Code.Unauthenticated));
          yield final;
        }
      } as unknown as Forwarder;
    default:
      // Bidi and client streams need HTTP/2 end to end; they are served over gRPC only.
      return null;
  }
}

/** Registers every public RPC of the three services, forwarded over gRPC as the caller. */
export function forwardingRoutes(deps: ForwardDeps) {
  return (router: ConnectRouter) => {
    for (const { service, client } of PUBLIC_SERVICES) {
      const upstream = deps.upstreams[client] as unknown as Record<string, (...args: unknown[]) => unknown>;
      const impl: Record<string, Forwarder> = {};
      for (const method of service.methods) {
        if (INTERNAL_METHODS.has(method.name)) continue;
        const fn = upstream[method.localName];
        const handler = fn ? forwarder(deps, method, fn) : null;
        if (handler) impl[method.localName] = handler;
      }
      router.service(service, impl as never);
    }
  };
}
