import {
  Feed,
  type FeedListener,
  FeedQueue,
  type FeedSource,
  InProcessBus,
  publishAfterCommit,
  publishFailures,
} from "@unimatrix/service-kit/bus";
import { encodeOnce } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { eventually } from "@unimatrix/service-kit/testing";

interface Item {
  readonly seq: number;
  readonly event: { readonly text: string };
}

/** A live log in memory: what a service's store would read, with a count of reads. */
class MemoryLog implements FeedSource<number, Item> {
  readonly items: Item[] = [];
  reads = 0;
  channel(key: string): string {
    return `log:${key}`;
  }
  async head(): Promise<number> {
    return this.items.length;
  }
  async read(_key: string, after: number, limit: number) {
    this.reads += 1;
    const items = this.items.slice(after, after + limit);
    return { items, cursor: after + items.length };
  }
  isNews(message: string): boolean {
    return message !== "access";
  }
  /** `through:<n>` names the last item of its commit. */
  covered(message: string, cursor: number): boolean {
    return message.startsWith("through:") && Number(message.slice(8)) <= cursor;
  }
  /** `carry:<after>:<n>` carries the n items after position `after` (read from this log, as a publisher holds them). */
  carried(_key: string, message: string) {
    const [kind, after, n] = message.split(":");
    if (kind !== "carry") return undefined;
    const items = this.items.slice(Number(after), Number(after) + Number(n));
    return { after: Number(after), items, cursor: Number(after) + items.length };
  }
  append(n: number, bytes = 10): void {
    for (let i = 0; i < n; i++) {
      const seq = this.items.length + 1;
      this.items.push({ seq, event: encodeOnce({ text: "x".repeat(bytes) }) });
    }
  }
}

const seqs = (items: readonly Item[]) => items.map((i) => i.seq);

