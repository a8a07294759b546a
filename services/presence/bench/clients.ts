// Client side of the latency benchmark, in its own process so that decoding 100 watchers'
// streams does not compete with the server for the same event loop. Reads its job from env,
// prints one JSON line with the latency samples summary.
import * as grpc from "@grpc/grpc-js";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import {
  MachineService,
  type WatchMachinesResponse,
} from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { attachPrincipal } from "@unimatrix/service-kit/auth";
import { createClient } from "@unimatrix/service-kit/grpc";
import { TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { driveSlices, measuredWindow } from "./slices";

const job = JSON.parse(process.env.BENCH_JOB ?? "{}") as {
  address: string;
  tenantId: string;
  watchers: number;
  tokens: string[];
  rate: number;
  /** Only one client process drives the links; the others only watch. */
  drive: boolean;
  /** First watcher index of this process (distinct principals across processes). */
  offset: number;
  /** Seconds of driving before the measured window (every machine links once, connections warm). */
  warmup: number;
  /** Slice length (ms) and count of the measured window, which presence (side 0) and its floor share (`slices.ts`). */
  sliceMs: number;
  slices: number;
};
const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n));

function pct(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function main() {
  const machines = createClient(MachineService, job.address);
  const links = createClient(LinkService, job.address);
  const samples: number[] = [];
  const watchers: { cancel(): void }[] = [];
  /** Per watcher, the cursors of the transitions it received (exactly-once check). */
  const seen: Set<string>[] = [];
  /** The measured window (epoch ms), set by the go signal; shared by every process. */
  const timed = { from: Number.POSITIVE_INFINITY, to: Number.NEGATIVE_INFINITY };
  let duplicates = 0;
  let ready = 0;
  for (let i = 0; i < job.watchers; i++) {
    const metadata = attachPrincipal(
      new grpc.Metadata(),
      {
        kind: "user",
        subjectId: `00000000-0000-4000-8000-${String(job.offset + i).padStart(12, "0")}`,
        tenantId: job.tenantId,
      },
      TEST_INTERNAL_KEY,
    );
    const stream = machines.watchMachines({}, { metadata });
    watchers.push(stream as unknown as { cancel(): void });
    const mine = new Set<string>();
    seen.push(mine);
    stream.on("data", (event: WatchMachinesResponse) => {
      const c = event.event.case;
      if (c === "machineReady") ready += 1;
      else if ((c === "machineLinked" || c === "machineUnlinked") && event.event.value.at) {
        const at = Number(event.event.value.at.seconds) * 1000 + event.event.value.at.nanos / 1e6;
        // Latency counts for transitions inside the measured window only: not the warm-up (every
        // machine's first link), not the final burst of closes; all count for exactly-once.
        if (at >= timed.from && at <= timed.to) samples.push(Date.now() - at);
        if (mine.has(event.event.value.cursor)) duplicates += 1;
        mine.add(event.event.value.cursor);
      }
    });
    stream.on("error", () => {});
  }
  while (ready < job.watchers) await sleep(10);
  process.stdout.write("READY\n");
  // Wait for the go signal so every process is watching before the first transition.
  // It carries the epoch ms at which driving starts: the window opens after the warm-up.
  const go = await new Promise<number>((resolve) => process.stdin.once("data", (d) => resolve(Number(d.toString()))));
  const slices = { go, warmup: job.warmup, sliceMs: job.sliceMs, slices: job.slices, rate: job.rate };
  Object.assign(timed, measuredWindow(slices));
  const open: (ReturnType<typeof links.link> | null)[] = job.tokens.map(() => null);
  // The driver toggles one machine's link per step, in presence's slices; it closes what is still
  // open after the measured window (those closes are not timed).
  const n = !job.drive
    ? 0
    : await driveSlices(slices, 0, (step) => {
        const i = step % job.tokens.length;
        const current = open[i];
        if (current) {
          current.end();
          open[i] = null;
        } else {
          const call = links.link({ metadata: { authorization: `Bearer ${job.tokens[i]}` } });
          call.call.on("error", () => {});
          call.call.on("data", () => {});
          call.send({ event: { case: "hello", value: {} } });
          open[i] = call;
        }
      });
  if (!job.drive) await sleep(Math.max(0, timed.to - Date.now()));
  let ends = 0;
  for (const call of open) {
    if (call) ends += 1;
    call?.end();
  }
  // Let every transition in flight land: wait until the watchers agree and nothing arrived for
  // a second (deadline 60 s), so a slow run reports latency, not misses.
  const total = () => seen.reduce((n, set) => n + set.size, 0);
  const deadline = performance.now() + 60_000;
  let last = -1;
  for (;;) {
    await sleep(1000);
    const now = total();
    const agreed = seen.every((set) => set.size === seen[0]?.size);
    if ((now === last && agreed) || performance.now() > deadline) break;
    last = now;
  }
  for (const w of watchers) w.cancel();
  process.stdout.write(
    `${JSON.stringify({
      p50: pct(samples, 50),
      p99: pct(samples, 99),
      count: samples.length,
      driven: job.drive ? n + ends : 0,
      duplicates,
      perWatcher: seen.map((s) => s.size),
      samples,
    })}\n`,
  );
  machines.close();
  links.close();
}

main().then(
  // Exit only once the (large) result line is flushed to the pipe: exiting earlier truncates it.
  () => process.stdout.write("", () => process.exit(0)),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
