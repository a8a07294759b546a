import { Metadata, status } from "@grpc/grpc-js";
import { attachPrincipal, type Principal } from "../auth/principal";
import { toStatus } from "../grpc/status";

/** Call options (for a kit typed client) carrying grpc Metadata. */
export interface AsCaller {
  readonly metadata: Metadata;
}

/** Call options carrying `authorization: Bearer <token>`. */
export function asBearer(token: string): AsCaller {
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return { metadata };
}

/** Call options carrying `principal` signed with `key`, as the gateway sends it. */
export function asPrincipal(principal: Principal, key: string): AsCaller {
  return { metadata: attachPrincipal(new Metadata(), principal, key) };
}

/** A failed call's status, as the caller saw it. */
export interface FailedCall {
  readonly code: status;
  readonly message: string;
  readonly error: unknown;
}

/**
 * Expects `promise` to fail with `code`; with `fieldOrText`, the message must contain it (a field
 * name such as `page_token`, or any text). Resolves with the failure for further checks.
 */
export async function expectStatus(promise: Promise<unknown>, code: status, fieldOrText?: string): Promise<FailedCall> {
  let error: unknown;
  let failed = false;
  try {
    await promise;
  } catch (e) {
    error = e;
    failed = true;
  }
  if (!failed) throw new Error(`expected status ${status[code]}, got success`);
  const seen = toStatus(error);
  if (seen.code !== code) {
    const detail = error instanceof Error && seen.code === status.INTERNAL ? error.message : seen.message;
    throw new Error(`expected status ${status[code]}, got ${status[seen.code]}: ${detail}`);
  }
  if (fieldOrText !== undefined && !seen.message.includes(fieldOrText))
    throw new Error(
      `expected a message containing ${JSON.stringify(fieldOrText)}, got ${JSON.stringify(seen.message)}`,
    );
  return { code: seen.code, message: seen.message, error };
}

/** Options of `collect`. */
export interface CollectOptions {
  /** Fail when the items have not arrived within this long (default 10 s). */
  readonly timeoutMs?: number;
}

/** What `collect` reads: a grpc-js stream, a kit bidi call, or any async iterable. */
export type Collectable<T> = AsyncIterable<T> | NodeJS.EventEmitter | { readonly call: NodeJS.EventEmitter };

interface CallLike extends NodeJS.EventEmitter {
  cancel?(): void;
}

/**
 * Reads a stream until it has `n` items, or until `until(item, items)` is true, then cancels it;
 * resolves with the items. Rejects with the stream's own error if it fails first (so
 * `expectStatus(collect(...), code)` works), and when it ends or times out before that.
 */
export function collect<T>(
  stream: Collectable<T>,
  nOrUntil: number | ((item: T, items: readonly T[]) => boolean),
  options: CollectOptions = {},
): Promise<T[]> {
  const inner = (stream as { call?: unknown }).call;
  const source = (inner ?? stream) as Partial<CallLike> & Partial<AsyncIterable<T>>;
  const items: T[] = [];
  const want = typeof nOrUntil === "number" ? `${nOrUntil} items` : "the awaited item";
  const reached = (item: T) => (typeof nOrUntil === "number" ? items.length >= nOrUntil : nOrUntil(item, items));
  if (typeof nOrUntil === "number" && nOrUntil <= 0) return Promise.resolve(items);
  if (typeof source.on !== "function")
    return collectIterable(stream as AsyncIterable<T>, reached, want, items, options);
  const call = source as CallLike;
  return new Promise<T[]>((resolve, reject) => {
    let settled = false;
    const finish = (error?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      call.removeListener("data", onData);
      // The cancel below makes grpc-js emit a CANCELLED error: keep a listener so nothing throws.
      call.on("error", () => {});
      call.cancel?.();
      if (error) reject(error);
      else resolve(items);
    };
    const onData = (item: T) => {
      items.push(item);
      if (reached(item)) finish();
    };
    const timer = setTimeout(
      () => finish(new Error(`timed out waiting for ${want}; got ${items.length}`)),
      options.timeoutMs ?? 10_000,
    );
    call.on("data", onData);
    call.once("error", (error: unknown) => finish(error));
    call.once("end", () => finish(new Error(`stream ended before ${want}; got ${items.length}`)));
  });
}

async function collectIterable<T>(
  stream: AsyncIterable<T>,
  reached: (item: T) => boolean,
  want: string,
  items: T[],
  options: CollectOptions,
): Promise<T[]> {
  const iterator = stream[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out waiting for ${want}; got ${items.length}`)),
      options.timeoutMs ?? 10_000,
    );
  });
  timeout.catch(() => {});
  try {
    for (;;) {
      const pending = iterator.next();
      pending.catch(() => {});
      const next = await Promise.race([pending, timeout]);
      if (next.done) throw new Error(`stream ended before ${want}; got ${items.length}`);
      items.push(next.value);
      if (reached(next.value)) return items;
    }
  } finally {
    clearTimeout(timer);
    void Promise.resolve(iterator.return?.()).catch(() => {});
  }
}
