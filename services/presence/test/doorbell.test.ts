import { randomUUID } from "node:crypto";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { type Bus, openBus } from "@unimatrix/service-kit/bus";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "@unimatrix/service-kit/testing";
import pg from "pg";
import type { PresenceService } from "../src";
import { presenceChannel } from "../src/live/signal";
import { as, Collector, eventually, newTenant, openLink, describe as show, World } from "./helpers";

const world = new World("presence_doorbell");
let a: PresenceService;
let b: PresenceService;
let db: pg.Client;
/** The bus as a replica of the release before uses it (same prefix, same channels). */
let bus: Bus;

beforeAll(async () => {
  a = await world.start();
  b = await world.start();
  db = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${world.schema.schema}` });
  await db.connect();
  bus = await openBus({ url: TEST_REDIS_URL, prefix: world.busPrefix });
});
afterAll(async () => {
  await bus.close();
  await db.end();
  await world.close();
});

/** A replica's feed counters: drains (each one a database read) and commits fanned out without one. */
async function feedCounts(replica: PresenceService): Promise<{ drains: number; offers: number }> {
  const count = async (name: string) => {
    const { values } = await replica.metrics.registry.getSingleMetric(name)!.get();
    return values.reduce((n, v) => n + v.value, 0);
  };
  return { drains: await count("unimatrix_feed_drains_total"), offers: await count("unimatrix_feed_offers_total") };
}

/** A tenant with machines and a watcher on each given replica, past snapshot and ready. */
async function tenant(names: string[], watchOn: PresenceService[]) {
  const { tenantId, user } = newTenant();
  const machines = world.machines(a);
  const registered = new Map<string, { id: string; token: string }>();
  for (const name of names) {
    const r = await machines.registerMachine({ name }, as(user));
    registered.set(name, { id: r.machine?.id ?? "", token: r.token });
  }
  const watchers = await Promise.all(
    watchOn.map(async (replica) => {
      const watch = new Collector<WatchMachinesResponse>(world.machines(replica).watchMachines({}, as(user)));
      await watch.count(2, "snapshot and ready");
      return () => watch.items.map(show).filter((e) => e.startsWith("+") || e.startsWith("-"));
    }),
  );
  return { tenantId, machine: (name: string) => registered.get(name) ?? { id: "", token: "" }, watchers };
}

const bare = (events: string[]) => events.map((e) => e.replace(/@\d+$/, ""));
const cursorsOf = (events: string[]) => events.map((e) => BigInt(e.split("@")[1] ?? "0"));

/** Links a machine as a replica of the release before would: its function, its doorbell (or none: a lost one). */
async function linkAsOldReplica(tenantId: string, machineId: string, ring: boolean): Promise<bigint> {
  const linkId = randomUUID();
  const { rows } = await db.query(
    `SELECT * FROM presence_link_open($1::uuid, 'old-replica', $2::uuid, now() + interval '1 hour', now())`,
    [machineId, linkId],
  );
  // The release before's function answers its own columns, no more.
  expect(Object.keys(rows[0])).toEqual(["o_status", "o_tenant", "o_seq", "o_name", "o_prev_replica", "o_prev_link"]);
  const seq = BigInt(rows[0].o_seq);
  if (ring) {
    await bus.publish(
      presenceChannel(tenantId),
      JSON.stringify({ seq: seq.toString(), link: { m: machineId, l: linkId } }),
    );
  }
  return seq;
}

describe("doorbells carry their event", () => {
  test("watchers on the committing replica and on another get each transition without a read, once, in order", async () => {
    const { machine, watchers } = await tenant(["m1", "m2"], [a, b]);
    const before = [await feedCounts(a), await feedCounts(b)];
    const onA = world.links(a);
    const l1 = await openLink(onA, machine("m1").token);
    const l2 = await openLink(onA, machine("m2").token);
    l1.call.end();
    await l1.responses.finished;
    l2.call.end();
    await l2.responses.finished;
    const again = await openLink(onA, machine("m1").token);
    for (const transitions of watchers) {
      await eventually(() => transitions().length >= 5, "five transitions");
      expect(bare(transitions())).toEqual(["+m1", "+m2", "-m1", "-m2", "+m1"]);
      const cursors = cursorsOf(transitions());
      for (let i = 1; i < cursors.length; i++) expect(cursors[i]! > cursors[i - 1]!).toBe(true);
    }
    const after = [await feedCounts(a), await feedCounts(b)];
    // A offered its own commits; B took them from their doorbells: no feed read on either.
    expect(after.map((c, i) => c.drains - (before[i]?.drains ?? 0))).toEqual([0, 0]);
    expect(after.map((c, i) => c.offers - (before[i]?.offers ?? 0))).toEqual([5, 5]);
    again.call.end();
    await again.responses.finished;
  });

  test("after a lost doorbell the next one does not follow the feed's cursor: read, both once, in order", async () => {
    const { tenantId, machine, watchers } = await tenant(["lost", "next"], [b]);
    const [transitions] = watchers;
    const before = await feedCounts(b);
    await linkAsOldReplica(tenantId, machine("lost").id, false);
    const next = await openLink(world.links(a), machine("next").token);
    await eventually(() => (transitions?.() ?? []).length >= 2, "both transitions");
    expect(bare(transitions?.() ?? [])).toEqual(["+lost", "+next"]);
    expect((await feedCounts(b)).drains - before.drains).toBe(1);
    next.call.end();
    await next.responses.finished;
    await eventually(() => (transitions?.() ?? []).length === 3, "unlinked");
    expect(bare(transitions?.() ?? [])).toEqual(["+lost", "+next", "-next"]);
  });

  test("a doorbell of the release before is read; the carried one after it follows the cursor and is not", async () => {
    const { tenantId, machine, watchers } = await tenant(["old", "new"], [b]);
    const [transitions] = watchers;
    const before = await feedCounts(b);
    await linkAsOldReplica(tenantId, machine("old").id, true);
    await eventually(() => (transitions?.() ?? []).length === 1, "the old replica's transition");
    const read = await feedCounts(b);
    expect(read.drains - before.drains).toBe(1);
    const link = await openLink(world.links(a), machine("new").token);
    await eventually(() => (transitions?.() ?? []).length === 2, "the new replica's transition");
    expect(bare(transitions?.() ?? [])).toEqual(["+old", "+new"]);
    const carried = await feedCounts(b);
    expect([carried.drains - read.drains, carried.offers - read.offers]).toEqual([0, 1]);
    link.call.end();
    await link.responses.finished;
  });

  test("a revocation counter that moved since the feed's cursor makes the feed read", async () => {
    const { tenantId, machine, watchers } = await tenant(["m"], [b]);
    const [transitions] = watchers;
    // A revocation whose doorbell has not reached B yet: the counter moved, nothing else.
    await db.query("UPDATE tenant_logs SET revocations = revocations + 1 WHERE tenant_id = $1", [tenantId]);
    const before = await feedCounts(b);
    const link = await openLink(world.links(a), machine("m").token);
    await eventually(() => (transitions?.() ?? []).length === 1, "the transition");
    const after = await feedCounts(b);
    expect([after.drains - before.drains, after.offers - before.offers]).toEqual([1, 0]);
    link.call.end();
    await link.responses.finished;
  });
});
