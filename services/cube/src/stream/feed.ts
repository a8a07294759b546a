import { create } from "@bufbuild/protobuf";
import {
  type SubscribeActivityResponse,
  SubscribeActivityResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { type Bus, type BusSubscription, encodeOnce } from "@unimatrix/service-kit";
import type { Logger } from "pino";
import type { ActivityItem as ActivityRow } from "../../generated/prisma/client";
import type { WireItem } from "../convert";
import { ACCESS } from "../deps";
import { toItems } from "../store/activity";
import type { PrismaClient } from "../store/prisma";

/**
 * One committed item as the feed hands it to streams: the row (for visibility) and its stream event,
 * built once and shared by every stream of the replica (the host does not copy a built message).
 */
export interface FedItem {
  readonly row: ActivityRow;
  readonly event: SubscribeActivityResponse;
}

/** The stream event of an activity item. */
export function eventOf(item: WireItem): SubscribeActivityResponse {
  const it = item.item;
  if (it?.case === "entry")
    return create(SubscribeActivityResponseSchema, { event: { case: "entry", value: it.value } });
  if (it?.case === "notification")
    return create(SubscribeActivityResponseSchema, { event: { case: "notification", value: it.value } });
  throw new Error("empty activity item");
}

/** A stream attached to a feed. */
export interface FeedListener {
  /** New items, contiguous and in activity order. */
  push(items: readonly FedItem[]): void;
  /** Access may have changed (revocation, eviction, grant): re-check now. */
  accessChanged(): void;
}

const PAGE = 500;
/** How often a feed polls the database even without a doorbell (heals a lost publish or a down bus). */
export const HEAL_MS = 1_000;

/**
 * The per-replica reader of one cube's activity: woken by the bus (or a reconnect, or its heal
 * timer), it reads new rows once from the database and hands them to every stream on this replica,
 * so N subscribers cost one query per wake instead of N.
 */
class CubeFeed {
  readonly listeners = new Set<FeedListener>();
  #head: bigint | undefined;
  #running = false;
  #again = false;
  #subscription: BusSubscription | undefined;
  #heal: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    readonly cubeId: string,
    private readonly prisma: PrismaClient,
    private readonly logger: Logger,
  ) {}

  async open(bus: Bus): Promise<void> {
    const cube = await this.prisma.cube.findUnique({ where: { id: this.cubeId }, select: { head: true } });
    this.#head ??= BigInt(cube?.head ?? 0n);
    this.#subscription = await bus.subscribe(`cube:${this.cubeId}`, (message) => {
      if (message === ACCESS) for (const l of this.listeners) l.accessChanged();
      else this.wake();
    });
    this.#heal = setInterval(() => this.wake(), HEAL_MS);
    this.#heal.unref();
    if (this.#closed) await this.close();
  }

  /** Drains from the last position read; coalesces wakes that arrive while draining. */
  wake(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    void this.#drain().finally(() => {
      this.#running = false;
      if (this.#again) {
        this.#again = false;
        this.wake();
      }
    });
  }

  async #drain(): Promise<void> {
    try {
      for (;;) {
        if (this.#head === undefined || this.#closed) return;
        const rows = await this.prisma.activityItem.findMany({
          where: { cubeId: this.cubeId, position: { gt: this.#head } },
          orderBy: { position: "asc" },
          take: PAGE,
        });
        if (rows.length === 0) return;
        const items = await toItems(this.prisma, rows);
        // One event object per item, shared by every stream of this replica: encoded once, not per stream.
        const fed = rows.map((row, i) => ({ row, event: encodeOnce(eventOf(items[i] as WireItem)) }));
        this.#head = (rows[rows.length - 1] as ActivityRow).position;
        for (const listener of this.listeners) listener.push(fed);
        if (rows.length < PAGE) return;
      }
    } catch (error) {
      if (!this.#closed)
        this.logger.warn({ err: error, cubeId: this.cubeId }, "activity feed drain failed; will retry");
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#heal) clearInterval(this.#heal);
    await this.#subscription?.unsubscribe().catch(() => {});
  }
}

/** The feeds of one replica, one per cube with open streams; also re-wakes them all on bus reconnect. */
export class FeedHub {
  readonly #feeds = new Map<string, { feed: CubeFeed; ready: Promise<void> }>();
  readonly #offReconnect: () => void;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly bus: Bus,
    private readonly logger: Logger,
  ) {
    this.#offReconnect = bus.onReconnect(() => {
      for (const { feed } of this.#feeds.values()) {
        feed.wake();
        for (const l of feed.listeners) l.accessChanged();
      }
    });
  }

  /** Attaches a listener to a cube's feed (opening it if needed). */
  async attach(cubeId: string, listener: FeedListener): Promise<void> {
    let entry = this.#feeds.get(cubeId);
    if (!entry) {
      const feed = new CubeFeed(cubeId, this.prisma, this.logger);
      entry = { feed, ready: feed.open(this.bus) };
      this.#feeds.set(cubeId, entry);
    }
    entry.feed.listeners.add(listener);
    await entry.ready;
  }

  /** Detaches a listener; closes the feed when it was the last. */
  detach(cubeId: string, listener: FeedListener): void {
    const entry = this.#feeds.get(cubeId);
    if (!entry) return;
    entry.feed.listeners.delete(listener);
    if (entry.feed.listeners.size === 0) {
      this.#feeds.delete(cubeId);
      void entry.ready.finally(() => entry.feed.close());
    }
  }

  /** Wakes a cube's feed on this replica now (used right after a local append). */
  wake(cubeId: string): void {
    this.#feeds.get(cubeId)?.feed.wake();
  }

  async close(): Promise<void> {
    this.#offReconnect();
    for (const { feed } of this.#feeds.values()) await feed.close();
    this.#feeds.clear();
  }
}
