import {
  type Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { NotFoundError } from "../errors";
import type { ServiceImpl } from "./call";

/**
 * The health name that says only "this process is alive" (SERVING until it shuts down) whatever its
 * dependencies do: what a liveness probe asks (the chart's startup and liveness probes), so that a
 * database outage takes replicas out of rotation (readiness, `""`) without restarting them.
 */
export const LIVENESS_SERVICE = "liveness";

/**
 * The serving state of each service name ("" is the whole server, the readiness answer). A service
 * answers its own state (SERVING once added, NOT_SERVING from shutdown on), except that every one
 * but `LIVENESS_SERVICE` answers NOT_SERVING while a dependency it cannot serve without is down
 * (`dependency`: the database, see `watchDatabase`).
 */
export class HealthRegistry {
  readonly #status = new Map<string, ServingStatus>();
  /** Dependencies down now, with why. */
  readonly #down = new Map<string, string>();
  readonly #watchers = new Set<() => void>();

  /** Sets a service's state and wakes watchers. */
  set(service: string, state: "SERVING" | "NOT_SERVING"): void {
    this.#status.set(service, state === "SERVING" ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    this.#wake();
  }

  /** Marks a dependency down (with why) or up again (`undefined`); every service follows it. */
  dependency(name: string, down: string | undefined): void {
    if (this.#down.get(name) === down) return;
    if (down === undefined) this.#down.delete(name);
    else this.#down.set(name, down);
    this.#wake();
  }

  #wake(): void {
    for (const wake of this.#watchers) wake();
  }

  /** Every service NOT_SERVING: the first step of a graceful shutdown. */
  shutdown(): void {
    for (const service of [...this.#status.keys()]) this.set(service, "NOT_SERVING");
  }

  /** The state of a service (NOT_SERVING while a dependency is down), or undefined when unknown. */
  get(service: string): ServingStatus | undefined {
    const own = this.#status.get(service);
    return own !== undefined && this.#down.size > 0 && service !== LIVENESS_SERVICE ? ServingStatus.NOT_SERVING : own;
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
