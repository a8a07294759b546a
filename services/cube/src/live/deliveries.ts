import type { SubscribeActivityResponse } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { CubeDeps } from "../deps";
import { type Delivery, markDeliveredMany } from "../tables/receipts";

/** How often the recorder writes what streams delivered. */
const DELIVERY_FLUSH_MS = 200;

/** The most deliveries one flush writes (the rest wait for the next). */
const DELIVERY_BATCH = 1000;

/**
 * Records `delivered` receipts off the hot path: streams hand it the entries they sent to a drone
 * (DIRECT entries addressed to it, and replies); it writes them every 200 ms in one statement per
 * batch (`markDeliveredMany`), never a round trip per delivery in line with a stream. A failed
 * flush is logged and retried with the next one; `close` writes what is left.
 */
export class DeliveryRecorder {
  #pending: Delivery[] = [];
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;

  constructor(private readonly deps: Pick<CubeDeps, "fast" | "clock" | "logger">) {}

  /** Notes that `event` went out on a live stream of `droneId`, if it is an entry with a receipt for it. */
  sent(droneId: string, event: Pick<SubscribeActivityResponse, "event">): void {
    if (event.event.case !== "entry") return;
    const entry = event.event.value;
    const addressed = entry.recipientDroneIds.includes(droneId) || entry.threadRootEntryId !== "";
    if (!addressed || entry.author?.droneId === droneId) return;
    this.#pending.push({ entryId: entry.id, droneId, via: "stream", at: this.deps.clock.now() });
    if (!this.#timer) {
      this.#timer = setTimeout(() => void this.flush(), DELIVERY_FLUSH_MS);
      this.#timer.unref();
    }
  }

  /** Writes the pending deliveries now (one statement per batch). */
  async flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
    const batch = this.#pending.splice(0, DELIVERY_BATCH);
    if (batch.length === 0) return;
    this.#flushing = markDeliveredMany(this.deps.fast, batch)
      .then(() => undefined)
      .catch((error: unknown) => {
        this.deps.logger.warn({ err: error, deliveries: batch.length }, "recording stream deliveries failed; retrying");
        this.#pending.unshift(...batch);
      })
      .finally(() => {
        this.#flushing = undefined;
      });
    await this.#flushing;
    if (this.#pending.length > 0 && !this.#timer) {
      this.#timer = setTimeout(() => void this.flush(), DELIVERY_FLUSH_MS);
      this.#timer.unref();
    }
  }

  /** Writes what is left (service close). */
  async close(): Promise<void> {
    await this.flush();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
