/**
 * Postgres SQLSTATEs meaning "the database cannot serve this now; the same request may work in a
 * moment": the server is shutting down or was (57P01 admin_shutdown — also `pg_terminate_backend`
 * and `-m immediate` —, 57P02 crash_shutdown, 57P03 cannot_connect_now — starting up, in recovery),
 * it is read-only (25006: a failover's first moment, `default_transaction_read_only`), or it has no
 * connection slot (53300). Class 08 (connection exceptions) is matched by its prefix.
 */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "25006", "53300"]);
/** Node socket errors on the way to the server (the pool's connect, or a connection that died). */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);
/**
 * Prisma's codes for the same: can't reach the server (P1001), timed out reaching it or waiting on
 * it (P1002, P1008), the server closed the connection (P1017), too many connections (P2037).
 */
const PRISMA_UNAVAILABLE = new Set(["P1001", "P1002", "P1008", "P1017", "P2037"]);
/** The driver adapter's kinds for the same (`meta.driverAdapterError.cause.kind`). */
const ADAPTER_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);
/**
 * node-postgres's own errors for a connection that died or never came, which carry no code (and
 * reach Prisma's callers unwrapped): the server went away mid-query, a client is used after its
 * connection broke, the pool's `connectionTimeoutMillis` passed.
 */
const PG_MESSAGES = [
  /^Connection terminated unexpectedly$/,
  /^Connection terminated$/,
  /^Connection terminated due to connection timeout$/,
  /^Client has encountered a connection error and is not queryable$/,
  /^timeout exceeded when trying to connect$/,
];

interface ErrorShape {
  readonly code?: unknown;
  readonly message?: unknown;
  readonly cause?: unknown;
  readonly meta?: {
    readonly driverAdapterError?: { readonly cause?: { originalCode?: unknown; kind?: unknown; code?: unknown } };
  };
}

const isUnavailableState = (code: unknown): boolean =>
  typeof code === "string" && (UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code));

/**
 * True when the database could not serve the request for now — unreachable, restarting, the
 * connection dropped (terminated backend, failover), read-only, out of connections — however it
 * reached us: a plain `pg` error (SQLSTATE or socket code), node-postgres's code-less connection
 * errors, or Prisma's wrapping of the driver adapter's error (P1001/P1017…, or P2010/P2039… carrying
 * the SQLSTATE). Follows `cause` chains a few levels deep. Callers answer UNAVAILABLE: nothing was
 * committed that was not acknowledged (a transaction whose connection dies is rolled back by the
 * server), so a retry is safe wherever the request itself is.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== null && typeof current === "object"; depth++) {
    const e = current as ErrorShape;
    if (isUnavailableState(e.code)) return true;
    if (typeof e.code === "string" && (SOCKET_CODES.has(e.code) || PRISMA_UNAVAILABLE.has(e.code))) return true;
    const adapter = e.meta?.driverAdapterError?.cause;
    if (adapter && (isUnavailableState(adapter.originalCode) || isUnavailableState(adapter.code))) return true;
    if (typeof adapter?.kind === "string" && ADAPTER_KINDS.has(adapter.kind)) return true;
    if (typeof e.message === "string" && PG_MESSAGES.some((pattern) => pattern.test(e.message as string))) return true;
    current = e.cause;
  }
  return false;
}
