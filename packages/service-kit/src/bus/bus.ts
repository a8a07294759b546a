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

/** Options of the Redis bus. */
export interface RedisBusOptions {
  readonly url: string;
  /** Prepended to every channel as `<prefix>:`. */
  readonly prefix: string;
  readonly logger?: Logger;
}

/**
 * Redis pub/sub with a publisher and a subscriber connection (a subscribed connection can do
 * nothing else). Both reconnect forever with capped backoff; ioredis re-subscribes by itself and
 * `onReconnect` listeners are told so they can drain what they missed. Publishing while Redis is
 * down fails at once instead of queueing: the data is already committed and readers will heal.
 */
export class RedisBus implements Bus {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #listeners = new ListenerTable();
  readonly #events = new EventEmitter();
  readonly #prefix: string;
  readonly #logger: Logger | undefined;
  #lostSubscriber = false;

  constructor(options: RedisBusOptions) {
    this.#prefix = `${options.prefix}:`;
    this.#logger = options.logger;
    const common = {
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      retryStrategy: (attempt: number) => Math.min(50 * 2 ** attempt, 2_000),
    };
    this.#publisher = new Redis(options.url, {
      ...common,
      enableOfflineQueue: false,
      connectionName: `${options.prefix}-pub`,
    });
    this.#subscriber = new Redis(options.url, {
      ...common,
      autoResubscribe: true,
      connectionName: `${options.prefix}-sub`,
    });
    for (const [name, connection] of [
      ["publisher", this.#publisher],
      ["subscriber", this.#subscriber],
    ] as const) {
      connection.on("error", (error: Error) => this.#logger?.warn({ err: error, connection: name }, "redis error"));
    }
    this.#subscriber.on("close", () => {
      this.#lostSubscriber = true;
    });
    this.#subscriber.on("ready", () => {
      if (!this.#lostSubscriber) return;
      this.#lostSubscriber = false;
      this.#logger?.info("redis subscriber reconnected");
      this.#events.emit("reconnect");
    });
    this.#subscriber.on("message", (channel: string, message: string) => {
      if (channel.startsWith(this.#prefix)) {
        this.#listeners.deliver(channel.slice(this.#prefix.length), message, this.#logger);
      }
    });
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
    await this.#publisher.publish(this.#prefix + channel, message);
  }

  async subscribe(channel: string, listener: Listener): Promise<BusSubscription> {
    if (this.#listeners.add(channel, listener)) {
      try {
        await this.#subscriber.subscribe(this.#prefix + channel);
      } catch (error) {
        // Leave no listener behind that would stop the next subscriber from subscribing.
        this.#listeners.remove(channel, listener);
        throw error;
      }
    }
    return {
      unsubscribe: async () => {
        if (this.#listeners.remove(channel, listener)) {
          // Queued while disconnected, so a reconnect does not re-subscribe a channel nobody wants.
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

  async close(): Promise<void> {
    this.#publisher.disconnect();
    this.#subscriber.disconnect();
  }
}

/** The bus the configuration asks for: Redis when a URL is given, in-process otherwise. */
export async function openBus(options: { url?: string | undefined; prefix: string; logger?: Logger }): Promise<Bus> {
  if (!options.url) return new InProcessBus();
  const bus = new RedisBus({ url: options.url, prefix: options.prefix, logger: options.logger });
  try {
    await bus.ready();
  } catch (error) {
    await bus.close();
    throw error;
  }
  return bus;
}
