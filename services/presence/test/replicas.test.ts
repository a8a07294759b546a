import { status } from "@grpc/grpc-js";
import { LinkCloseReason } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import type { PresenceService } from "../src";
import { as, Collector, eventually, FAST, newTenant, openLink, describe as show, World } from "./helpers";

const world = new World("presence_replicas");
let a: PresenceService;
let b: PresenceService;

beforeAll(async () => {
  a = await world.start();
  b = await world.start();
});
afterAll(() => world.close());

async function tenantWithWatcherOn(replica: PresenceService, names: string[]) {
  const { user } = newTenant();
  const machines = world.machines(replica);
  const tokens = new Map<string, string>();
  for (const name of names) tokens.set(name, (await machines.registerMachine({ name }, as(user))).token);
  const watch = new Collector<WatchMachinesResponse>(machines.watchMachines({}, as(user)));
  await watch.count(2, "snapshot and ready");
  const transitions = () => watch.items.map(show).filter((e) => e.startsWith("+") || e.startsWith("-"));
  return { user, tokens, watch, transitions, machines };
}

const bare = (events: string[]) => events.map((e) => e.replace(/@\d+$/, ""));

describe("two replicas", () => {
  test("a watcher on B sees the transitions of links held by A, in order", async () => {
    const { tokens, transitions } = await tenantWithWatcherOn(b, ["m1", "m2"]);
    const onA = world.links(a);
    const l1 = await openLink(onA, tokens.get("m1") ?? "");
    const l2 = await openLink(onA, tokens.get("m2") ?? "");
    l1.call.end();
    await l1.responses.finished;
    const l1b = await openLink(onA, tokens.get("m1") ?? "");
    await eventually(() => transitions().length >= 4, "four transitions on B");
    expect(bare(transitions())).toEqual(["+m1", "+m2", "-m1", "+m1"]);
    const cursors = transitions().map((e) => BigInt(e.split("@")[1] ?? "0"));
    for (let i = 1; i < cursors.length; i++) expect(cursors[i]! > cursors[i - 1]!).toBe(true);
    for (const link of [l2, l1b]) link.call.end();
    await Promise.all([l2.responses.finished, l1b.responses.finished]);
    await eventually(() => transitions().length >= 6, "unlinks on B");
  });

  test("a link on B replaces one on A: A's stream is closed REPLACED, no presence event", async () => {
    const { tokens, transitions, user, machines } = await tenantWithWatcherOn(b, ["roamer"]);
    const first = await openLink(world.links(a), tokens.get("roamer") ?? "");
    const second = await openLink(world.links(b), tokens.get("roamer") ?? "");
    await first.responses.ended();
    const last = first.responses.items.at(-1);
    expect(last?.event.case === "closed" && last.event.value.reason).toBe(LinkCloseReason.REPLACED);
    const listed = await machines.listMachines({}, as(user));
    expect(listed.machines[0]?.linked).toBe(true);
    expect(bare(transitions())).toEqual(["+roamer"]);
    second.call.end();
    await second.responses.finished;
    await eventually(() => transitions().length === 2, "unlinked");
    expect(bare(transitions())).toEqual(["+roamer", "-roamer"]);
  });

  test("a killed replica's machines are unlinked by a survivor once its lease expires", async () => {
    const doomed = await world.start();
    const { tokens, transitions } = await tenantWithWatcherOn(b, ["d1", "d2"]);
    const onDoomed = world.links(doomed);
    await openLink(onDoomed, tokens.get("d1") ?? "");
    await openLink(onDoomed, tokens.get("d2") ?? "");
    await eventually(() => transitions().length === 2, "both linked");
    await doomed.kill();

    // The lease is still valid: the survivor leaves the machines alone.
    expect((await b.reconcile()).expired).toBe(0);
    expect(bare(transitions())).toEqual(["+d1", "+d2"]);

    world.clock.advance(FAST.leaseMs + 1_000);
    await b.renewLeases();
    const report = await b.reconcile();
    expect(report.expired).toBe(2);
    await eventually(() => transitions().length === 4, "both unlinked");
    expect(bare(transitions()).slice(2).sort()).toEqual(["-d1", "-d2"]);
    // Nothing is unlinked twice.
    expect((await a.reconcile()).expired).toBe(0);
  });

  test("a live replica's renewed leases keep its machines linked when the clock passes the old expiry", async () => {
    const { tokens, transitions } = await tenantWithWatcherOn(b, ["steady"]);
    const link = await openLink(world.links(a), tokens.get("steady") ?? "");
    await eventually(() => transitions().length === 1, "linked");
    world.clock.advance(FAST.leaseMs - 1_000);
    await a.renewLeases();
    world.clock.advance(2_000);
    expect((await b.reconcile()).expired).toBe(0);
    expect(link.responses.done).toBe(false);
    expect(bare(transitions())).toEqual(["+steady"]);
    link.call.end();
    await link.responses.finished;
    await eventually(() => transitions().length === 2, "unlinked");
  });

  test("a replica that stops gracefully ends links with going_away; a reconnect elsewhere keeps the machine linked", async () => {
    const leaving = await world.start();
    const { tokens, transitions } = await tenantWithWatcherOn(b, ["mover"]);
    const link = await openLink(world.links(leaving), tokens.get("mover") ?? "");
    await eventually(() => transitions().length === 1, "linked");
    await leaving.stop();
    await link.responses.ended();
    const last = link.responses.items.at(-1);
    expect(last?.event.case).toBe("goingAway");
    const again = await openLink(world.links(b), tokens.get("mover") ?? "");
    await b.reconcile();
    expect(bare(transitions())).toEqual(["+mover"]);
    again.call.end();
    await again.responses.finished;
    await eventually(() => transitions().length === 2, "unlinked");
  });

  test("a machine token cached on both replicas is refused on both once revoked: at once here, over the bus there", async () => {
    const { user, tokens, machines } = await tenantWithWatcherOn(a, ["cached"]);
    const token = tokens.get("cached") ?? "";
    const onB = world.machines(b);
    const id = (await machines.listMachines({}, as(user))).machines[0]?.id ?? "";
    // Each replica loads the credential once, then answers from its cache.
    for (const client of [machines, onB]) await client.getMachine({ machineId: id }, asBearer(token));
    const hits = { a: a.machineAuth.stats().hits, b: b.machineAuth.stats().hits };
    for (const client of [machines, onB]) await client.getMachine({ machineId: id }, asBearer(token));
    expect(a.machineAuth.stats().hits).toBe(hits.a + 1);
    expect(b.machineAuth.stats().hits).toBe(hits.b + 1);
    // The cached verifier still checks the secret: the right lookup with a wrong secret is refused.
    const forged = `${token.slice(0, token.lastIndexOf("_") + 1)}${"A".repeat(43)}`;
    await expectStatus(onB.getMachine({ machineId: id }, asBearer(forged)), status.UNAUTHENTICATED);
    expect(b.machineAuth.stats().hits).toBe(hits.b + 2);
    // A link's open re-checks revocation under the row lock; the caches hear the credential news.
    const link = await openLink(world.links(b), token);
    await machines.revokeMachine({ machineId: id }, as(user));
    await expectStatus(machines.getMachine({ machineId: id }, asBearer(token)), status.UNAUTHENTICATED);
    await expectStatus(machines.authenticate({ token }), status.UNAUTHENTICATED);
    await eventually(async () => {
      try {
        await onB.getMachine({ machineId: id }, asBearer(token));
        return false;
      } catch (error) {
        return (error as { code?: number }).code === status.UNAUTHENTICATED;
      }
    }, "the other replica refuses the revoked token");
    await link.responses.ended();
    const last = link.responses.items.at(-1);
    expect(last?.event.case === "closed" && last.event.value.reason).toBe(LinkCloseReason.REVOKED);
    await expectStatus(onB.authenticate({ token }), status.UNAUTHENTICATED);
  });
});
