import type { Logger } from "pino";
import { inSpan, SpanKind } from "../observe/trace";
import type { Bus } from "./bus";

let failures = 0;
const failuresByBus = new WeakMap<Bus, number>();

/**
 * How many post-commit publishes failed (readers healed from the database): on `bus` when given,
 * else in this whole process. The `unimatrix_bus_publish_failures_total` metric reads it.
 */
export function publishFailures(bus?: Bus): number {
  return bus ? (failuresByBus.get(bus) ?? 0) : failures;
}

/**
 * THE post-commit publish: rings `channel` (or each distinct channel) with `payload` once the
 * transaction committed. Awaited so a caller's next read sees the doorbell sent, but it never
 * throws: the data is already committed, a lost doorbell only delays readers until their heal
 * tick. Failures are logged and counted. Resolves true when every publish was handed to the bus.
 */
export async function publishAfterCommit(
  bus: Bus,
  channel: string | Iterable<string>,
  payload: string,
  logger: Logger,
): Promise<boolean> {
  const channels = typeof channel === "string" ? [channel] : [...new Set(channel)];
  // One PRODUCER span per channel, child of the call that committed (bus publish spans).
  const results = await Promise.allSettled(
    channels.map((c) =>
      inSpan(
        "bus publish",
        SpanKind.PRODUCER,
        { "messaging.system": "redis", "messaging.operation.type": "send", "messaging.destination.name": c },
        () => bus.publish(c, payload),
      ),
    ),
  );
  let ok = true;
  results.forEach((result, i) => {
    if (result.status === "fulfilled") return;
    ok = false;
    failures += 1;
    failuresByBus.set(bus, (failuresByBus.get(bus) ?? 0) + 1);
    logger.warn(
      { err: result.reason, channel: channels[i] },
      "bus publish failed after commit; subscribers will heal from the database",
    );
  });
  return ok;
}
