import { status } from "@grpc/grpc-js";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { type AsCaller, asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import type { PresenceService } from "../src";
import { as, Collector, eventually, newTenant, type OpenLink, openLink, describe as show, World } from "./helpers";

const world = new World("presence_watch");
let replica: PresenceService;
let machines: ReturnType<World["machines"]>;
let links: ReturnType<World["links"]>;

beforeAll(async () => {
  // 300 links at once on a loaded 2-core machine: a link is closed after 3 silent heartbeat
  // intervals, and a flapping link adds transitions the paging test does not expect. A longer
  // interval keeps these links steady; link liveness itself is tested in link.test.ts.
  replica = await world.start({ linkHeartbeatMs: 2_000 });
  machines = world.machines(replica);
  links = world.links(replica);
});
afterAll(() => world.close());

type Principal = ReturnType<typeof newTenant>["user"];

async function register(user: Principal, names: string[]): Promise<Map<string, { id: string; token: string }>> {
  const out = new Map<string, { id: string; token: string }>();
  for (const name of names) {
    const r = await machines.registerMachine({ name }, as(user));
    out.set(name, { id: r.machine?.id ?? "", token: r.token });
  }
  return out;
}

function watch(options: AsCaller | { metadata: Record<string, string> }, after = "", client = machines) {
  return new Collector<WatchMachinesResponse>(client.watchMachines({ after }, options));
}

/** Opens links, at most `width` at a time. */
async function linkAll(tokens: string[], width = 25): Promise<OpenLink[]> {
  const out: OpenLink[] = [];
  for (let i = 0; i < tokens.length; i += width) {
    out.push(...(await Promise.all(tokens.slice(i, i + width).map((t) => openLink(links, t)))));
  }
  return out;
}

async function closeAll(open: OpenLink[]): Promise<void> {
  for (const link of open) link.call.end();
  await Promise.all(open.map((l) => l.responses.finished));
}

/** The events up to and including ready. */
async function untilReady(collector: Collector<WatchMachinesResponse>, timeoutMs = 10_000): Promise<string[]> {
  await eventually(
    () => collector.items.some((e) => e.event.case === "machineReady") || collector.done,
    "ready",
    timeoutMs,
  );
  const index = collector.items.findIndex((e) => e.event.case === "machineReady");
  if (index < 0) throw new Error(`no ready: ${collector.error?.details}`);
  return collector.items.slice(0, index + 1).map(show);
}

function cancel(collector: Collector<WatchMachinesResponse>, stream: { cancel(): void }) {
  stream.cancel();
  return collector.finished;
}

describe("watch", () => {
  test("a fresh watch gets a snapshot of every non-revoked machine by name, then ready at the same cursor", async () => {
    const { user } = newTenant();
    const m = await register(user, ["charlie", "alpha", "bravo", "delta"]);
    await machines.revokeMachine({ machineId: m.get("delta")?.id ?? "" }, as(user));
    const link = await openLink(links, m.get("bravo")?.token ?? "");
    const w = watch(as(user));
    const seen = await untilReady(w);
    const snapshot = w.items[0];
    if (snapshot?.event.case !== "machineSnapshot") throw new Error("expected a snapshot first");
    expect(snapshot.event.value.reset).toBe(false);
    expect(snapshot.event.value.items.map((i) => [i.name, i.linked])).toEqual([
      ["alpha", false],
      ["bravo", true],
      ["charlie", false],
    ]);
    expect(snapshot.event.value.items[1]?.changedAt).toBeDefined();
    expect(snapshot.event.value.items[0]?.changedAt).toBeUndefined();
    expect(seen).toEqual([`snapshot:${snapshot.event.value.cursor}:false`, `ready:${snapshot.event.value.cursor}`]);
    await closeAll([link]);
    await w.count(3, "unlinked");
    expect(show(w.items[2] as WatchMachinesResponse)).toMatch(/^-bravo@\d+$/);
  });

  test("resume replays exactly the missed events in order, then ready; live events follow", async () => {
    const { user } = newTenant();
    const m = await register(user, ["a", "b"]);
    const first = machines.watchMachines({}, as(user));
    const w1 = new Collector<WatchMachinesResponse>(first);
    const [, ready] = await untilReady(w1);
    const cursor = (ready ?? "").split(":")[1] ?? "";
    await cancel(w1, first);

    const la = await openLink(links, m.get("a")?.token ?? "");
    const lb = await openLink(links, m.get("b")?.token ?? "");
    await closeAll([la]);

    const w2 = watch(as(user), cursor);
    const seen = await untilReady(w2);
    expect(seen.map((e) => e.replace(/@\d+$/, "").replace(/:\d+$/, ""))).toEqual(["+a", "+b", "-a", "ready"]);
    const cursors = seen.slice(0, 3).map((e) => BigInt(e.split("@")[1] ?? "0"));
    expect(cursors[0]! > BigInt(cursor)).toBe(true);
    expect(cursors[1]! > cursors[0]! && cursors[2]! > cursors[1]!).toBe(true);
    expect(seen[3]).toBe(`ready:${cursors[2]}`);

    // Resuming at the last cursor replays nothing.
    const w3 = watch(as(user), cursors[2]!.toString());
    expect(await untilReady(w3)).toEqual([`ready:${cursors[2]}`]);

    await closeAll([lb]);
    await w2.count(5, "live unlink");
    await w3.count(2, "live unlink");
    expect(show(w2.items[4]!)).toMatch(/^-b@\d+$/);
    expect(show(w3.items[1]!)).toBe(show(w2.items[4]!));
  });

  test("more than 256 missed events are paged without loss or duplicates", async () => {
    const { user } = newTenant();
    const names = Array.from({ length: 300 }, (_, i) => `n${String(i).padStart(3, "0")}`);
    const m = await register(user, names);
    const w0 = machines.watchMachines({}, as(user));
    const c0 = new Collector<WatchMachinesResponse>(w0);
    const [, ready] = await untilReady(c0);
    await cancel(c0, w0);
    const open = await linkAll(names.map((n) => m.get(n)?.token ?? ""));

    const w = watch(as(user), (ready ?? "").split(":")[1]);
    const seen = await untilReady(w, 20_000);
    expect(seen.length).toBe(301);
    const linked = seen.slice(0, 300);
    expect(linked.every((e) => e.startsWith("+"))).toBe(true);
    expect(new Set(linked.map((e) => e.slice(1).split("@")[0])).size).toBe(300);
    const cursors = linked.map((e) => BigInt(e.split("@")[1] ?? "0"));
    for (let i = 1; i < cursors.length; i++) expect(cursors[i]! > cursors[i - 1]!).toBe(true);
    expect(seen[300]).toBe(`ready:${cursors[299]}`);
    await closeAll(open);
  });

  test("a cursor below the pruned floor or above the head gets a snapshot with reset true", async () => {
    const { user } = newTenant();
    const m = await register(user, ["p"]);
    const w0 = machines.watchMachines({}, as(user));
    const c0 = new Collector<WatchMachinesResponse>(w0);
    const [, ready] = await untilReady(c0);
    await cancel(c0, w0);
    const old = (ready ?? "").split(":")[1] ?? "";
    const link = await openLink(links, m.get("p")?.token ?? "");
    await closeAll([link]);

    // Above the head: a reset snapshot, then ready.
    const above = watch(as(user), "999999999999999999999999");
    const aboveSeen = await untilReady(above);
    expect(aboveSeen[0]).toMatch(/^snapshot:\d+:true$/);
    expect(aboveSeen.length).toBe(2);

    // Prune: events older than the retention go, the floor rises to the highest pruned cursor.
    world.clock.advance(8 * 24 * 3600 * 1000);
    const report = await replica.reconcile();
    expect(report.prunedTenants).toBeGreaterThanOrEqual(1);
    const below = watch(as(user), old);
    const belowSeen = await untilReady(below);
    expect(belowSeen[0]).toMatch(/^snapshot:\d+:true$/);
    const snapshot = below.items[0];
    if (snapshot?.event.case !== "machineSnapshot") throw new Error("snapshot expected");
    expect(snapshot.event.value.items.map((i) => [i.name, i.linked])).toEqual([["p", false]]);
    // The floor itself is resumable: nothing after it was pruned.
    const atFloor = watch(as(user), snapshot.event.value.cursor);
    expect(await untilReady(atFloor)).toEqual([`ready:${snapshot.event.value.cursor}`]);
  });

  test("bad cursors are INVALID_ARGUMENT naming after", async () => {
    const { user } = newTenant();
    for (const after of ["abc", "-1", "1.5", " 1", "1e3", "0x10"]) {
      const w = watch(as(user), after);
      await w.ended();
      expect(w.items).toEqual([]);
      expect(w.error?.code).toBe(status.INVALID_ARGUMENT);
      expect(w.error?.details).toMatch(/^after:/);
    }
  });

  test("the 11th open stream of a credential is refused; closing one frees a slot", async () => {
    const { user } = newTenant();
    const m = await register(user, ["watcher"]);
    const token = m.get("watcher")?.token ?? "";
    const streams = Array.from({ length: 10 }, () => machines.watchMachines({}, asBearer(token)));
    const collectors = streams.map((s) => new Collector<WatchMachinesResponse>(s));
    for (const c of collectors) await untilReady(c);
    const eleventh = watch(asBearer(token));
    await eleventh.ended();
    expect(eleventh.error?.code).toBe(status.RESOURCE_EXHAUSTED);
    // Another credential of the same tenant is not affected.
    const other = watch(as(user));
    await untilReady(other);
    await cancel(collectors[0]!, streams[0]!);
    await eventually(async () => {
      const retry = watch(asBearer(token));
      await eventually(() => retry.items.length > 0 || retry.done, "retry answer");
      return retry.items.length > 0;
    }, "a freed slot");
    for (let i = 1; i < streams.length; i++) await cancel(collectors[i]!, streams[i]!);
  });

  test("revoking the watching credential mid-stream delivers access_revoked and ends the stream", async () => {
    const { user } = newTenant();
    const m = await register(user, ["self", "other"]);
    const w = watch(asBearer(m.get("self")?.token ?? ""));
    await untilReady(w);
    await machines.revokeMachine({ machineId: m.get("other")?.id ?? "" }, as(user));
    await machines.revokeMachine({ machineId: m.get("self")?.id ?? "" }, as(user));
    await w.ended();
    expect(w.error).toBeNull();
    expect(w.items.map(show).slice(-1)).toEqual(["access_revoked"]);
    expect(w.items.filter((e) => e.event.case === "accessRevoked").length).toBe(1);
    // A revoked credential cannot open a new watch.
    const again = watch(asBearer(m.get("self")?.token ?? ""));
    await again.ended();
    expect(again.error?.code).toBe(status.UNAUTHENTICATED);
  });

  test("who may watch: operators have no tenant; unauthenticated callers are refused", async () => {
    const operator = watch(as({ kind: "operator", subjectId: "operator", tenantId: null }));
    await operator.ended();
    expect(operator.error?.code).toBe(status.PERMISSION_DENIED);
    const nobody = watch({ metadata: {} });
    await nobody.ended();
    expect(nobody.error?.code).toBe(status.UNAUTHENTICATED);
    await expectStatus(machines.listMachines({}, { metadata: {} }), status.UNAUTHENTICATED);
  });

  test("heartbeats arrive on the configured interval", async () => {
    const fast = await world.start({ watchHeartbeatMs: 100 });
    const client = world.machines(fast);
    const { user } = newTenant();
    const w = watch(as(user), "", client);
    await untilReady(w);
    await eventually(() => w.items.filter((e) => e.event.case === "heartbeat").length >= 2, "two heartbeats");
    const beat = w.items.find((e) => e.event.case === "heartbeat");
    expect(beat?.event.case === "heartbeat" && beat.event.value.at).toBeDefined();
  });

  test("a live watcher that stops reading for a while, then reads on, gets every transition once and in order", async () => {
    // Live transitions go to the call at once while the stream body waits; once the client stops
    // reading and the call stops draining they queue behind it. Both kinds, interleaved, in order.
    const beating = await world.start({ watchHeartbeatMs: 200 });
    const client = world.machines(beating, { "grpc-node.flow_control_window": 8192 });
    const { user } = newTenant();
    const names = Array.from({ length: 40 }, (_, i) => `${"y".repeat(190)}-${String(i).padStart(3, "0")}`);
    const m = await register(user, names);
    const stream = client.watchMachines({}, as(user));
    const cursors: bigint[] = [];
    let ready = false;
    let beatsAfter = 0;
    stream.on("data", (event: WatchMachinesResponse) => {
      const e = event.event;
      if (e.case === "machineReady") ready = true;
      if (e.case === "machineLinked" || e.case === "machineUnlinked") cursors.push(BigInt(e.value.cursor));
      if (e.case === "heartbeat" && cursors.length === 80) beatsAfter += 1;
    });
    await eventually(() => ready, "ready");
    const tokens = names.map((n) => m.get(n)?.token ?? "");
    const first = await linkAll(tokens.slice(0, 20));
    await eventually(() => cursors.length === 20, "the first links, read as they come");
    stream.pause();
    const second = await linkAll(tokens.slice(20));
    await closeAll([...first, ...second]);
    stream.resume();
    await eventually(() => beatsAfter > 0, "a heartbeat after all 80 transitions", 20_000);
    expect(cursors).toHaveLength(80);
    expect(cursors.every((c, i) => i === 0 || c > (cursors[i - 1] as bigint))).toBe(true);
    stream.on("error", () => {}); // CANCELLED, asked for
    stream.cancel();
  });

  test("a consumer that stops reading is cut with RESOURCE_EXHAUSTED once it is too far behind", async () => {
    const slow = await world.start({ watchMaxLagBytes: 4096 });
    // A small HTTP/2 stream window, so the transport stops absorbing events early.
    const client = world.machines(slow, { "grpc-node.flow_control_window": 8192 });
    const { user } = newTenant();
    const names = Array.from({ length: 100 }, (_, i) => `${"x".repeat(190)}-${String(i).padStart(3, "0")}`);
    const m = await register(user, names);
    const stream = client.watchMachines({}, as(user));
    let received = 0;
    let sawReady = false;
    stream.on("data", (event: WatchMachinesResponse) => {
      received += 1;
      if (event.event.case === "machineReady") {
        sawReady = true;
        stream.pause();
      }
    });
    const ended = new Promise<{ code: number }>((resolve) => {
      stream.on("error", (error: { code: number }) => resolve(error));
      stream.on("end", () => resolve({ code: status.OK }));
    });
    await eventually(() => sawReady, "ready");
    const open = await linkAll(names.map((n) => m.get(n)?.token ?? ""));
    await closeAll(open);
    stream.resume();
    const result = await ended;
    expect(result.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(received).toBeLessThan(2 + 200);
  });
});
