/** Postgres's SQLSTATE for a unique-constraint violation. */
const UNIQUE_VIOLATION = "23505";

interface ErrorShape {
  readonly code?: unknown;
  readonly cause?: unknown;
  readonly meta?: { readonly driverAdapterError?: { readonly cause?: { originalCode?: unknown; kind?: unknown } } };
}

/**
 * True for a unique-constraint violation, however it reached us: Prisma's P2002 (adapter-pg,
 * model API), a raw query's P2010 carrying SQLSTATE 23505 in the driver adapter error, PGlite's
 * adapter (which reports the bare SQLSTATE as the Prisma error code), or a plain `pg`/PGlite error.
 * Follows `cause` chains a few levels deep.
 */
export function isUniqueViolation(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== null && typeof current === "object"; depth++) {
    const e = current as ErrorShape;
    if (e.code === "P2002" || e.code === UNIQUE_VIOLATION) return true;
    const adapter = e.meta?.driverAdapterError?.cause;
    if (adapter?.originalCode === UNIQUE_VIOLATION || adapter?.kind === "UniqueConstraintViolation") return true;
    current = e.cause;
  }
  return false;
}

/** Postgres's SQLSTATEs for a value that does not fit its column: numeric and datetime field overflow. */
const OUT_OF_RANGE = new Set(["22003", "22008"]);
/** Prisma's codes for the same: value out of range (P2020), number beyond 64 bits (P2033). */
const PRISMA_OUT_OF_RANGE = new Set(["P2020", "P2033"]);

/**
 * True for a value out of range for its column (a number beyond bigint, a date beyond the
 * timestamp range), however it reached us (see `isUniqueViolation`). The caller sent it: the
 * contract's rules should refuse it first, this is the second line.
 */
export function isOutOfRange(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== null && typeof current === "object"; depth++) {
    const e = current as ErrorShape;
    if (typeof e.code === "string" && (OUT_OF_RANGE.has(e.code) || PRISMA_OUT_OF_RANGE.has(e.code))) return true;
    const adapter = e.meta?.driverAdapterError?.cause;
    if (typeof adapter?.originalCode === "string" && OUT_OF_RANGE.has(adapter.originalCode)) return true;
    if (adapter?.kind === "ValueOutOfRange") return true;
    current = e.cause;
  }
  return false;
}

/** True for Prisma's "transaction could not start / timed out" (P2028): the store is busy, retry. */
export function isTransactionTimeout(error: unknown): boolean {
  return (error as ErrorShape | null)?.code === "P2028";
}
