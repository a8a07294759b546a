import { resolve } from "node:path";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { openEmbeddedStore } from "./embedded";
import { pgClientSession, type SqlSession } from "./sql";

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
  /** A dedicated SQL session (its own connection on Postgres); close it when done. */
  openSession(): Promise<SqlSession>;
  close(): Promise<void>;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

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
  const config: pg.PoolConfig = { connectionString: url, max: poolSize, options: `-c search_path=${schema}` };
  const pool = new pg.Pool(config);
  pool.on("error", () => {
    // An idle client lost its connection; the pool replaces it. Queries report their own errors.
  });
  return {
    kind: "postgres",
    schema,
    adapter: new PrismaPg(pool, { schema }),
    async openSession() {
      const client = new pg.Client(config);
      await client.connect();
      return pgClientSession(client);
    },
    async close() {
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
    async openSession() {
      return store.session();
    },
    close: () => store.close(),
  };
}
