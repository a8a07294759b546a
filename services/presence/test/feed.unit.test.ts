import { silentLogger } from "@unimatrix/service-kit";
import { type FeedWatcher, type LogSource, TenantFeed } from "../src/live/feed";
import { EventWindow } from "../src/live/window";
import { PAGE } from "../src/rules/watch";
import type { LogPage, LogState } from "../src/store/log";
import type { PresenceEvent } from "../src/store/rows";

const MIB = 1024 * 1024;
const TENANT = "00000000-0000-4000-8000-000000000001";

function event(seq: bigint): PresenceEvent {
  return { seq, tenantId: TENANT, machineId: "m", name: `m${seq}`, linked: seq % 2n === 1n, at: new Date(0) };
}

/** A tenant log held in memory: what the feed would read from presence_events and tenant_logs. */
class MemoryLog implements LogSource {
  readonly events: PresenceEvent[] = [];
  floor = 0n;
  revocations = 0n;
  pages = 0;

  get head(): bigint {
    return this.events.at(-1)?.seq ?? 0n;
  }

  add(n: number): void {
    for (let i = 0; i < n; i++) this.events.push(event(this.head + 1n));
  }

  async state(): Promise<LogState> {
    return { head: this.head, floor: this.floor, revocations: this.revocations };
  }

  async page(_tenantId: string, after: bigint, limit: number): Promise<LogPage> {
    this.pages += 1;
    const events = this.events.filter((e) => e.seq > after).slice(0, limit);
    return { head: this.head, floor: this.floor, revocations: this.revocations, events };
  }
}

/** A watcher standing at `cursor` that records whether it was woken or cut. */
function watcher(cursor: bigint, live = true): FeedWatcher & { wakes: number; cuts: number; cursor: bigint } {
  return {
    cursor,
    live,
    wakes: 0,
    cuts: 0,
    wake() {
      this.wakes += 1;
    },
    cut() {
      this.cuts += 1;
    },
  };
}

describe("EventWindow", () => {
  test("lag is the bytes of held items after the cursor", () => {
    const window = new EventWindow<PresenceEvent>(0n, 1000, 1);
    for (let seq = 1n; seq <= 5n; seq++) window.append(event(seq), 10 * Number(seq));
    expect(window.lagOf(5n)).toBe(0);
    expect(window.lagOf(4n)).toBe(50);
    expect(window.lagOf(2n)).toBe(30 + 40 + 50);
    expect(window.lagOf(0n)).toBe(150);
    expect(window.after(2n, 10)?.map((e) => e.seq)).toEqual([3n, 4n, 5n]);
    expect(window.after(0n, 2)?.map((e) => e.seq)).toEqual([1n, 2n]);
    expect(window.after(5n, 10)).toEqual([]);
  });

  test("holds at most keepBytes but at least minItems; a cursor before the window has infinite lag", () => {
    const window = new EventWindow<PresenceEvent>(0n, 100, 2);
    for (let seq = 1n; seq <= 10n; seq++) window.append(event(seq), 30);
    // 4 items (120 bytes) would exceed 100; 3 items (90) fit.
    expect(window.length).toBe(3);
    expect(window.base).toBe(7n);
    expect(window.lagOf(6n)).toBe(Number.POSITIVE_INFINITY);
    expect(window.after(6n, 10)).toBeNull();
    expect(window.lagOf(7n)).toBe(90);
    expect(window.after(7n, 10)?.map((e) => e.seq)).toEqual([8n, 9n, 10n]);
    const few = new EventWindow<PresenceEvent>(0n, 10, 3);
    for (let seq = 1n; seq <= 5n; seq++) few.append(event(seq), 100);
    expect(few.length).toBe(3);
    expect(few.base).toBe(2n);
  });
});

describe("TenantFeed lag cut-off (1 MiB budget)", () => {
  /** A feed whose every event is `size` bytes on the wire. */
  async function feedOf(log: MemoryLog, size: number): Promise<TenantFeed> {
    const feed = new TenantFeed({
      tenantId: TENANT,
      logs: log,
      logger: silentLogger(),
      maxLagBytes: MIB,
      sizeOf: () => size,
    });
    await feed.init();
    return feed;
  }

  test("a live watcher more than 1 MiB behind is cut; one at the budget or within is woken", async () => {
    const log = new MemoryLog();
    const feed = await feedOf(log, 1024);
    const start = feed.cursor;
    const atBudget = watcher(start);
    const ahead = watcher(start);
    const behind = watcher(start);
    for (const w of [atBudget, ahead, behind]) feed.watchers.add(w);
    log.add(1024); // exactly 1 MiB after start
    await feed.poke();
    expect([atBudget.cuts, ahead.cuts, behind.cuts]).toEqual([0, 0, 0]);
    expect(feed.lagOf(start)).toBe(MIB);
    ahead.cursor = log.head;
    log.add(1); // 1 MiB + 1 KiB after start: over the budget
    await feed.poke();
    expect(feed.lagOf(start)).toBe(MIB + 1024);
    expect(behind.cuts).toBe(1);
    expect(atBudget.cuts).toBe(1);
    expect(ahead.cuts).toBe(0);
    expect(ahead.wakes).toBeGreaterThan(0);
  });

  test("a watcher still reading its backlog (not live) is never cut, only woken", async () => {
    const log = new MemoryLog();
    const feed = await feedOf(log, 4096);
    const catchingUp = watcher(feed.cursor, false);
    feed.watchers.add(catchingUp);
    log.add(600); // 2.3 MiB
    await feed.poke();
    expect(catchingUp.cuts).toBe(0);
    expect(catchingUp.wakes).toBeGreaterThan(0);
  });

  test("the window keeps twice the budget: a watcher behind it has infinite lag and reads the database", async () => {
    const log = new MemoryLog();
    const feed = await feedOf(log, 1024);
    const start = feed.cursor;
    log.add(3 * 1024); // 3 MiB
    await feed.poke();
    expect(feed.lagOf(start)).toBe(Number.POSITIVE_INFINITY);
    expect(feed.after(start)).toBeNull();
    expect(feed.lagOf(log.head - 2048n)).toBe(2 * MIB);
    expect(feed.after(log.head - 1n)?.map((e) => e.seq)).toEqual([log.head]);
  });

  test("one drain per poke, in pages of 256, however many watchers", async () => {
    const log = new MemoryLog();
    const feed = await feedOf(log, 10);
    for (let i = 0; i < 100; i++) feed.watchers.add(watcher(feed.cursor));
    log.add(PAGE + 1);
    log.pages = 0;
    await feed.poke();
    expect(log.pages).toBe(2);
    expect(feed.cursor).toBe(log.head);
  });

  test("nothing new wakes nobody; a changed revocation counter wakes everyone", async () => {
    const log = new MemoryLog();
    const feed = await feedOf(log, 10);
    const w = watcher(feed.cursor);
    feed.watchers.add(w);
    await feed.poke();
    expect(w.wakes).toBe(0);
    log.revocations += 1n;
    await feed.poke();
    expect(w.wakes).toBe(1);
    expect(feed.state.revocations).toBe(1n);
  });
});
