import { Redis } from "ioredis";
import type { Logger } from "pino";

/**
 * The gateway's connection to the fleet's shared store (Redis), or none (in-process: one gateway).
 * It never blocks start-up: with Redis down the gateway starts, every shared structure falls back
 * to this replica's own memory, and `degraded` reports it (a metric and a log line) until Redis is back.
 */
export class SharedStore {
  /** The Redis connection; undefined when `REDIS_URL` is unset. */
  readonly redis: Redis | undefined;
  /** Prefix of every key: `<UMX_BUS_PREFIX>:gw:`. */
  readonly prefix: string;
  readonly #logger: Logger | undefined;
  readonly #onDegraded: ((degraded: boolean) => void) | undefined;
  #degraded = false;
  /** The `run_id` of the Redis server last connected to: another one means it restarted (empty, unless it persists). */
  #runId: string | undefined;
  /** Settles once the latest connection was checked for a restart (and what this replica knows written back). */
  #checked: Promise<void> = Promise.resolve();
  readonly #onRestart = new Set<(redis: Redis) => Promise<void>>();

  constructor(options: {
    url: string | undefined;
    prefix: string;
    logger?: Logger;
    /** Told when the store starts or stops falling back to per-replica memory. */
    onDegraded?: (degraded: boolean) => void;
  }) {
    this.prefix = `${options.prefix}:gw:`;
    this.#logger = options.logger;
    this.#onDegraded = options.onDegraded;
    if (!options.url) return;
    this.redis = new Redis(options.url, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // A cut (black-holed) connection must not hold a request: give up and fall back.
      commandTimeout: 500,
      connectTimeout: 2_000,
      retryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 1_000),
      connectionName: `${options.prefix}-gateway`,
    });
    this.redis.on("error", (error: Error) => this.#logger?.debug({ err: error }, "gateway redis error"));
    this.redis.on("ready", () => {
      // Nothing asks Redis through `either` until this connection was checked for a restart.
      const redis = this.redis!;
      this.#checked = this.#checkRestart(redis);
      this.#setDegraded(false);
    });
    this.redis.on("close", () => this.#setDegraded(true));
  }

  /**
   * Resolves once Redis answered the first connection attempt — ready, or refused — or after
   * `timeoutMs`; never rejects: a gateway starts with Redis down and heals when it comes back.
   */
  async settled(timeoutMs = 1_000): Promise<void> {
    const redis = this.redis;
    if (!redis || redis.status === "ready") return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        redis.off("ready", done);
        redis.off("error", done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      redis.once("ready", done);
      redis.once("error", done);
    });
  }

  /**
   * Tells `listener` when Redis came back as another server (a new `run_id`: it restarted, and kept
   * nothing without persistence), before anything else asks it: the listener writes back what this
   * replica knows (its MCP sessions, the leases it holds). Listeners use `redis` directly.
   */
  onRestart(listener: (redis: Redis) => Promise<void>): void {
    this.#onRestart.add(listener);
  }

  async #checkRestart(redis: Redis): Promise<void> {
    try {
      const info = await redis.info("server");
      const runId = /^run_id:(\w+)/m.exec(info)?.[1];
      const before = this.#runId;
      this.#runId = runId;
      if (before === undefined || runId === undefined || runId === before) return;
      this.#logger?.warn("redis restarted (another run_id): writing back this replica's MCP sessions and leases");
      for (const listener of this.#onRestart) {
        await listener(redis).catch((error: unknown) =>
          this.#logger?.warn({ err: error }, "writing back to a restarted redis failed"),
        );
      }
    } catch (error) {
      this.#logger?.debug({ err: error }, "gateway redis restart check failed");
    }
  }

  /** True while the fleet-wide structures count on this replica only. */
  get degraded(): boolean {
    return this.redis !== undefined && (this.#degraded || this.redis.status !== "ready");
  }

  /** Runs `shared` against Redis; on no Redis or a Redis failure, runs `local` and marks the store degraded. */
  async either<T>(shared: (redis: Redis) => Promise<T>, local: () => T | Promise<T>): Promise<T> {
    const redis = this.redis;
    if (!redis) return local();
    if (redis.status === "ready") {
      await this.#checked;
      try {
        const result = await shared(redis);
        if (this.#degraded) this.#setDegraded(false); // a timeout passed without a reconnect
        return result;
      } catch (error) {
        this.#logger?.debug({ err: error }, "gateway redis command failed; counting on this replica");
      }
    }
    this.#setDegraded(true);
    return local();
  }

  #setDegraded(degraded: boolean): void {
    if (this.#degraded === degraded || !this.redis) return;
    this.#degraded = degraded;
    if (degraded) this.#logger?.warn("redis unreachable: limits, stream caps and MCP sessions count per replica");
    else this.#logger?.info("redis reachable again: limits, stream caps and MCP sessions are fleet-wide");
    this.#onDegraded?.(degraded);
  }

  async close(): Promise<void> {
    this.redis?.disconnect();
  }
}
