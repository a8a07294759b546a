import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { Redis } from "ioredis";
import type { Logger } from "pino";

/**
 * The doorbell between replicas: a message says "something was committed, go look".
 * Nothing is ever delivered only through the bus; subscribers heal from the database.
 * Channel names are relative (`cube:<id>`, `presence:<tenant>`); the bus adds its prefix.
 */
export interface Bus {
  /** Publishes a message; resolves once handed to the transport. Rejects when it is down. */
  publish(channel: string, message: string): Promise<void>;
  /** Calls `listener` for each message on `channel` until the subscription is closed. */
  subscribe(channel: string, listener: (message: string) => void): Promise<BusSubscription>;
  /**
   * Calls `listener` after the bus lost its connection and got it back, when messages may have
   * been missed: subscribers should drain from their last cursor. Returns an unsubscribe function.
   */
  onReconnect(listener: () => void): () => void;
  /** True when the bus can deliver right now. */
  healthy(): boolean;
  close(): Promise<void>;
}

/** A live subscription. */
export interface BusSubscription {
  unsubscribe(): Promise<void>;
}

type Listener = (message: string) => void;

/** Keeps listeners per channel; shared by both implementations. */
class ListenerTable {
  readonly #byChannel = new Map<string, Set<Listener>>();
  /** Adds a listener; true when it is the channel's first. */
  add(channel: string, listener: Listener): boolean {
    let set = this.#byChannel.get(channel);
    const first = set === undefined;
    if (!set) {
      set = new Set();
      this.#byChannel.set(channel, set);
    }
    set.add(listener);
    return first;
  }
  /** Removes a listener; true when the channel has none left. */
  remove(channel: string, listener: Listener): boolean {
    const set = this.#byChannel.get(channel);
    if (!set?.delete(listener)) return false;
    if (set.size > 0) return false;
    this.#byChannel.delete(channel);
    return true;
  }
  /** Channels that have listeners. */
  channels(): string[] {
    return [...this.#byChannel.keys()];
  }
  deliver(channel: string, message: string, logger?: Logger): void {
    for (const listener of this.#byChannel.get(channel) ?? []) {
      try {
        listener(message);
      } catch (error) {
        logger?.error({ err: error, channel }, "bus listener threw");
      }
    }
  }
}

/** The single-process bus of the embedded default: same contract, no network. */
export class InProcessBus implements Bus {
  readonly #listeners = new ListenerTable();
  #closed = false;