describe("Feed (kit): drain once per key, fan out, cut laggards", () => {
  let bus: InProcessBus;
  let log: MemoryLog;
  let feed: Feed<number, Item>;

  beforeEach(() => {
    bus = new InProcessBus();
    log = new MemoryLog();
    feed = new Feed({ source: log, bus, logger: silentLogger(), healMs: 0, pageSize: 4, budget: { maxItems: 5 } });
  });
  afterEach(async () => {
    await feed.close();
    await bus.close();
  });

  it("one doorbell is one read for any number of listeners, and every listener gets the same item objects", async () => {
    const queues = Array.from({ length: 10 }, () => new FeedQueue<Item>());
    for (const q of queues) expect(await feed.attach("a", q)).toBe(0);
    const readsBefore = log.reads;
    log.append(3);
    await bus.publish("log:a", "new");
    await eventually(() => queues.every((q) => q.lag().items === 3), "every queue fed");
    expect(log.reads - readsBefore).toBe(1);
    const taken = queues.map((q) => q.take());
    expect(seqs(taken[0]!)).toEqual([1, 2, 3]);
    // Shared, not copied: the message a stream writes is built (and encoded) once per replica.
    for (const items of taken) for (const [i, item] of items.entries()) expect(item).toBe(taken[0]![i]);
  });

  it("reads page by page until level, in order; other keys are not read", async () => {
    const a = new FeedQueue<Item>();
    const b = new FeedQueue<Item>();
    await feed.attach("a", a);
    await feed.attach("b", b);
    log.append(5);
    const reads = log.reads;
    await feed.wake("a");
    // Pages of 4: [1..4], [5] (short page: level).
    expect(log.reads - reads).toBe(2);
    expect(seqs(a.take())).toEqual([1, 2, 3, 4, 5]);
    expect(b.lag().items).toBe(0);
  });

  it("offer: items that follow the cursor are fanned out without a read, the same objects to every listener", async () => {
    const queues = [new FeedQueue<Item>(), new FeedQueue<Item>()];
    for (const q of queues) await feed.attach("a", q);
    log.append(2);
    const reads = log.reads;
    await feed.offer("a", 0, log.items.slice(0, 2), 2);
    expect(log.reads - reads).toBe(0);
    const [first, second] = queues.map((q) => q.take());
    expect(seqs(first!)).toEqual([1, 2]);
    expect(second![0]).toBe(first![0]);
    // Its doorbell names what the feed already passed: no read. One naming more is read.
    // (Doorbells arrive in order: a read for the first would make this count 2.)
    await bus.publish("log:a", "through:2");
    log.append(1);
    await bus.publish("log:a", "through:3");
    await eventually(() => queues.every((q) => q.lag().items === 1), "item 3 read");
    expect(log.reads - reads).toBe(1);
    expect(queues.map((q) => seqs(q.take()))).toEqual([[3], [3]]);
  });

  it("offer: items that do not follow the cursor, or arrive while a read is in flight, are read instead, once each", async () => {
    const q = new FeedQueue<Item>();
    await feed.attach("a", q);
    log.append(3);
    // Behind: positions 1..2 were not fanned out yet, so item 3 is read with them, in order.
    await feed.offer("a", 2, log.items.slice(2, 3), 3);
    expect(seqs(q.take())).toEqual([1, 2, 3]);
    log.append(2);
    const reading = feed.wake("a");
    const reads = log.reads;
    await feed.offer("a", 3, log.items.slice(3, 5), 5);
    await reading;
    expect(log.reads - reads).toBeGreaterThanOrEqual(1);
    expect(seqs(q.take())).toEqual([4, 5]);
  });

  it("carried: a doorbell's items that follow the cursor are fanned out without a read; others are read, once each, in order", async () => {
    const q = new FeedQueue<Item>();
    await feed.attach("a", q);
    log.append(1);
    const reads = log.reads;
    await bus.publish("log:a", "carry:0:1");
    await q.wait(AbortSignal.timeout(5_000));
    expect(seqs(q.take())).toEqual([1]);
    expect(log.reads - reads).toBe(0);
    expect(feed.stats().offers).toBe(1);
    // Item 2's doorbell was lost: item 3's does not follow the cursor (1), so the feed reads 2 and 3.
    log.append(2);
    await bus.publish("log:a", "carry:2:1");
    await eventually(() => q.lag().items === 2, "items 2 and 3 read");
    expect(seqs(q.take())).toEqual([2, 3]);
    expect(log.reads - reads).toBe(1);
    await new Promise((resolve) => setImmediate(resolve)); // the read's bookkeeping settles
    // A carried doorbell the feed already passed (covered) changes nothing.
    await bus.publish("log:a", "through:3");
    log.append(1);
    await bus.publish("log:a", "carry:3:1");
    await q.wait(AbortSignal.timeout(5_000));
    expect(seqs(q.take())).toEqual([4]);
    expect([log.reads - reads, feed.stats().offers]).toEqual([1, 2]);
  });

  it("offer and carried items compare cursors with the source's `same` (cursors that are objects)", async () => {
    type Cursor = { readonly n: number };
    const source: FeedSource<Cursor, Item> = {
      channel: (key) => `obj:${key}`,
      head: async () => ({ n: 0 }),
      read: async (_key, after) => {
        log.reads += 1;
        const items = log.items.slice(after.n);
        return { items, cursor: { n: after.n + items.length } };
      },
      same: (a, b) => a.n === b.n,
    };
    const objects = new Feed<Cursor, Item>({ source, bus, logger: silentLogger(), healMs: 0 });
    try {
      const q = new FeedQueue<Item>();
      await objects.attach("a", q);
      log.append(1);
      const reads = log.reads;
      // A fresh object equal to the feed's cursor: fanned out without a read.
      await objects.offer("a", { n: 0 }, log.items.slice(0, 1), { n: 1 });
      expect([seqs(q.take()), log.reads - reads]).toEqual([[1], 0]);
    } finally {
      await objects.close();
    }
  });

  it("coalesces wakes that arrive while reading into one more pass", async () => {
    const q = new FeedQueue<Item>();
    await feed.attach("a", q);
    log.append(1);
    const reads = log.reads;
    await Promise.all([feed.wake("a"), feed.wake("a"), feed.wake("a"), feed.wake("a")]);
    expect(log.reads - reads).toBe(2);
    expect(seqs(q.take())).toEqual([1]);
  });

  it("cuts a listener whose unread backlog passes the item budget; the others keep being fed", async () => {
    const reader = new FeedQueue<Item>();
    const stalled = new FeedQueue<Item>();
    await feed.attach("a", reader);
    await feed.attach("a", stalled);
    log.append(4);
    await feed.wake("a");
    expect(reader.take()).toHaveLength(4);
    expect([stalled.lag().items, stalled.isCut, feed.listeners("a")]).toEqual([4, false, 2]);
    log.append(2);
    await feed.wake("a");
    expect([stalled.isCut, stalled.lag().items, feed.listeners("a")]).toEqual([true, 0, 1]);
    await stalled.wait(); // a cut wakes the stream so it can end
    log.append(1);
    await feed.wake("a");
    expect(seqs(reader.take())).toEqual([5, 6, 7]);
    expect(stalled.lag().items).toBe(0);
  });

  it("reports keys, listeners, the backlog they hold, cuts and drains (the feed metrics)", async () => {
    const reader = new FeedQueue<Item>();
    const stalled = new FeedQueue<Item>();
    await feed.attach("a", reader);
    await feed.attach("a", stalled);
    await feed.attach("b", new FeedQueue<Item>());
    expect(feed.stats()).toMatchObject({ keys: 2, listeners: 3, backlogItems: 0, cuts: 0, drains: 0 });
    log.append(4, 10);
    await feed.wake("a");
    reader.take();
    const held = feed.stats();
    expect(held).toMatchObject({ keys: 2, listeners: 3, backlogItems: 4, cuts: 0, drains: 1 });
    expect(held.drainSeconds).toBeGreaterThan(0);
    log.append(2);
    await feed.wake("a");
    expect(feed.stats()).toMatchObject({ keys: 2, listeners: 2, backlogItems: 2, cuts: 1, drains: 2 });
  });

  it("cuts on the byte budget too, counting only what the listener accepted", async () => {
    const bytes = new Feed<number, Item>({
      source: log,
      bus,
      logger: silentLogger(),
      healMs: 0,
      budget: { maxBytes: 100 },
    });
    try {
      const sizeOf = (item: Item) => item.event.text.length;
      const all = new FeedQueue<Item>({ sizeOf });
      const evens = new FeedQueue<Item>({ sizeOf, accept: (item) => item.seq % 2 === 0 });
      await bytes.attach("a", all);
      await bytes.attach("a", evens);
      log.append(4, 40);
      await bytes.wake("a");
      expect([all.isCut, all.lag().bytes]).toEqual([true, 0]);
      expect([evens.isCut, evens.lag().bytes, seqs(evens.take())]).toEqual([false, 80, [2, 4]]);
    } finally {
      await bytes.close();
    }
  });

  it("a doorbell that is not news reaches listeners as a notice without a read", async () => {
    const q = new FeedQueue<Item>();
    await feed.attach("a", q);
    const reads = log.reads;
    await bus.publish("log:a", "access");
    await q.wait();
    expect(q.notices()).toEqual(["access"]);
    expect(log.reads).toBe(reads);
  });

  it("a listener attached later starts at the feed's cursor, and the last detach stops reading", async () => {
    const first = new FeedQueue<Item>();
    await feed.attach("a", first);
    log.append(2);
    await feed.wake("a");
    const second: FeedListener<Item> = new FeedQueue<Item>();
    expect(await feed.attach("a", second)).toBe(2);
    feed.detach("a", first);
    feed.detach("a", second);
    expect(feed.listeners("a")).toBe(0);
    const reads = log.reads;
    await bus.publish("log:a", "new");
    await new Promise((resolve) => setImmediate(resolve));
    await feed.wake("a");
    expect(log.reads).toBe(reads);
  });
});

describe("publishAfterCommit", () => {
  it("rings every distinct channel once and resolves true", async () => {
    const bus = new InProcessBus();
    const got: string[] = [];
    await bus.subscribe("cube:1", (m) => got.push(`1:${m}`));
    await bus.subscribe("cube:2", (m) => got.push(`2:${m}`));
    expect(await publishAfterCommit(bus, ["cube:1", "cube:2", "cube:1"], "activity", silentLogger())).toBe(true);
    await eventually(() => got.length === 2, "two doorbells");
    expect(got.sort()).toEqual(["1:activity", "2:activity"]);
    await bus.close();
  });

  it("never throws when the bus is down: resolves false and counts the failure", async () => {
    const bus = new InProcessBus();
    await bus.close();
    const before = publishFailures();
    await expect(publishAfterCommit(bus, "cube:1", "activity", silentLogger())).resolves.toBe(false);
    expect(publishFailures()).toBe(before + 1);
  });
});
