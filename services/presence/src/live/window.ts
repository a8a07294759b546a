/** An item a window holds: anything with a strictly increasing sequence number. */
export interface Sequenced {
  readonly seq: bigint;
}

interface Entry<T> {
  readonly item: T;
  readonly size: number;
  /** Bytes of every item the window appended, up to and including this one. */
  readonly cum: number;
}

/**
 * The recent items of a feed with their wire sizes, in sequence order: answers "what comes after
 * cursor N" from memory and "how many bytes is a reader at N behind". Holds up to `keepBytes`
 * (more only to keep `minItems` items): sized at twice the lag allowance plus a page, a reader
 * within its allowance always reads from here.
 * Pure (no I/O, no clock).
 */
export class EventWindow<T extends Sequenced> {
  /** The window covers items with seq > base. */
  base: bigint;
  readonly #entries: Entry<T>[] = [];
  #total = 0;
  #bytes = 0;

  constructor(
    base: bigint,
    private readonly keepBytes: number,
    private readonly minItems: number,
  ) {
    this.base = base;
  }

  /** Number of items held. */
  get length(): number {
    return this.#entries.length;
  }

  /** Appends the next item (its seq above every held one) with its encoded size. */
  append(item: T, size: number): void {
    this.#total += size;
    this.#bytes += size;
    this.#entries.push({ item, size, cum: this.#total });
    while (this.#bytes > this.keepBytes && this.#entries.length > this.minItems) {
      const dropped = this.#entries.shift() as Entry<T>;
      this.#bytes -= dropped.size;
      this.base = dropped.item.seq;
    }
  }

  /** Bytes of held items after `cursor`; infinite when the window no longer covers it. */
  lagOf(cursor: bigint): number {
    if (cursor < this.base) return Number.POSITIVE_INFINITY;
    const first = this.#entries[this.#firstAfter(cursor)];
    if (!first) return 0;
    return this.#total - (first.cum - first.size);
  }

  /** Held items after `cursor` (at most `limit`), or null when the window does not cover it. */
  after(cursor: bigint, limit: number): T[] | null {
    if (cursor < this.base) return null;
    const start = this.#firstAfter(cursor);
    return this.#entries.slice(start, start + limit).map((entry) => entry.item);
  }

  /** Index of the first entry with seq > cursor (binary search). */
  #firstAfter(cursor: bigint): number {
    let lo = 0;
    let hi = this.#entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.#entries[mid] as Entry<T>).item.seq <= cursor) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
