// Retention benchmark (`BENCH_ONLY=retention npm run bench cube`, and at the end of a full cube
// run): how fast one retention round prunes a cube of BENCH_RETENTION_ITEMS aged items (every
// tenth acked), beside its floor — the same rows and acks deleted by bare batched `DELETE`s of the
// same size without the keep rules — and what it does to AppendEntry latency on the same database
// while it runs (sequential appends to another cube, before and during the round).

import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { startCube } from "@unimatrix/cube";
import { createClient } from "@unimatrix/service-kit/grpc";
import {
  bench,
  loadAverage,
  nowMs,
  percentile as pct,
  TEST_DATABASE_URL,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";
import pg from "pg";

const ITEMS = Number(process.env.BENCH_RETENTION_ITEMS ?? 100_000);
const BATCH = Number(process.env.BENCH_RETENTION_BATCH ?? 500);
const OPERATOR = "umx_operator_benchretain_0123456789abcdef012";
const as = (token: string) => ({ metadata: { authorization: `Bearer ${token}` } });
const fmt = (n: number, d = 0) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

/** Fills a cube with `ITEMS` broadcast entries created 40 days ago, every tenth acked. */
async function fill(pool: pg.Pool, cubeId: string): Promise<void> {
  await pool.query(
    `INSERT INTO activity_items (id, cube_id, position, item_type, created_at, message, visibility)
     SELECT gen_random_uuid(), $1::uuid, g, 'entry', now() - interval '40 days', 'bench ' || g, 'broadcast'
     FROM generate_series(1, $2::int) g`,
    [cubeId, ITEMS],
  );
  await pool.query(
    `INSERT INTO acks (entry_id, principal_id, created_at)
     SELECT id, 'bench', now() FROM activity_items WHERE cube_id = $1::uuid AND position % 10 = 0`,
    [cubeId],
  );
  await pool.query("UPDATE cubes SET head = $2 WHERE id = $1::uuid", [cubeId, ITEMS]);
  await pool.query("ANALYZE activity_items; ANALYZE acks");
}

/** Sequential appends until `until` resolves; answers their latencies (ms, sorted). */
async function appendWhile(append: () => Promise<unknown>, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  const times: number[] = [];
  while (!done) {
    const start = nowMs();
    await append();
    times.push(nowMs() - start);
  }
  return times.sort((a, b) => a - b);
}

/** Runs the retention benchmark on a schema of its own. */
export async function retentionBench(): Promise<void> {
  const schema = testSchema("bench_cube_retention");
  const service = await startCube({
    config: testConfig({ busPrefix: testBusPrefix("bench-cube-retention"), operatorToken: OPERATOR }),
    port: 0,
    schema: schema.schema,
    cube: {
      livenessIntervalMs: 0,
      retentionIntervalMs: 0,
      retentionMaxAgeSeconds: 0,
      retentionMaxItems: 0,
      retentionBatch: BATCH,
    },
  });
  const address = `127.0.0.1:${service.port}`;
  const identity = createClient(IdentityService, address);
  const cube = createClient(CubeService, address);
  const activity = createClient(ActivityService, address);
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2, options: `-c search_path=${schema.schema}` });
  try {
    const tenant = await identity.createTenant({ name: "bench", adminDisplayName: "bench" }, as(OPERATOR));
    const user = tenant.adminUserToken;
    const newCube = async (name: string) => {
      const made = await cube.createCube({ requestKey: crypto.randomUUID(), name, directive: "" }, as(user));
      return made.cube?.id as string;
    };
    const pruned = await newCube("pruned");
    const floorCube = await newCube("floor");
    const busy = await newCube("busy");
    await cube.updateCube({ cubeId: pruned, retention: { maxAgeSeconds: 30 * 86_400 } }, as(user));
    await fill(pool, pruned);
    await fill(pool, floorCube);
    const append = () =>
      activity.appendEntry({ cubeId: busy, message: "while pruning", visibility: Visibility.BROADCAST }, as(user));
    for (let i = 0; i < 50; i++) await append(); // warm

    const idle = await appendWhile(append, new Promise((resolve) => setTimeout(resolve, 3_000)));
    const started = nowMs();
    const round = service.retentionRound();
    const during = await appendWhile(append, round);
    const roundMs = nowMs() - started;
    const done = (await round).cubes.find((c) => c.cubeId === pruned);
    if (done?.entries !== ITEMS) throw new Error(`the round pruned ${done?.entries} of ${ITEMS} entries`);

    // The floor: the same rows and acks, bare batched DELETEs of the same size (no keep rules).
    const floorStart = nowMs();
    for (;;) {
      const { rows } = await pool.query<{ n: string }>(
        `WITH v AS (SELECT id FROM activity_items WHERE cube_id = $1::uuid ORDER BY position LIMIT $2),
         a AS (DELETE FROM acks WHERE entry_id IN (SELECT id FROM v)),
         d AS (DELETE FROM activity_items WHERE id IN (SELECT id FROM v) RETURNING 1)
         SELECT count(*)::text AS n FROM d`,
        [floorCube, BATCH],
      );
      if (Number(rows[0]?.n) === 0) break;
    }
    const floorMs = nowMs() - floorStart;

    const rate = (ITEMS / roundMs) * 1000;
    const floorRate = (ITEMS / floorMs) * 1000;
    process.stdout.write(
      `\ncube retention bench: ${fmt(ITEMS)} aged items (every tenth acked), batches of ${BATCH}, load ${loadAverage()}\n`,
    );
    process.stdout.write("| figure | retention round | floor (same run) | share |\n|---|---|---|---|\n");
    process.stdout.write(
      `| items pruned per second | ${fmt(rate)} | ${fmt(floorRate)} | ${fmt((rate / floorRate) * 100, 1)}% |\n`,
    );
    process.stdout.write(
      `| AppendEntry p50 / p99 (ms), sequential, another cube | ${fmt(pct(during, 50), 2)} / ${fmt(pct(during, 99), 2)} while pruning | ${fmt(pct(idle, 50), 2)} / ${fmt(pct(idle, 99), 2)} idle | |\n`,
    );
    bench("cube.retention.items_per_s", rate, "1/s");
    bench("cube.retention.floor_items_per_s", floorRate, "1/s");
    bench("cube.retention.floor_share", rate / floorRate, "ratio");
    bench("cube.retention.round_s", roundMs / 1000, "s");
    bench("cube.retention.append_p50_ms.idle", pct(idle, 50), "ms");
    bench("cube.retention.append_p99_ms.idle", pct(idle, 99), "ms");
    bench("cube.retention.append_p50_ms.pruning", pct(during, 50), "ms");
    bench("cube.retention.append_p99_ms.pruning", pct(during, 99), "ms");
  } finally {
    identity.close();
    cube.close();
    activity.close();
    await pool.end();
    await service.stop();
    await schema.drop();
  }
}
