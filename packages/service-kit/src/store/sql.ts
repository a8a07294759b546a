import type pg from "pg";

/** A raw SQL connection: what migrations and bootstrap steps need, on Postgres and PGlite alike. */
export interface SqlSession {
  /** Runs one parameterised statement and returns its rows. */
  query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs a script of one or more statements without parameters. */
  exec(script: string): Promise<void>;
  /** Runs `fn` in one transaction on this session: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: SqlSession) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A session on one dedicated `pg` client (a transaction's statements need one connection). */
export function pgClientSession(client: pg.Client): SqlSession {
  const session: SqlSession = {
    async query<Row>(text: string, params: readonly unknown[] = []) {
      return (await client.query(text, params as unknown[])).rows as Row[];
    },
    async exec(script: string) {
      await client.query(script);
    },
    async transaction<T>(fn: (tx: SqlSession) => Promise<T>) {
      await client.query("BEGIN");
      try {
        const result = await fn(session);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK");
        throw error;
      }
    },
    async close() {
      await client.end();
    },
  };
  return session;
}
