import type { Bus } from "@unimatrix/service-kit/bus";
import type { Clock } from "@unimatrix/service-kit/clock";
import type { Logger } from "pino";
import type { TransitionStore } from "../store/transitions";
import type { LinkRegistry } from "./links";
import { publishSignal } from "./signal";

/** What one reconcile pass did. */
export interface ReconcileReport {
  /** Machines of dead replicas (expired lease) that were unlinked. */
  readonly expired: number;
  /** Presence rows corrected to match ownership. */
  readonly repaired: number;
  /** Tenants whose pruned floor moved. */
  readonly prunedTenants: number;
}

/** Options of the reconciler. */
export interface ReconcilerOptions {
  readonly registry: LinkRegistry;
  readonly transitions: TransitionStore;
  readonly bus: Bus;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly retentionMs: number;
}

/**
 * Brings the database back in line with the links that exist: held links vs ownership rows
 * (both ways), expired leases of other replicas, presence rows vs ownership rows, and retention.
 * Safe to run on every replica at once: every change re-checks under the machine's row lock.
 */
export class Reconciler {
  #running: Promise<ReconcileReport> | null = null;
  constructor(private readonly options: ReconcilerOptions) {}

  /** Runs one pass (a pass already running is joined, not doubled). */
  run(): Promise<ReconcileReport> {
    this.#running ??= this.#pass().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async #pass(): Promise<ReconcileReport> {
    const { registry, transitions, clock, bus, logger } = this.options;
    // A stopping replica's links keep their rows on purpose: no pass may unlink them now.
    if (registry.dead || registry.stopping) return { expired: 0, repaired: 0, prunedTenants: 0 };
    await registry.reconcileHeld();
    let expired = 0;
    const now = clock.now();
    for (const { machineId, linkId } of await transitions.expiredLinks(registry.replicaId, now)) {
      const result = await transitions.linkClosed(machineId, linkId, now, now);
      if (!result) continue;
      expired += 1;
      await registry.publish(result.tenantId, result.event, { position: result.position });
    }
    let repaired = 0;
    for (const machineId of await transitions.disagreeing()) {
      const result = await transitions.repair(machineId, clock.now());
      if (!result?.event) continue;
      repaired += 1;
      await registry.publish(result.tenantId, result.event);
    }
    const pruned = await transitions.prune(new Date(clock.now().getTime() - this.options.retentionMs));
    for (const tenantId of pruned) await publishSignal(bus, logger, tenantId, { poke: true });
    if (expired + repaired + pruned.length > 0) {
      logger.info({ expired, repaired, prunedTenants: pruned.length }, "presence reconciled");
    }
    return { expired, repaired, prunedTenants: pruned.length };
  }
}
