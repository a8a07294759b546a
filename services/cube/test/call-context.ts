import * as grpc from "@grpc/grpc-js";
import type { Principal } from "@unimatrix/service-kit/auth";
import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import type { CallContext } from "@unimatrix/service-kit/grpc";
import type { Logger } from "pino";

/** What a test call context carries: the caller (none: UNAUTHENTICATED), a logger, and optionally its method and abort signal. */
export interface CallContextInit {
  readonly logger: Logger;
  readonly principal?: Principal;
  readonly method?: string;
  readonly signal?: AbortSignal;
}

/**
 * A kit `CallContext` without a server (as connect-es's `createHandlerContext`): a handler built
 * on a replica's real dependencies is called as a function, against the real store and bus, with
 * no socket, codec or auth interceptor in between.
 */
export function createCallContext(init: CallContextInit): CallContext {
  const controller = new AbortController();
  init.signal?.addEventListener("abort", () => controller.abort(init.signal?.reason), { once: true });
  return {
    method: init.method ?? "/test/Call",
    metadata: new grpc.Metadata(),
    requestId: "test",
    logger: init.logger,
    signal: controller.signal,
    deadline: undefined,
    abort: (reason?: unknown) => controller.abort(reason),
    async principal() {
      if (!init.principal) throw new UnauthenticatedError("no credential");
      return init.principal;
    },
  };
}
