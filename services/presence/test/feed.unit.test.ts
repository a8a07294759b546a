import { FeedQueue, InProcessBus } from "@unimatrix/service-kit/bus";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { eventually } from "@unimatrix/service-kit/testing";
import { transitionSize } from "../src/convert";
import {
  itemSize,
  type LogSource,
  offerCommitted,
  presenceFeedSource,
  type WatchItem,
  watchFeed,
} from "../src/live/feed";
import { MAX_CARRIED_BYTES, presenceChannel, transitionSignal } from "../src/live/signal";
import { PAGE } from "../src/rules/watch";
import type { LogPage, LogState } from "../src/store/log";
import type { PresenceEvent } from "../src/store/rows";

const MIB = 1024 * 1024;
const TENANT = "00000000-0000-4000-8000-000000000001";

/** A tenant log held in memory: what the feed would read from presence_events and tenant_logs. */
class MemoryLog implements LogSource {
  readonly events: PresenceEvent[] = [];
  revocations = 0n;
  pages = 0;

  get head(): bigint {
    return this.events.at(-1)?.seq ?? 0n;
  }

  /** Where the last event sits: the head before it and the revocation counter (as the link functions answer). */
  position(): { prev: bigint; revocations: bigint } {
    return { prev: this.events.at(-2)?.seq ?? 0n, revocations: this.revocations };
  }

  /** The doorbell of the last event, as the replica that committed it rings it. */
  doorbell(): string {
    const last = this.events.at(-1) as PresenceEvent;
    return JSON.stringify(transitionSignal(last, this.position(), { link: { m: last.machineId, l: "link" } }));
  }

  /** Appends one transition (a ~1 KiB name keeps the 1 MiB test short) and returns its wire size. */
  add(nameLength = 1000): number {
    const seq = this.head + 1n;
    const event: PresenceEvent = {
      seq,
      tenantId: TENANT,
      machineId: "00000000-0000-4000-8000-000000000002",
      name: "m".repeat(nameLength),
      linked: seq % 2n === 1n,
      at: new Date(Date.UTC(2026, 11, 1)),
    };
    this.events.push(event);
    return transitionSize(event);
  }

  async state(): Promise<LogState> {
    return { head: this.head, floor: 0n, revocations: this.revocations };
  }

  async page(_tenantId: string, after: bigint, limit: number): Promise<LogPage> {
    this.pages += 1;
    const events = this.events.filter((e) => e.seq > after).slice(0, limit);
    return { head: this.head, floor: 0n, revocations: this.revocations, events };
  }
}

/** A watcher's queue as live/watch.ts makes it: the lag is the wire bytes it has not taken. */
const queue = () => new FeedQueue<WatchItem>({ sizeOf: itemSize });

function setup(log: MemoryLog) {
  const bus = new InProcessBus();
  const feed = watchFeed({ logs: log, bus, logger: silentLogger(), maxLagBytes: MIB, healMs: 0 });
  return { bus, feed };
}

describe("presenceFeedSource", () => {
  test("reads events after the cursor with their wire message and size; a changed revocation counter adds a marker", async () => {
    const log = new MemoryLog();
    const source = presenceFeedSource(log);
    expect(source.channel(TENANT)).toBe(presenceChannel(TENANT));
    const sizes = [log.add(10), log.add(20)];
    expect(await source.head(TENANT)).toEqual({ seq: 2n, revocations: 0n });
    const first = await source.read(TENANT, { seq: 0n, revocations: 0n }, PAGE);
    expect(first.cursor).toEqual({ seq: 2n, revocations: 0n });
    expect(first.items.map((i) => (i.kind === "event" ? [i.event.seq, i.size] : i.kind))).toEqual([
      [1n, sizes[0]],
      [2n, sizes[1]],
    ]);
    const message = first.items[0]?.kind === "event" ? first.items[0].message : undefined;
    expect(message?.event?.case).toBe("machineLinked");
    log.revocations = 3n;
    const marker = await source.read(TENANT, first.cursor, PAGE);
    expect(marker.items).toEqual([{ kind: "revocations", revocations: 3n }]);
    expect(marker.cursor).toEqual({ seq: 2n, revocations: 3n });
    expect(itemSize(marker.items[0] as WatchItem)).toBe(0);
    expect((await source.read(TENANT, marker.cursor, PAGE)).items).toEqual([]);
  });

  test("every well-formed doorbell is news; garbage is not", () => {
    const source = presenceFeedSource(new MemoryLog());
    expect(source.isNews?.('{"seq":"5"}')).toBe(true);
    expect(source.isNews?.('{"revoked":"x"}')).toBe(true);
    expect(source.isNews?.("not json")).toBe(false);
  });
});

