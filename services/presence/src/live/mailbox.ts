/** An unbounded single-consumer queue: producers push from callbacks, one async loop takes. */
export class Mailbox<T> {
  #items: T[] = [];
  #waiter: (() => void) | null = null;

  /** Adds an item and wakes the consumer. */
  push(item: T): void {
    this.#items.push(item);
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  /** The next item, waiting for one if needed. */
  async take(): Promise<T> {
    while (this.#items.length === 0) {
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
    return this.#items.shift() as T;
  }
}
