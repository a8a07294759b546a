import { randomUUID } from "node:crypto";
import type { LeaseTable } from "./leases";

/** A held stream slot: renewed by a heartbeat until released. */
export interface StreamSlot {
  release(): Promise<void>;
}

/**
 * "At most `max` open streams per credential" across every gateway replica. A slot is a lease
 * renewed every `leaseMs / 3`; the slots of a gateway that died without releasing them lapse
 * within `leaseMs`.
 */
export class StreamCaps {
  constructor(
    private readonly leases: LeaseTable,
    private readonly max: number,
    private readonly leaseMs: number,
  ) {}

  /** A slot for one more stream of `credentialKey`, or undefined when it already holds `max` (the cap unless told). */
  async open(credentialKey: string, max = this.max): Promise<StreamSlot | undefined> {
    const id = randomUUID();
    if (!(await this.leases.acquire(credentialKey, id, max, this.leaseMs))) return undefined;
    const timer = setInterval(
      () => void this.leases.renew(credentialKey, id, this.leaseMs).catch(() => {}),
      Math.max(250, Math.floor(this.leaseMs / 3)),
    );
    timer.unref();
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        clearInterval(timer);
        await this.leases.release(credentialKey, id).catch(() => {});
      },
    };
  }

  /** Streams `credentialKey` holds now, fleet-wide. */
  count(credentialKey: string): Promise<number> {
    return this.leases.count(credentialKey);
  }
}
