import type pg from "pg";

/** A raw SQL connection: what migrations and bootstrap steps need, on Postgres and PGlite alike. */
export interface SqlSession {
  /** Runs one parameterised statement and returns its rows. */
  query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs a script of one or more statements without parameters. */
  exec(script: string): Promise<void>;
  close(): Promise<void>;
}

/** A session on one dedicated `pg` client (a transaction's statements need one connection). */
export function pgClientSession(client: pg.Client): SqlSession {
  return {
    async query<Row>(text: string, params: readonly unknown[] = []) {
      return (await client.query(text, params as unknown[])).rows as Row[];
    },
    async exec(script: string) {
      await client.query(script);
    },
    async close() {
      await client.end();
    },
  };
}

/** The part of a PGlite instance a session uses (PGlite's own types are ESM-only). */
export interface PgliteLike {
  query<Row>(text: string, params?: unknown[]): Promise<{ rows: Row[] }>;
  exec(script: string): Promise<unknown>;
}

/** A session on a PGlite instance (single connection by nature); closing it leaves the store open. */
export function pgliteSession(db: PgliteLike): SqlSession {
  return {
    async query<Row>(text: string, params: readonly unknown[] = []) {
      return (await db.query<Row>(text, params as unknown[])).rows;
    },
    async exec(script: string) {
      await db.exec(script);
    },
    async close() {},
  };
}
