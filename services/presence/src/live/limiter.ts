import { ResourceExhaustedError } from "@unimatrix/service-kit";

/**
 * Open streams per credential key on this replica: `reserve` takes a slot or answers
 * RESOURCE_EXHAUSTED; the returned release gives it back (once, however often it is called).
 */
export class StreamLimiter {
  readonly #open = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly what = "streams",
  ) {}

  /** Streams open for `key`. */
  openFor(key: string): number {
    return this.#open.get(key) ?? 0;
  }

  /** Takes one of the key's slots; RESOURCE_EXHAUSTED when all are taken. */
  reserve(key: string): () => void {
    const open = this.openFor(key);
    if (open >= this.max) {
      throw new ResourceExhaustedError(`this credential already has ${this.max} open ${this.what}; close one first`);
    }
    this.#open.set(key, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = this.openFor(key) - 1;
      if (now <= 0) this.#open.delete(key);
      else this.#open.set(key, now);
    };
  }
}
