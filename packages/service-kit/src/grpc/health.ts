import {
  type Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { NotFoundError } from "../errors";
import type { ServiceImpl } from "./call";

/** The serving state of each service name ("" is the whole server). */
export class HealthRegistry {
  readonly #status = new Map<string, ServingStatus>();
  readonly #watchers = new Set<() => void>();

  /** Sets a service's state and wakes watchers. */
  set(service: string, state: "SERVING" | "NOT_SERVING"): void {
    this.#status.set(service, state === "SERVING" ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    for (const wake of this.#watchers) wake();
  }

  /** Every service NOT_SERVING: the first step of a graceful shutdown. */
  shutdown(): void {
    for (const service of [...this.#status.keys()]) this.set(service, "NOT_SERVING");
  }

  /** The state of a service, or undefined when unknown. */
  get(service: string): ServingStatus | undefined {
    return this.#status.get(service);
  }

  /** Calls `wake` on every change until the returned function is called. */
  watch(wake: () => void): () => void {
    this.#watchers.add(wake);
    return () => this.#watchers.delete(wake);
  }
}

/** `grpc.health.v1.Health` over a registry. */
export function healthImpl(registry: HealthRegistry): ServiceImpl<typeof Health> {
  return {
    async check(request) {
      const status = registry.get(request.service);
      if (status === undefined) throw new NotFoundError(`unknown service ${JSON.stringify(request.service)}`);
      return { status };
    },
    async *watch(request, ctx) {
      let last: ServingStatus | undefined;
      let wake: (() => void) | undefined;
      const stop = registry.watch(() => wake?.());
      const aborted = new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      try {
        for (;;) {
          const status = registry.get(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
          if (status !== last) {
            last = status;
            yield { status };
          }
          if (ctx.signal.aborted) return;
          await Promise.race([new Promise<void>((resolve) => (wake = resolve)), aborted]);
        }
      } finally {
        stop();
      }
    },
  };
}
