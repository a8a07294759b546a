import { resolve } from "node:path";
import { SpanKind } from "@opentelemetry/api";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { inSpan } from "../observe/trace";
import { openEmbeddedStore } from "./embedded";
import { pgClientSession, type SqlSession } from "./sql";
import { isDatabaseUnavailable } from "./unavailable";

/**
 * A CLIENT span around one raw statement (the hot paths that bypass Prisma, whose own
 * instrumentation traces the rest): a no-op until tracing is installed.
 */
function querySpan<T>(text: string, run: () => Promise<T>): Promise<T> {
  return inSpan(RAW_QUERY_SPAN, SpanKind.CLIENT, { "db.system.name": "postgresql", "db.query.text": text }, run);
}

/** The name of a raw statement's span. */
export const RAW_QUERY_SPAN = "db query";

/** Where a service keeps its data: a schema of a Postgres database, or an embedded PGlite store. */
export interface DatabaseOptions {
  /** The service name: its schema unless `schema` says otherwise. */
  readonly service: string;
  /** Postgres URL; unset means PGlite. */
  readonly url?: string | undefined;
  /** Schema holding the service's tables (default: the service name), on Postgres and PGlite alike. */
  readonly schema?: string | undefined;
  /** Directory of the embedded store (`<dataDir>/pglite`, one per process, shared by its services). */
  readonly dataDir?: string | undefined;
  /** Size of the Postgres connection pool. */
  readonly poolSize?: number | undefined;
}

/** An open store: the Prisma driver adapter, and a way to get a raw SQL session for migrations. */
export interface Database {
  readonly kind: "postgres" | "pglite";
  readonly schema: string;
  /** What a generated PrismaClient takes as `adapter`. */
  readonly adapter: PrismaPg | PrismaPGlite;
  /** The connection pool now (Postgres only; PGlite is one in-process connection). */
  pool?(): PoolStats;
  /** A dedicated SQL session (its own connection on Postgres); close it when done. */
  openSession(): Promise<SqlSession>;
  /** Runs one parameterized statement on the pool, no ORM (hot paths where Prisma's per-query cost dominates). */
  query<R>(text: string, values: readonly unknown[]): Promise<R[]>;
  /**
   * Checks that the database can serve writes now: resolves, or rejects with why not (unreachable,
   * connection lost, read-only). Postgres: one statement on a connection of its own (a busy pool is
   * not an outage), reopened once when it was lost; PGlite is in-process and always resolves.
   */
  probe(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** What a Postgres pool holds: open connections, the idle ones, and queries waiting for one. */
export interface PoolStats {
  readonly total: number;
  readonly idle: number;
  readonly waiting: number;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Longest a new Postgres connection may take before the call that needed it fails (UNAVAILABLE). */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The PGlite Prisma adapter with the schema named the way `PrismaPg`'s `schema` option names it:
 * Prisma qualifies every model query with it (the stock factory reports no schema, i.e. `public`).
 */
class SchemaPGlite extends PrismaPGlite {
  constructor(
    client: ConstructorParameters<typeof PrismaPGlite>[0],
    private readonly schemaName: string,
  ) {
    super(client);
  }
  override async connect(): ReturnType<PrismaPGlite["connect"]> {
    const adapter = await super.connect();
    const info = adapter.getConnectionInfo?.() ?? {};
    adapter.getConnectionInfo = () => ({ supportsRelationJoins: true, ...info, schemaName: this.schemaName });
    return adapter;
  }
}

/** Opens the store the configuration asks for. */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if (options.url) return openPostgres(options.url, options.schema ?? options.service, options.poolSize ?? 10);
  return openPglite(resolve(options.dataDir ?? "./data"), options.schema ?? options.service);
}

function openPostgres(url: string, schema: string, poolSize: number): Database {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`);
  // search_path makes raw SQL see the same tables that Prisma addresses through `schema`.
  const config: pg.PoolConfig = {
    connectionString: url,
    max: poolSize,
    options: `-c search_path=${schema}`,
    // Names the service's connections in pg_stat_activity (what to watch, or terminate, per service).
    application_name: schema,
    // A server that does not answer (a failover in progress) fails a connect instead of hanging the call.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
  };
  const pool = new pg.Pool(config);
  pool.on("error", () => {
    // An idle client lost its connection (terminated backend, restart): the pool has already dropped
    // it and opens a new one on demand. Without this listener the event would crash the process.
  });
  let prober: pg.Client | undefined;
  const dropProber = () => {
    const broken = prober;
    prober = undefined;
    void broken?.end().catch(() => {});
  };
  return {
    kind: "postgres",
    schema,
    adapter: new PrismaPg(pool, { schema }),
    pool: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    query<R>(text: string, values: readonly unknown[]) {
      return querySpan(text, async () => (await pool.query(text, values as unknown[])).rows as R[]);
    },
    async probe(timeoutMs: number) {
      for (let attempt = 1; ; attempt++) {
        const reused = prober !== undefined;
        try {
          if (!prober) {
            const client = new pg.Client({ ...config, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
            client.on("error", () => {}); // a lost connection fails the next probe, which reopens it
            prober = client;
            await client.connect();
          }
          const { rows } = await prober.query<{ read_only: string }>(
            "SELECT current_setting('transaction_read_only') AS read_only",
          );
          if (rows[0]?.read_only === "on") throw new Error("the database is read-only");
          return;
        } catch (error) {
          dropProber();
          // A connection that was fine before and broke since (its backend terminated) is not an outage: retry once.
          if (!reused || attempt > 1 || !isDatabaseUnavailable(error)) throw error;
        }
      }
    },
    async openSession() {
      const client = new pg.Client(config);
      client.on("error", () => {}); // a lost connection fails the session's next query instead of the process
      await client.connect();
      return pgClientSession(client);
    },
    async close() {
      dropProber();
      await pool.end();
    },
  };
}

async function openPglite(dataDir: string, schema: string): Promise<Database> {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`);
  const store = await openEmbeddedStore(dataDir, schema);
  return {
    kind: "pglite",
    schema,
    // The adapter names its own copy of PGlite's types; the instance is the same shape.
    adapter: new SchemaPGlite(store.client as unknown as ConstructorParameters<typeof PrismaPGlite>[0], schema),
    // Through the scoped client: holds the store's lock with this schema's search_path, like Prisma's.
    query<R>(text: string, values: readonly unknown[]) {
      return querySpan(text, async () => (await store.client.query<R>(text, values as unknown[])).rows);
    },
    async openSession() {
      return store.session();
    },
    probe: async () => {},
    close: () => store.close(),
  };
}

/** What a `$queryRaw` tagged template needs: a Prisma client or transaction, or `rawQuery(database)`. */
export interface RawQuery {
  $queryRaw<T = unknown>(strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<T>;
}

/**
 * `$queryRaw` straight on the database's pool (values become `$1…$n`, as Prisma binds them), for
 * the hot statements: one pg round trip without Prisma's per-query cost (measured here: 82 µs of
 * CPU and 0.15 ms per statement through Prisma, 17 µs and 0.04 ms straight on pg). Plain values only
 * (no `Prisma.sql` fragments); rows come back as the driver types them (bigint as string on pg).
 */
export function rawQuery(database: Pick<Database, "query">): RawQuery {
  return {
    $queryRaw<T>(strings: TemplateStringsArray, ...values: unknown[]) {
      const text = strings.reduce((sql, part, i) => `${sql}$${i}${part}`);
      return database.query(text, values) as unknown as PromiseLike<T>;
    },
  };
}
