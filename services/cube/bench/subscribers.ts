// Subscriber side of the delivery benchmark, in its own process (as presence's watchers are) so that
// decoding 100 streams' events is not done on the service's event loop: a subscriber is a client,
// never in the service's process. Reads its job from BENCH_JOB, opens one SubscribeActivity stream
// per token, prints READY once every stream had its `ready`, then waits for one stdin line
// `{"prefix": "...", "total": n}`: the appends are done; it waits (≤ 60 s) until every stream saw the
// n entries of that prefix, lingers 200 ms for a late duplicate, and prints one JSON line.
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";

const job = JSON.parse(process.env.BENCH_JOB ?? "{}") as { address: string; cubeId: string; tokens: string[] };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Wall-clock milliseconds with sub-ms precision, comparable across processes of one machine. */
const wallMs = () => performance.timeOrigin + performance.now();

async function main() {
  const activity = createClient(ActivityService, job.address);
  const latencies: number[] = [];
  let duplicates = 0;
  let prefix: string | undefined;
  const streams = job.tokens.map((token) => {
    const controller = new AbortController();
    const stream = activity.subscribeActivity(
      { cubeId: job.cubeId },
      { metadata: { authorization: `Bearer ${token}` }, signal: controller.signal },
    );
    const seen = new Set<string>();
    const state = { ready: false, seen, controller, done: Promise.resolve() };
    state.done = (async () => {
      try {
        for await (const event of stream) {
          if (event.event.case === "ready") state.ready = true;
          if (event.event.case !== "entry") continue;
          const text = event.event.value.message;
          const parts = text.split("@");
          const sent = Number(parts[2]);
          if (parts[0] !== "latency" || !Number.isFinite(sent)) continue;
          latencies.push(wallMs() - sent);
          if (seen.has(text)) duplicates++;
          seen.add(text);
        }
      } catch {
        // cancelled at the end
      }
    })();
    return state;
  });
  while (!streams.every((s) => s.ready)) await sleep(10);
  process.stdout.write("READY\n");
  const line = await new Promise<string>((resolve) => process.stdin.once("data", (d) => resolve(d.toString())));
  const order = JSON.parse(line) as { prefix: string; total: number };
  prefix = order.prefix;
  const count = (s: (typeof streams)[number]) => [...s.seen].filter((t) => t.startsWith(prefix as string)).length;
  const deadline = Date.now() + 60_000;
  while (streams.some((s) => count(s) < order.total) && Date.now() < deadline) await sleep(20);
  await sleep(200); // a late duplicate would land here
  for (const s of streams) s.controller.abort();
  await Promise.all(streams.map((s) => s.done));
  const missing = streams.reduce((n, s) => n + (order.total - count(s)), 0);
  activity.close();
  // Pipes are asynchronous: exit once the line is flushed.
  await new Promise<void>((resolve) =>
    process.stdout.write(`${JSON.stringify({ latencies, missing, duplicates })}\n`, () => resolve()),
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
