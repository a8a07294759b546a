// Subscriber side of the delivery benchmark, in its own process (as presence's watchers are) so that
// decoding 100 streams' events is not done on the service's event loop: a subscriber is a client,
// never in the service's process. Reads its job from BENCH_JOB, opens one SubscribeActivity stream
// per token, prints READY once every stream had its `ready`, then answers stdin lines:
//  - `{"upto": n}`: prints `UPTO n` once every stream saw n timed entries (a slice's deliveries are
//    all in, `delivery.ts` switches sides), or after 60 s;
//  - `{"total": n}`: the appends are done; it waits (≤ 60 s) until every stream saw the n timed
//    entries, lingers 200 ms for a late duplicate, and prints one JSON line.
// Timed entries are `latency@<point>.<i>@<sent wall ms>`; warm-up entries are not counted.
import { createInterface } from "node:readline";
import {
  ActivityService,
  type SubscribeActivityResponse,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";

const job = JSON.parse(process.env.BENCH_JOB ?? "{}") as { address: string; cubeId: string; tokens: string[] };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Wall-clock milliseconds with sub-ms precision, comparable across processes of one machine. */
const wallMs = () => performance.timeOrigin + performance.now();
const write = (line: string) => new Promise<void>((resolve) => process.stdout.write(`${line}\n`, () => resolve()));

async function main() {
  const activity = createClient(ActivityService, job.address);
  const latencies: number[] = [];
  let duplicates = 0;
  const streams = job.tokens.map((token) => {
    const controller = new AbortController();
    const stream = activity.subscribeActivity(
      { cubeId: job.cubeId },
      { metadata: { authorization: `Bearer ${token}` }, signal: controller.signal },
    );
    const state = { ready: false, seen: new Set<number>(), controller, done: Promise.resolve() };
    // 'data' events, not `for await`: the async iterator's promise and microtask per message cost
    // 15.4 µs of CPU per delivery against 12.9 µs this way (s1000, cube.fanout.client_cpu_us).
    stream.on("data", (event: SubscribeActivityResponse) => {
      if (event.event.case === "ready") state.ready = true;
      if (event.event.case !== "entry") return;
      const text = event.event.value.message;
      const parts = text.split("@");
      const sent = Number(parts[2]);
      if (parts[0] !== "latency" || !Number.isFinite(sent)) return;
      latencies.push(wallMs() - sent);
      const index = Number(parts[1]?.slice(parts[1].indexOf(".") + 1));
      if (state.seen.has(index)) duplicates++;
      state.seen.add(index);
    });
    // Cancelled at the end (the error event is the cancellation).
    state.done = new Promise<void>((resolve) => {
      stream.on("error", () => resolve());
      stream.on("end", () => resolve());
    });
    return state;
  });
  /** Resolves once every stream saw `n` timed entries, or after 60 s (the final count tells what is missing). */
  const upto = async (n: number) => {
    const deadline = Date.now() + 60_000;
    while (streams.some((s) => s.seen.size < n) && Date.now() < deadline) await sleep(2);
  };
  while (!streams.every((s) => s.ready)) await sleep(10);
  await write("READY");
  const cpuFrom = process.cpuUsage();
  let total = 0;
  for await (const line of createInterface({ input: process.stdin })) {
    const order = JSON.parse(line) as { upto?: number; total?: number };
    if (order.upto !== undefined) {
      await upto(order.upto);
      await write(`UPTO ${order.upto}`);
      continue;
    }
    total = order.total ?? 0;
    await upto(total);
    await sleep(200); // a late duplicate would land here
    break;
  }
  for (const s of streams) s.controller.abort();
  await Promise.all(streams.map((s) => s.done));
  const missing = streams.reduce((n, s) => n + Math.max(0, total - s.seen.size), 0);
  activity.close();
  // Pipes are asynchronous: exit once the line is flushed.
  const cpu = process.cpuUsage(cpuFrom);
  await write(JSON.stringify({ latencies, missing, duplicates, cpuUs: cpu.user + cpu.system }));
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
