import type { Logger } from "pino";
import type { Bus } from "../bus/bus";
import { InProcessBus } from "../bus/bus";
import type { CommonConfig } from "./deps";

/** Anything a system starts: it listens on a port and stops. */
export interface Startable {
  readonly port: number;
  /** Port of its `/metrics` listener, when one runs. */
  readonly metricsPort?: number | undefined;
  stop(): Promise<void>;
}

/** What each part of a system starts with. */
export interface SystemContext {
  readonly config: CommonConfig;
  /** The bus every part shares: one in-process bus when there is no Redis, else undefined (each opens its own). */
  readonly bus: Bus | undefined;
  logger(name: string): Logger;
  /** The Postgres schema of a part's tables (undefined: its default, the part's name). */
  schema(name: string): string | undefined;
  /** `127.0.0.1:<port>` of a part started before this one, if any. */
  address(name: string): string | undefined;
}

/** One part of a system: a backend service or the gateway, with how to start it. */
export interface SystemPart<R extends Startable = Startable> {
  readonly name: string;
  readonly protocol: "grpc" | "http";
  start(ctx: SystemContext): Promise<R>;
}

/** Where a started part listens. */
export interface Endpoint {
  readonly name: string;
  readonly protocol: "grpc" | "http";
  readonly port: number;
  /** Port of its Prometheus `/metrics` listener, when one runs. */
  readonly metricsPort: number | undefined;
}

/** A running system. */
export interface RunningSystem {
  readonly endpoints: readonly Endpoint[];
  /** The started part by name (throws when it was not started). */
  get<R extends Startable = Startable>(name: string): R;
  /** Stops in reverse start order, then closes the shared bus. */
  stop(): Promise<void>;
}

/** Options of a system start. */
export interface SystemOptions {
  readonly config: CommonConfig;
  readonly logger: (name: string) => Logger;
  readonly schema?: (name: string) => string | undefined;
}

/**
 * Starts parts in order; an inner array starts its parts concurrently (they must not need each
 * other). With no REDIS_URL the parts share one in-process bus. Shared by the composition
 * (`npm start`) and the system tests, so both start the same thing the same way.
 */
export async function startParts(
  parts: readonly (SystemPart | readonly SystemPart[])[],
  options: SystemOptions,
): Promise<RunningSystem> {
  const bus: Bus | undefined = options.config.redisUrl ? undefined : new InProcessBus();
  const started = new Map<string, Startable>();
  const endpoints: Endpoint[] = [];
  const order: Startable[] = [];
  const ctx: SystemContext = {
    config: options.config,
    bus,
    logger: options.logger,
    schema: (name) => options.schema?.(name),
    address: (name) => {
      const part = started.get(name);
      return part ? `127.0.0.1:${part.port}` : undefined;
    },
  };
  const stopAll = async () => {
    for (const part of [...order].reverse()) await part.stop().catch(() => {});
    await bus?.close();
  };
  try {
    for (const stage of parts) {
      const group = Array.isArray(stage) ? (stage as readonly SystemPart[]) : [stage as SystemPart];
      const results = await Promise.allSettled(group.map((part) => part.start(ctx)));
      results.forEach((result, i) => {
        if (result.status !== "fulfilled") return;
        const part = group[i] as SystemPart;
        started.set(part.name, result.value);
        order.push(result.value);
        endpoints.push({
          name: part.name,
          protocol: part.protocol,
          port: result.value.port,
          metricsPort: result.value.metricsPort,
        });
      });
      const failed = results.find((r) => r.status === "rejected");
      if (failed) throw (failed as PromiseRejectedResult).reason;
    }
  } catch (error) {
    await stopAll();
    throw error;
  }
  let stopping: Promise<void> | undefined;
  return {
    endpoints,
    get<R extends Startable>(name: string): R {
      const part = started.get(name);
      if (!part) throw new Error(`${name} is not part of this system`);
      return part as R;
    },
    stop() {
      stopping ??= (async () => {
        for (const part of [...order].reverse()) await part.stop();
        await bus?.close();
      })();
      return stopping;
    },
  };
}
