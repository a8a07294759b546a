// Link churn for the presence benchmark (index.ts): daemons opening and closing links back to
// back, and the raw floor doing the same transaction and publish on pg and Redis.
import type { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { TypedClient } from "@unimatrix/service-kit/grpc";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "@unimatrix/service-kit/testing";
import { Redis } from "ioredis";
import pg from "pg";

/** The floors' tables: a presence row per machine (60) and an event log (also when only churn runs). */
export async function rawTables(pool: pg.Pool): Promise<void> {
  await pool.query("CREATE TABLE IF NOT EXISTS raw_state (id int PRIMARY KEY, linked boolean NOT NULL)");
  await pool.query(
    "CREATE TABLE IF NOT EXISTS raw_events (seq bigserial PRIMARY KEY, id int, linked boolean, at timestamptz)",
  );
  await pool.query("INSERT INTO raw_state SELECT g, false FROM generate_series(0, 59) g ON CONFLICT DO NOTHING");
}

/**
 * Daemons doing link open+close cycles back to back until `until` (performance.now() ms): each
 * cycle opens a Link, sends hello, waits for `linked`, ends it and waits for the stream's end.
 * Returns the transitions (two per cycle).
 */
export async function presenceChurn(
  links: TypedClient<typeof LinkService>,
  tokens: readonly string[],
  until: number,
): Promise<number> {
  let transitions = 0;
  await Promise.all(
    tokens.map(async (token) => {
      while (performance.now() < until) {
        const call = links.link({ metadata: { authorization: `Bearer ${token}` } });
        call.send({ event: { case: "hello", value: {} } });
        const iterator = call[Symbol.asyncIterator]();
        await iterator.next(); // linked
        call.end();
        for (;;) {
          const next = await iterator.next().catch(() => ({ done: true }));
          if (next.done) break;
        }
        transitions += 2;
      }
    }),
  );
  return transitions;
}

/**
 * Raw baseline of churn: `width` workers doing the same transaction (row lock, insert an event,
 * update the row) + publish back to back, on a pool and a publisher kept across slices.
 */
export async function rawChurner(
  width: number,
  schema: string,
): Promise<{ run(until: number): Promise<number>; close(): Promise<void> }> {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: width, options: `-c search_path=${schema}` });
  await rawTables(pool);
  const publisher = new Redis(TEST_REDIS_URL);
  return {
    async run(until) {
      let transitions = 0;
      await Promise.all(
        Array.from({ length: width }, async (_, id) => {
          while (performance.now() < until) {
            const client = await pool.connect();
            try {
              await client.query("BEGIN");
              const row = await client.query("SELECT linked FROM raw_state WHERE id = $1 FOR UPDATE", [id]);
              const linked = !row.rows[0].linked;
              await client.query("INSERT INTO raw_events (id, linked, at) VALUES ($1, $2, now())", [id, linked]);
              await client.query("UPDATE raw_state SET linked = $2 WHERE id = $1", [id, linked]);
              await client.query("COMMIT");
            } finally {
              client.release();
            }
            await publisher.publish("bench-raw-churn", String(Date.now()));
            transitions += 1;
          }
        }),
      );
      return transitions;
    },
    async close() {
      publisher.disconnect();
      await pool.end();
    },
  };
}
