import type { FeedListener, Lag } from "./feed";

/** Options of a feed queue. */
export interface FeedQueueOptions<Item> {
  /** Keeps only items this listener may see (e.g. a visibility rule); default: all. */
  readonly accept?: (item: Item) => boolean;
  /** Wire size of an item, for a byte budget (default 0: only the item count is limited). */
  readonly sizeOf?: (item: Item) => number;
}

/**
 * A ready-made feed listener for one stream: queues what the feed pushes until the stream takes
 * it, reports its backlog as lag, and wakes the stream on news, notices, a cut or an abort.
 */
export class FeedQueue<Item> implements FeedListener<Item> {
  #items: Item[] = [];
  #bytes = 0;
  #notices: string[] = [];
  #cut = false;
  #wake: (() => void) | undefined;

  constructor(private readonly options: FeedQueueOptions<Item> = {}) {}

  /** True while the consumer waits in `wait` with nothing queued (a push would wake it). */
  get parked(): boolean {
    return this.#wake !== undefined;
  }

  /** True once the feed cut this queue for lagging. */
  get isCut(): boolean {
    return this.#cut;
  }

  push(items: readonly Item[]): void {
    if (this.#cut) return;
    const { accept, sizeOf } = this.options;
    for (const item of items) {
      if (accept && !accept(item)) continue;
      this.#items.push(item);
      this.#bytes += sizeOf?.(item) ?? 0;
    }
    this.#signal();
  }

  notify(message: string): void {
    this.#notices.push(message);
    this.#signal();
  }

  lag(): Lag {
    return { items: this.#items.length, bytes: this.#bytes };
  }

  cut(): void {
    this.#cut = true;
    this.#items = [];
    this.#bytes = 0;
    this.#signal();
  }

  /** Takes every queued item (the consumer is about to write them). */
  take(): Item[] {
    const items = this.#items;
    this.#items = [];
    this.#bytes = 0;
    return items;
  }

  /** Takes the notices received since the last call. */
  notices(): string[] {
    const notices = this.#notices;
    this.#notices = [];
    return notices;
  }

  /** Resolves when there are items or notices, the queue was cut, `poke` was called, or `signal` aborts. */
  wait(signal?: AbortSignal): Promise<void> {
    if (this.#items.length > 0 || this.#notices.length > 0 || this.#cut || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const onAbort = () => this.#signal();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#wake = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
    });
  }

  /** Wakes a waiting consumer (e.g. for a heartbeat). */
  poke(): void {
    this.#signal();
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