describe("watch feed lag cut-off (1 MiB budget)", () => {
  test("a watcher more than 1 MiB of unread events behind is cut and detached; one that keeps up is not", async () => {
    const log = new MemoryLog();
    const { feed } = setup(log);
    const slow = queue();
    const fast = queue();
    await feed.attach(TENANT, slow);
    await feed.attach(TENANT, fast);
    // Up to the budget, exactly or just under: nobody is cut.
    let total = 0;
    for (;;) {
      const probe = new MemoryLog();
      probe.add();
      if (total + transitionSize({ ...(probe.events[0] as PresenceEvent), seq: log.head + 1n }) > MIB) break;
      total += log.add();
      if (log.events.length % 100 === 0) {
        await feed.wake(TENANT);
        fast.take();
      }
    }
    await feed.wake(TENANT);
    fast.take();
    expect(slow.lag().bytes).toBe(total);
    expect(total).toBeLessThanOrEqual(MIB);
    expect(slow.isCut).toBe(false);
    expect(feed.listeners(TENANT)).toBe(2);
    // One more event passes the budget.
    log.add();
    await feed.wake(TENANT);
    expect(slow.isCut).toBe(true);
    expect(slow.lag()).toEqual({ items: 0, bytes: 0 });
    expect(fast.isCut).toBe(false);
    expect(fast.take().length).toBe(1);
    expect(feed.listeners(TENANT)).toBe(1);
    await feed.close();
  });

  test("markers cost nothing: a revocation-counter change never cuts", async () => {
    const log = new MemoryLog();
    const { feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    for (let i = 0; i < 1000; i++) {
      log.revocations += 1n;
      await feed.wake(TENANT);
    }
    expect(w.isCut).toBe(false);
    expect(w.lag()).toEqual({ items: 1000, bytes: 0 });
    await feed.close();
  });

  test("one read per page per wake however many watchers, and every watcher gets the same item objects", async () => {
    const log = new MemoryLog();
    const { feed } = setup(log);
    const watchers = Array.from({ length: 100 }, queue);
    for (const w of watchers) await feed.attach(TENANT, w);
    for (let i = 0; i <= PAGE; i++) log.add(5);
    log.pages = 0;
    await feed.wake(TENANT);
    expect(log.pages).toBe(2);
    const taken = watchers.map((w) => w.take());
    expect(taken[0]?.length).toBe(PAGE + 1);
    for (const items of taken) expect(items[7]).toBe(taken[0]?.[7]);
    await feed.close();
  });

  test("a doorbell on the tenant's channel makes the feed read", async () => {
    const log = new MemoryLog();
    const { bus, feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    log.add(5);
    await bus.publish(presenceChannel(TENANT), JSON.stringify({ seq: "1" }));
    await w.wait(AbortSignal.timeout(5_000));
    expect(w.take().map((i) => i.kind === "event" && i.event.seq)).toEqual([1n]);
    await feed.close();
  });
});

describe("doorbells that carry their event", () => {
  const cursors = (items: readonly WatchItem[]) => items.map((i) => (i.kind === "event" ? i.event.seq : i.kind));

  test("the next event rides on its doorbell: fanned out without a read, as a read would build it", async () => {
    const log = new MemoryLog();
    const { bus, feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    log.add(5);
    await bus.publish(presenceChannel(TENANT), log.doorbell());
    await w.wait(AbortSignal.timeout(5_000));
    const [carried] = w.take();
    expect(log.pages).toBe(0);
    const read = (await presenceFeedSource(log).read(TENANT, { seq: 0n, revocations: 0n }, PAGE)).items[0];
    expect(carried?.kind === "event" && carried.event).toEqual(read?.kind === "event" && read.event);
    expect(carried?.kind === "event" && carried.message).toEqual(read?.kind === "event" && read.message);
    expect(carried && itemSize(carried)).toBe(read && itemSize(read));
    await feed.close();
  });

  test("a doorbell after a lost one is read: both events once, in order", async () => {
    const log = new MemoryLog();
    const { bus, feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    log.add(5); // its doorbell is lost
    log.add(5);
    await bus.publish(presenceChannel(TENANT), log.doorbell());
    await w.wait(AbortSignal.timeout(5_000));
    expect(cursors(w.take())).toEqual([1n, 2n]);
    expect(log.pages).toBe(1);
    await feed.close();
  });

  test("a doorbell whose revocation counter is not the feed's is read (the marker comes with it)", async () => {
    const log = new MemoryLog();
    const { bus, feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    log.revocations = 1n; // a revocation whose doorbell has not arrived
    log.add(5);
    await bus.publish(presenceChannel(TENANT), log.doorbell());
    await w.wait(AbortSignal.timeout(5_000));
    expect(cursors(w.take())).toEqual([1n, "revocations"]);
    expect(log.pages).toBe(1);
    await feed.close();
  });

  test("a doorbell of the release before (no event) is read; garbage in a carried event is read too", async () => {
    const log = new MemoryLog();
    const { bus, feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    log.add(5);
    await bus.publish(presenceChannel(TENANT), JSON.stringify({ seq: "1", link: { m: "m", l: "l" } }));
    await w.wait(AbortSignal.timeout(5_000));
    expect(cursors(w.take())).toEqual([1n]);
    log.add(5);
    const bad = { ...JSON.parse(log.doorbell()), ev: { ...JSON.parse(log.doorbell()).ev, prev: "one" } };
    await bus.publish(presenceChannel(TENANT), JSON.stringify(bad));
    await w.wait(AbortSignal.timeout(5_000));
    expect(cursors(w.take())).toEqual([2n]);
    expect(log.pages).toBe(2);
    await feed.close();
  });

  test("an event this replica offered is not read again when its doorbell comes back", async () => {
    const log = new MemoryLog();
    const { bus, feed } = setup(log);
    const w = queue();
    await feed.attach(TENANT, w);
    log.add(5);
    await offerCommitted(feed, log.events[0] as PresenceEvent, log.position());
    expect(cursors(w.take())).toEqual([1n]);
    // A later subscriber hears the doorbell after the feed did (the bus keeps subscription order).
    const heard: string[] = [];
    await bus.subscribe(presenceChannel(TENANT), (message) => heard.push(message));
    await bus.publish(presenceChannel(TENANT), log.doorbell());
    await eventually(() => heard.length === 1, "the doorbell went round");
    expect(log.pages).toBe(0);
    await feed.close();
  });

  test("a doorbell keeps the fields the release before reads, and goes without its event past the size limit", () => {
    const log = new MemoryLog();
    log.add(5);
    const signal = JSON.parse(log.doorbell());
    expect(signal).toMatchObject({ seq: "1", link: { m: log.events[0]?.machineId, l: "link" } });
    expect(signal.ev).toEqual({
      prev: "0",
      rev: "0",
      m: log.events[0]?.machineId,
      n: "mmmmm",
      up: true,
      at: Date.UTC(2026, 11, 1),
    });
    log.add(MAX_CARRIED_BYTES);
    expect(JSON.parse(log.doorbell())).toEqual({ seq: "2", link: { m: log.events[1]?.machineId, l: "link" } });
    expect(transitionSignal(log.events[0] as PresenceEvent, null)).toEqual({ seq: "1" });
  });
});