  async publish(channel: string, message: string): Promise<void> {
    if (this.#closed) throw new Error("bus is closed");
    // Deliver asynchronously, as a network bus would: publishers never run subscriber code inline.
    setImmediate(() => this.#listeners.deliver(channel, message));
  }

  async subscribe(channel: string, listener: Listener): Promise<BusSubscription> {
    this.#listeners.add(channel, listener);
    return { unsubscribe: async () => void this.#listeners.remove(channel, listener) };
  }

  onReconnect(): () => void {
    return () => {};
  }

  healthy(): boolean {
    return !this.#closed;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}

/** What a bus counted since it was opened (for metrics; the Redis bus fills it, others report zeros). */
export interface BusStats {
  /** Publishes handed to the transport. */
  readonly published: number;
  /** Publishes the transport refused (bus down): readers heal from the database. */
  readonly publishFailures: number;
  /** Times the subscriber connection came back after being lost (or after starting down). */
  readonly reconnects: number;
}

/** The stats of a bus, zeros for one that keeps none. */
export function busStats(bus: Bus): BusStats {
  const stats = (bus as { stats?: () => BusStats }).stats;
  return stats ? stats.call(bus) : { published: 0, publishFailures: 0, reconnects: 0 };
}

/** Options of the Redis bus. */
export interface RedisBusOptions {
  readonly url: string;
  /** Prepended to every channel as `<prefix>:`. */
  readonly prefix: string;
  readonly logger?: Logger;
}

/** Marks a message sent by a bus of this build: `<mark><origin id><mark><message>`. */
const ORIGIN_MARK = "\u001e";

/** How long a bus command (publish, subscribe) may take before it fails (readers heal from the database). */
const BUS_COMMAND_TIMEOUT_MS = 1_000;
/** How soon a failed re-subscribe on a live connection is tried again. */
const RESUBSCRIBE_RETRY_MS = 500;

/**
 * Redis pub/sub with a publisher and a subscriber connection (a subscribed connection can do
 * nothing else). Both reconnect forever with capped backoff, and Redis may be unreachable from
 * the start: the bus then works locally and subscribes when Redis comes. Every publish rings this
 * bus's own listeners at once (local loopback) and is tagged with the bus's origin id, so its echo
 * from Redis is not delivered twice. After the subscriber (re)connects, channels are subscribed
 * again and `onReconnect` listeners are told so they can drain what they missed. Publishing while
 * Redis is down fails at once instead of queueing: the data is already committed and readers heal.
 */
export class RedisBus implements Bus {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #listeners = new ListenerTable();
  /** Reconnect listeners: one per component of a process (feeds, caches, credential news), never per stream. */
  readonly #events = new EventEmitter().setMaxListeners(50);
  readonly #prefix: string;
  readonly #logger: Logger | undefined;
  /** Tags this bus's publishes so their echo is recognised. */
  readonly #origin = randomUUID();
  #everReady = false;
  #closed = false;
  #published = 0;
  #publishFailures = 0;
  #reconnects = 0;

  constructor(options: RedisBusOptions) {
    this.#prefix = `${options.prefix}:`;
    this.#logger = options.logger;
    const common = {
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      // Commands fail at once while disconnected; subscriptions are (re)made on every "ready".
      enableOfflineQueue: false,
      // A command sent as Redis went away may be neither answered nor failed (a proxy that accepts
      // connections while Redis is gone resets ioredis's retry count on every attempt, so the
      // per-request retry limit never fails it): a post-commit publish must not hold its caller.
      commandTimeout: BUS_COMMAND_TIMEOUT_MS,
      retryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
    };
    this.#publisher = new Redis(options.url, { ...common, connectionName: `${options.prefix}-pub` });
    this.#subscriber = new Redis(options.url, {
      ...common,
      autoResubscribe: false,
      connectionName: `${options.prefix}-sub`,
    });
    for (const [name, connection] of [
      ["publisher", this.#publisher],
      ["subscriber", this.#subscriber],
    ] as const) {
      connection.on("error", (error: Error) => this.#logger?.warn({ err: error, connection: name }, "redis error"));
    }
    this.#subscriber.on("ready", () => void this.#onSubscriberReady());
    this.#subscriber.on("message", (channel: string, raw: string) => {
      if (!channel.startsWith(this.#prefix)) return;
      let message = raw;
      if (raw.startsWith(ORIGIN_MARK)) {
        const end = raw.indexOf(ORIGIN_MARK, 1);
        if (end > 0) {
          // Our own publish: its listeners were rung locally already.
          if (raw.slice(1, end) === this.#origin) return;
          message = raw.slice(end + 1);
        }
      }
      this.#listeners.deliver(channel.slice(this.#prefix.length), message, this.#logger);
    });
  }

  /** Subscribes every channel with listeners; a reconnect (or a late first connect) tells listeners. */
  async #onSubscriberReady(): Promise<void> {
    const channels = this.#listeners.channels().map((channel) => this.#prefix + channel);
    try {
      if (channels.length > 0) await this.#subscriber.subscribe(...channels);
    } catch (error) {
      // Retried while this connection lasts (a closed one retries on its next "ready"): a
      // subscriber that gave up here would hear nothing until the next reconnect, which may never come.
      this.#logger?.warn({ err: error }, "redis re-subscribe failed; retrying");
      const retry = setTimeout(() => {
        if (!this.#closed && this.#subscriber.status === "ready") void this.#onSubscriberReady();
      }, RESUBSCRIBE_RETRY_MS);
      retry.unref();
      return;
    }
    const missedSome = this.#everReady || channels.length > 0;
    this.#everReady = true;
    if (!missedSome || this.#closed) return;
    this.#reconnects += 1;
    this.#logger?.info({ channels: channels.length }, "redis subscriber connected; subscribers drain what they missed");
    this.#events.emit("reconnect");
  }

  /** Resolves once both connections are ready; rejects after `timeoutMs`. */
  async ready(timeoutMs = 5_000): Promise<void> {
    const wait = (connection: Redis) =>
      connection.status === "ready"
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`redis not ready after ${timeoutMs} ms`)), timeoutMs);
            connection.once("ready", () => {
              clearTimeout(timer);
              resolve();
            });
          });
    await Promise.all([wait(this.#publisher), wait(this.#subscriber)]);
  }

  async publish(channel: string, message: string): Promise<void> {
    if (this.#closed) throw new Error("bus is closed");
    // Local loopback: this replica's own listeners ring at once, with Redis up or down.
    setImmediate(() => this.#listeners.deliver(channel, message, this.#logger));
    try {
      await this.#publisher.publish(this.#prefix + channel, `${ORIGIN_MARK}${this.#origin}${ORIGIN_MARK}${message}`);
      this.#published += 1;
    } catch (error) {
      this.#publishFailures += 1;
      throw error;
    }
  }

  async subscribe(channel: string, listener: Listener): Promise<BusSubscription> {
    if (this.#listeners.add(channel, listener) && this.#subscriber.status === "ready") {
      try {
        await this.#subscriber.subscribe(this.#prefix + channel);
      } catch (error) {
        // Keep the listener: local publishes still ring it, and the next "ready" subscribes it.
        this.#logger?.warn({ err: error, channel }, "redis subscribe failed; listening locally until it is back");
      }
    }
    return {
      unsubscribe: async () => {
        if (this.#listeners.remove(channel, listener) && this.#subscriber.status === "ready") {
          await this.#subscriber.unsubscribe(this.#prefix + channel).catch(() => {});
        }
      },
    };
  }

  onReconnect(listener: () => void): () => void {
    this.#events.on("reconnect", listener);
    return () => this.#events.off("reconnect", listener);
  }

  healthy(): boolean {
    return this.#publisher.status === "ready" && this.#subscriber.status === "ready";
  }

  /** Counters since the bus was opened. */
  stats(): BusStats {
    return { published: this.#published, publishFailures: this.#publishFailures, reconnects: this.#reconnects };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#publisher.disconnect();
    this.#subscriber.disconnect();
  }
}

/**
 * The bus the configuration asks for: Redis when a URL is given, in-process otherwise. Redis
 * being unreachable does not stop a start: it waits at most `readyMs` (default 1 s) for the
 * first connection, logs and carries on; the bus connects when Redis comes.
 */
export async function openBus(options: {
  url?: string | undefined;
  prefix: string;
  logger?: Logger;
  readyMs?: number;
}): Promise<Bus> {
  if (!options.url) return new InProcessBus();
  const bus = new RedisBus({ url: options.url, prefix: options.prefix, logger: options.logger });
  try {
    await bus.ready(options.readyMs ?? 1_000);
  } catch {
    options.logger?.warn(
      "redis unreachable at start; serving without the bus (streams poll the database until it is back)",
    );
  }
  return bus;
}
