/** Methods a Prisma client has that an interactive transaction client does not (or must not use). */
type NotInTransaction = "$connect" | "$disconnect" | "$on" | "$use" | "$extends" | "$transaction";

/** The client an interactive transaction hands to its callback, for any generated PrismaClient. */
export type Tx<Client> = Omit<Client, NotInTransaction>;

/** Options of one transaction. */
export interface TransactionOptions {
  /** Longest the whole transaction may run before Prisma rolls it back. */
  readonly timeoutMs?: number;
  /** Longest to wait for a pooled connection before giving up. */
  readonly maxWaitMs?: number;
  readonly isolationLevel?: "ReadCommitted" | "RepeatableRead" | "Serializable";
}

/**
 * The one set of transaction timeouts. Contenders queue on row locks, so the waits are generous:
 * a hundred racing writers on one row must all get their turn rather than fail with a timeout.
 */
const TRANSACTION_DEFAULTS = { timeoutMs: 30_000, maxWaitMs: 20_000 } as const;

/** What `inTransaction` needs of a client: Prisma's interactive `$transaction`. */
export interface TransactionCapable {
  $transaction<R>(
    fn: (tx: never) => Promise<R>,
    options?: { maxWait?: number; timeout?: number; isolationLevel?: never },
  ): Promise<R>;
}

/** Runs `fn` in one interactive transaction (READ COMMITTED unless asked), with the kit's timeouts. */
export function inTransaction<Client extends { $transaction: unknown }, T>(
  client: Client,
  fn: (tx: Tx<Client>) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  const run = (client as unknown as TransactionCapable).$transaction.bind(client);
  return run(fn as (tx: never) => Promise<T>, {
    timeout: options.timeoutMs ?? TRANSACTION_DEFAULTS.timeoutMs,
    maxWait: options.maxWaitMs ?? TRANSACTION_DEFAULTS.maxWaitMs,
    ...(options.isolationLevel ? { isolationLevel: options.isolationLevel as never } : {}),
  });
}
