import { status } from "@grpc/grpc-js";
import { LinkCloseReason } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { as, Collector, eventually, newTenant, openLink, describe as show, World } from "./helpers";

const world = new World("presence_link");
let machines: ReturnType<World["machines"]>;
let links: ReturnType<World["links"]>;

beforeAll(async () => {
  const replica = await world.start();
  machines = world.machines(replica);
  links = world.links(replica);
});
afterAll(() => world.close());

/** A tenant with one machine and a watcher that saw its snapshot and ready. */
async function setup(name = "m1") {
  const { user } = newTenant();
  const registered = await machines.registerMachine({ name }, as(user));
  const watch = new Collector<WatchMachinesResponse>(machines.watchMachines({}, as(user)));
  await watch.count(2, "snapshot and ready");
  const id = registered.machine?.id ?? "";
  const linked = async () => (await machines.getMachine({ machineId: id }, as(user))).machine?.linked;
  return { user, id, token: registered.token, watch, linked };
}

const transitions = (watch: Collector<WatchMachinesResponse>) =>
  watch.items.map(show).filter((e) => e.startsWith("+") || e.startsWith("-"));

describe("link", () => {
  test("open links, the current link's close unlinks, one event each", async () => {
    const { token, watch, linked } = await setup();
    const link = await openLink(links, token);
    expect(await linked()).toBe(true);
    link.call.end();
    await link.responses.ended();
    expect(link.responses.error).toBeNull();
    expect(await linked()).toBe(false);
    await watch.count(4, "linked and unlinked");
    expect(transitions(watch).map((e) => e.replace(/@\d+$/, ""))).toEqual(["+m1", "-m1"]);
  });

  test("a new link replaces the old one: old gets closed REPLACED, no event, machine stays linked", async () => {
    const { token, watch, linked } = await setup();
    const first = await openLink(links, token);
    const second = await openLink(links, token);
    await first.responses.ended();
    const last = first.responses.items.at(-1);
    expect(last?.event.case === "closed" && last.event.value.reason).toBe(LinkCloseReason.REPLACED);
    expect(await linked()).toBe(true);
    second.call.end();
    await second.responses.ended();
    expect(await linked()).toBe(false);
    await watch.count(4, "two transitions");
    expect(transitions(watch).map((e) => e.replace(/@\d+$/, ""))).toEqual(["+m1", "-m1"]);
  });

  test("a revoked machine is never linked; revoking a linked machine closes its link REVOKED and unlinks once", async () => {
    const { user, id, token, watch, linked } = await setup();
    const link = await openLink(links, token);
    await machines.revokeMachine({ machineId: id }, as(user));
    await link.responses.ended();
    const last = link.responses.items.at(-1);
    expect(last?.event.case === "closed" && last.event.value.reason).toBe(LinkCloseReason.REVOKED);
    expect(await linked()).toBe(false);
    const again = links.link(asBearer(token));
    again.send({ event: { case: "hello", value: {} } });
    const refused = new Collector(again);
    await refused.ended();
    expect(refused.items).toEqual([]);
    expect(refused.error?.code).toBe(status.UNAUTHENTICATED);
    await watch.count(4, "linked and unlinked");
    await new Promise((resolve) => setImmediate(resolve));
    expect(transitions(watch).map((e) => e.replace(/@\d+$/, ""))).toEqual(["+m1", "-m1"]);
  });

  test("200 rapid open/close cycles give a strictly alternating log with no repeated value", async () => {
    const { token, watch } = await setup("flappy");
    for (let i = 0; i < 200; i++) {
      const link = await openLink(links, token);
      link.call.end();
      await link.responses.ended();
    }
    await watch.count(2 + 400, "400 transitions", 20_000);
    const seen = transitions(watch);
    expect(seen.length).toBe(400);
    const cursors = seen.map((e) => BigInt(e.split("@")[1] ?? "0"));
    for (let i = 0; i < seen.length; i++) {
      expect(seen[i]?.[0]).toBe(i % 2 === 0 ? "+" : "-");
      if (i > 0) expect(cursors[i]! > cursors[i - 1]!).toBe(true);
    }
  });

  test("links of many machines opened and closed at once commit in groups: each event once, in sequence order", async () => {
    const { user, token, watch } = await setup("g00");
    const tokens = [token];
    for (let i = 1; i < 12; i++) {
      tokens.push((await machines.registerMachine({ name: `g${String(i).padStart(2, "0")}` }, as(user))).token);
    }
    const opened = await Promise.all(tokens.map((t) => openLink(links, t)));
    await watch.count(2 + 12, "12 linked");
    for (const link of opened) link.call.end();
    await Promise.all(opened.map((link) => link.responses.ended()));
    await watch.count(2 + 24, "12 unlinked");
    const seen = transitions(watch);
    expect(seen.length).toBe(24);
    const cursors = seen.map((e) => BigInt(e.split("@")[1] ?? "0"));
    for (let i = 1; i < cursors.length; i++) expect(cursors[i]! > cursors[i - 1]!).toBe(true);
    const names = (sign: string) =>
      seen
        .filter((e) => e.startsWith(sign))
        .map((e) => e.slice(1).replace(/@\d+$/, ""))
        .sort();
    const all = Array.from({ length: 12 }, (_, i) => `g${String(i).padStart(2, "0")}`);
    expect(names("+")).toEqual(all);
    expect(names("-")).toEqual(all);
    const listed = await machines.listMachines({}, as(user));
    expect(listed.machines.every((m) => !m.linked)).toBe(true);
  });

  test("concurrent opens of one machine leave exactly one link and one linked event", async () => {
    const { token, watch, linked } = await setup("racer");
    const opened = await Promise.all(Array.from({ length: 10 }, () => openLink(links, token)));
    await eventually(() => opened.filter((l) => !l.responses.done).length === 1, "one surviving link");
    const survivors = opened.filter((l) => !l.responses.done);
    for (const loser of opened.filter((l) => l.responses.done)) {
      const last = loser.responses.items.at(-1);
      expect(last?.event.case === "closed" && last.event.value.reason).toBe(LinkCloseReason.REPLACED);
    }
    expect(await linked()).toBe(true);
    survivors[0]?.call.end();
    await survivors[0]?.responses.ended();
    expect(await linked()).toBe(false);
    await watch.count(4, "two transitions");
    expect(transitions(watch).map((e) => e.replace(/@\d+$/, ""))).toEqual(["+racer", "-racer"]);
  });

  test("heartbeats both ways keep a link; a silent link is closed HEARTBEAT_MISSED and unlinked", async () => {
    const { token, linked } = await setup();
    const alive = await openLink(links, token, { heartbeats: false });
    const beat = setInterval(() => alive.call.send({ event: { case: "heartbeat", value: {} } }), 100);
    try {
      await eventually(
        () => alive.responses.items.filter((r) => r.event.case === "heartbeat").length >= 4,
        "server heartbeats",
      );
      expect(alive.responses.done).toBe(false);
      expect(await linked()).toBe(true);
    } finally {
      clearInterval(beat);
    }
    await alive.responses.ended();
    const last = alive.responses.items.at(-1);
    expect(last?.event.case === "closed" && last.event.value.reason).toBe(LinkCloseReason.HEARTBEAT_MISSED);
    await eventually(async () => (await linked()) === false, "unlinked after missed heartbeats");
  });

  test("hello must come first, in time; only machines may link", async () => {
    const { user, token, linked } = await setup();
    const wrong = links.link(asBearer(token));
    wrong.send({ event: { case: "heartbeat", value: {} } });
    const a = new Collector(wrong);
    await a.ended();
    expect(a.error?.code).toBe(status.INVALID_ARGUMENT);
    expect(a.error?.details).toMatch(/^hello:/);

    const silent = new Collector(links.link(asBearer(token)));
    await silent.ended();
    expect(silent.error?.code).toBe(status.INVALID_ARGUMENT);
    expect(silent.error?.details).toMatch(/^hello:/);

    const tooLong = links.link(asBearer(token));
    tooLong.send({ event: { case: "hello", value: { hostname: "h".repeat(256) } } });
    const c = new Collector(tooLong);
    await c.ended();
    expect(c.error?.code).toBe(status.INVALID_ARGUMENT);
    expect(c.error?.details).toMatch(/^hello.hostname:/);

    const asUser = links.link(as(user));
    asUser.send({ event: { case: "hello", value: {} } });
    const d = new Collector(asUser);
    await d.ended();
    expect(d.error?.code).toBe(status.PERMISSION_DENIED);
    expect(await linked()).toBe(false);
    await expectStatus(machines.getMachine({ machineId: "x" }, as(user)), status.INVALID_ARGUMENT);
  });
});
