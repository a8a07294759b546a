// Cube benchmark: append throughput and append→subscriber latency with 100 subscribers, each next
// to a raw baseline measured in the same run (pg INSERT of the same rows; Redis publish→receive).
import { randomUUID } from "node:crypto";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { startCube } from "@unimatrix/cube";
import { openBus } from "@unimatrix/service-kit/bus";
import { createClient } from "@unimatrix/service-kit/grpc";
import {
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";
import pg from "pg";

const OPERATOR = "umx_operator_benchlookup_0123456789abcdef0123";
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const APPENDS = Number(process.env.BENCH_APPENDS ?? 2_000);
const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 100);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

const as = (token: string) => ({ metadata: { authorization: `Bearer ${token}` } });
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const fmt = (n: number, d = 0) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

async function runWorkers(total: number, workers: number, work: (i: number, w: number) => Promise<void>) {
  let next = 0;
  const started = nowMs();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (next < total) await work(next++, w);
    }),
  );
  return total / ((nowMs() - started) / 1000);
}

async function main() {
  const schema = testSchema("bench_cube");
  const busPrefix = testBusPrefix("bench-cube");
  const service = await startCube({
    config: testConfig({ busPrefix, operatorToken: OPERATOR }),
    port: 0,
    schema: schema.schema,
    cube: { livenessIntervalMs: 0, streamMaxBacklog: 100_000 },
  });
  const address = `127.0.0.1:${service.port}`;
  const identity = createClient(IdentityService, address);
  const cube = createClient(CubeService, address);
  const activity = createClient(ActivityService, address);
  const pool = new pg.Pool({
    connectionString: TEST_DATABASE_URL,
    max: CONCURRENCY,
    options: `-c search_path=${schema.schema}`,
  });
  try {
    const tenant = await identity.createTenant({ name: "bench", adminDisplayName: "bench" }, as(OPERATOR));
    const client = await identity.issueClient({ name: "bench" }, as(tenant.adminUserToken));
    const { cube: c } = await cube.createCube(
      { requestKey: randomUUID(), name: "bench", directive: "" },
      as(client.token),
    );
    const cubeId = c?.id as string;
    await cube.createRole({ cubeId, name: "worker", isDefault: true, canBroadcast: true }, as(client.token));
    const seats: string[] = [];
    for (let i = 0; i < CONCURRENCY + 11 + 2 * SUBSCRIBERS; i++) {
      seats.push((await cube.attachSeat({ cubeId, hostname: "bench" }, as(client.token))).sessionToken);
    }
    const message = "benchmark entry: status update from a worker drone";

    // 1. Append throughput vs raw pg INSERT of the same rows, same concurrency.
    const warm = await runWorkers(200, CONCURRENCY, async (_i, w) => {
      await activity.appendEntry({ cubeId, message, visibility: Visibility.BROADCAST }, as(seats[w] as string));
    });
    void warm;
    const appendRate = await runWorkers(APPENDS, CONCURRENCY, async (_i, w) => {
      await activity.appendEntry({ cubeId, message, visibility: Visibility.BROADCAST }, as(seats[w] as string));
    });
    await pool.query("CREATE TABLE raw_items (LIKE activity_items INCLUDING DEFAULTS INCLUDING INDEXES)");
    let rawPosition = 0;
    const rawRate = await runWorkers(APPENDS, CONCURRENCY, async () => {
      rawPosition++;
      await pool.query(
        `INSERT INTO raw_items (id, cube_id, position, item_type, created_at, author_principal_id, author_principal_kind,
          author_label, message, visibility) VALUES ($1, $2, $3, 'entry', now(), $4, 'client', 'bench', $5, 'broadcast')`,
        [randomUUID(), cubeId, rawPosition, client.client?.id, message],
      );
    });

    // 2. Append→delivery latency: N subscribers (on their own seats) at a fixed append rate.
    let seatCursor = CONCURRENCY;
    const latencyAt = async (subscribers: number, rate: number) => {
      const latencies: number[] = [];
      const appendTimes: number[] = [];
      const streams = seats.slice(seatCursor, seatCursor + subscribers).map((token) => {
        const controller = new AbortController();
        const stream = activity.subscribeActivity({ cubeId }, { ...as(token), signal: controller.signal });
        let ready = false;
        const done = (async () => {
          try {
            for await (const event of stream) {
              if (event.event.case === "ready") ready = true;
              if (event.event.case === "entry") {
                const sent = Number(event.event.value.message.split("@")[1]);
                if (Number.isFinite(sent)) latencies.push(nowMs() - sent);
              }
            }
          } catch {
            // cancelled at the end
          }
        })();
        return { controller, done, isReady: () => ready };
      });
      seatCursor += subscribers;
      while (!streams.every((s) => s.isReady())) await new Promise((r) => setTimeout(r, 10));
      const total = Math.round(rate * SECONDS);
      const startAt = nowMs();
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < total; i++) {
        const due = startAt + (i * 1000) / rate;
        const wait = due - nowMs();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const sent = nowMs();
        pending.push(
          activity
            .appendEntry(
              { cubeId, message: `latency@${sent}`, visibility: Visibility.BROADCAST },
              as(seats[i % CONCURRENCY] as string),
            )
            .then(() => appendTimes.push(nowMs() - sent)),
        );
      }
      await Promise.all(pending);
      const expected = total * subscribers;
      const deadline = nowMs() + 60_000;
      while (latencies.length < expected && nowMs() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const s of streams) s.controller.abort();
      await Promise.all(streams.map((s) => s.done));
      const sorted = [...latencies].sort((a, b) => a - b);
      const appendSorted = [...appendTimes].sort((a, b) => a - b);
      return { subscribers, rate, delivered: latencies.length, expected, sorted, appendSorted };
    };
    const sustainable = Math.max(10, Math.min(RATE, Math.floor(appendRate * 0.5)));
    const curve = [];
    for (const n of [1, 10, SUBSCRIBERS]) curve.push(await latencyAt(n, sustainable));
    const target = await latencyAt(SUBSCRIBERS, RATE);
    const sorted = target.sorted;
    const total = Math.round(RATE * SECONDS);

    // 3. Raw Redis publish→receive at the same rate (through the kit's thin ioredis bus).
    const bus = await openBus({ url: TEST_REDIS_URL, prefix: `${busPrefix}-raw` });
    const raw: number[] = [];
    await bus.subscribe("raw", (m) => raw.push(nowMs() - Number(m)));
    const rawStart = nowMs();
    for (let i = 0; i < total; i++) {
      const due = rawStart + (i * 1000) / RATE;
      const wait = due - nowMs();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await bus.publish("raw", String(nowMs()));
    }
    while (raw.length < total && nowMs() < rawStart + SECONDS * 1000 + 5_000)
      await new Promise((r) => setTimeout(r, 10));
    await bus.close();
    const rawSorted = [...raw].sort((a, b) => a - b);

    const rows = [
      [
        "append throughput (appends/s)",
        fmt(appendRate),
        "raw pg INSERT (rows/s)",
        fmt(rawRate),
        `${fmt((appendRate / rawRate) * 100, 1)}%`,
      ],
      [
        "append→delivery p50 (ms)",
        fmt(pct(sorted, 50), 2),
        "redis pub→recv p50 (ms)",
        fmt(pct(rawSorted, 50), 2),
        `${fmt(pct(sorted, 50) / pct(rawSorted, 50), 1)}x`,
      ],
      [
        "append→delivery p99 (ms)",
        fmt(pct(sorted, 99), 2),
        "redis pub→recv p99 (ms)",
        fmt(pct(rawSorted, 99), 2),
        `${fmt(pct(sorted, 99) / pct(rawSorted, 99), 1)}x`,
      ],
    ];
    process.stdout.write(
      `cube bench: ${CONCURRENCY} in flight, ${APPENDS} appends; ${SUBSCRIBERS} subscribers at ${RATE} appends/s for ${SECONDS} s ` +
        `(${fmt(target.delivered)} of ${fmt(target.expected)} deliveries)\n`,
    );
    process.stdout.write("| figure | cube | baseline | raw | ratio |\n|---|---|---|---|---|\n");
    for (const r of rows) process.stdout.write(`| ${r.join(" | ")} |\n`);
    process.stdout.write(
      "\n| subscribers | appends/s | deliveries | append RPC p50 (ms) | delivery p50 (ms) | delivery p99 (ms) |\n|---|---|---|---|---|---|\n",
    );
    for (const c of [...curve, target]) {
      process.stdout.write(
        `| ${c.subscribers} | ${c.rate} | ${fmt(c.delivered)}/${fmt(c.expected)} | ${fmt(pct(c.appendSorted, 50), 2)} | ${fmt(pct(c.sorted, 50), 2)} | ${fmt(pct(c.sorted, 99), 2)} |\n`,
      );
    }
  } finally {
    identity.close();
    cube.close();
    activity.close();
    await pool.end();
    await service.stop();
    await schema.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
