import type { LinkClosed, LinkOp, LinkOpened, LinkOutcome, Ownership, TransitionStore } from "../store/transitions";

interface Pending {
  readonly op: LinkOp;
  resolve(outcome: LinkOutcome): void;
  reject(error: unknown): void;
}

interface TenantQueue {
  pending: Pending[];
  running: boolean;
}

/** At most this many transitions in one transaction. */
const MAX_BATCH = 256;

/**
 * Group commit of link transitions per tenant on this replica. A tenant's log row is held from
 * an event's sequence number to its commit, so transitions committed one by one queue behind
 * each other's WAL flush: one transition per flush per tenant, whatever the pool size. Here,
 * while one transaction of a tenant is in flight, the next opens and closes gather and go in
 * the next one together (`linkBatch`): no timer, an idle tenant's transition goes at once.
 * Callers keep the per-machine order (LinkRegistry's chain: one transition per machine in flight).
 */
export class LinkCommits {
  readonly #tenants = new Map<string, TenantQueue>();

  constructor(private readonly transitions: Pick<TransitionStore, "linkBatch">) {}

  /** `linkOpened`, committed with the tenant's other transitions of the moment. */
  async open(tenantId: string, machineId: string, ownership: Ownership, at: Date): Promise<LinkOpened> {
    const outcome = await this.#enqueue(tenantId, { kind: "open", machineId, ownership, at });
    if (outcome.kind !== "open") throw new Error("link batch answered a close for an open");
    if ("error" in outcome) throw outcome.error;
    return outcome.opened;
  }

  /** `linkClosed` (no lease condition), committed with the tenant's other transitions of the moment. */
  async close(tenantId: string, machineId: string, linkId: string, at: Date): Promise<LinkClosed | null> {
    const outcome = await this.#enqueue(tenantId, { kind: "close", machineId, linkId, at });
    if (outcome.kind !== "close") throw new Error("link batch answered an open for a close");
    return outcome.closed;
  }

  #enqueue(tenantId: string, op: LinkOp): Promise<LinkOutcome> {
    let queue = this.#tenants.get(tenantId);
    if (!queue) {
      queue = { pending: [], running: false };
      this.#tenants.set(tenantId, queue);
    }
    const settled = new Promise<LinkOutcome>((resolve, reject) => queue.pending.push({ op, resolve, reject }));
    if (!queue.running) void this.#run(tenantId, queue);
    return settled;
  }

  async #run(tenantId: string, queue: TenantQueue): Promise<void> {
    queue.running = true;
    try {
      while (queue.pending.length > 0) {
        const batch = queue.pending.splice(0, MAX_BATCH);
        try {
          const outcomes = await this.transitions.linkBatch(batch.map((p) => p.op));
          batch.forEach((p, i) => {
            const outcome = outcomes[i];
            if (outcome) p.resolve(outcome);
            else p.reject(new Error("link batch returned too few outcomes"));
          });
        } catch (error) {
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      queue.running = false;
      if (this.#tenants.get(tenantId) === queue && queue.pending.length === 0) this.#tenants.delete(tenantId);
    }
  }
}
