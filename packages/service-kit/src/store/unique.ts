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

/** True for Prisma's "transaction could not start / timed out" (P2028): the store is busy, retry. */
export function isTransactionTimeout(error: unknown): boolean {
  return (error as ErrorShape | null)?.code === "P2028";
}
