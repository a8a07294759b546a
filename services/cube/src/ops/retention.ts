/**
 * The retention round (the background job `retention`, every `CUBE_RETENTION_INTERVAL_MS`): on one
 * replica of the fleet at a time — the holder of the `retention` job lease — each cube whose
 * floor is due to rise (age or count, the cube's own settings over the service defaults) gets its
 * floor raised, then what lies at or below it is deleted in batches of `CUBE_RETENTION_BATCH`.
 *
 * Lock order: the lease row (one statement, alone); per cube its cube row (the floor, one
 * statement, alone); then per batch the pruned items' acks, claims, receipts, notices and item
 * rows (one statement each, in that order). The floor rises before anything under it is
 * deleted, so a reader that checks the floor after its scan never misses a row silently.
 * Writes nothing any stream waits for: nothing to publish.
 */
import type { CubeDeps } from "../deps";
import { floorsDue, type Pruned, pruneBatch, raiseFloor, takeJobLease } from "../tables/retention";

/** The name of the retention job's fleet-wide lease. */
export const RETENTION_LEASE = "retention";

/** Cubes whose floor one round raises at most (the next round takes the rest). */
const CUBES_PER_ROUND = 100;

/** What retention did to one cube in a round. */
export interface CubePruned extends Pruned {
  readonly cubeId: string;
  /** The cube's floor after the round. */
  readonly floor: bigint;
}

/** What one retention round did: nothing unless this replica held the lease. */
export interface RetentionRound {
  /** This replica held the lease and ran the round. */
  readonly held: boolean;
  readonly cubes: CubePruned[];
}

/** How long a round's lease lasts: two periods of the timer, at least a minute. */
function leaseMs(intervalMs: number): number {
  return Math.max(60_000, 2 * intervalMs);
}

/** Runs one retention round as `holder` (this replica's id). */
export async function retentionRound(deps: CubeDeps, holder: string): Promise<RetentionRound> {
  const { config } = deps;
  const now = deps.clock.now();
  const until = new Date(now.getTime() + leaseMs(config.retentionIntervalMs));
  if (!(await takeJobLease(deps.prisma, RETENTION_LEASE, holder, now, until))) return { held: false, cubes: [] };
  const defaults = { maxAgeSeconds: config.retentionMaxAgeSeconds, maxItems: config.retentionMaxItems };
  const cubes: CubePruned[] = [];
  for (const due of await floorsDue(deps.prisma, defaults, now, CUBES_PER_ROUND)) {
    const floor = await raiseFloor(deps.prisma, due.cubeId, due.target);
    const total = { entries: 0, notifications: 0, receipts: 0, notices: 0, acks: 0, claims: 0 };
    for (;;) {
      const pruned = await pruneBatch(deps.prisma, due.cubeId, floor, now, config.retentionBatch);
      for (const key of Object.keys(total) as (keyof Pruned)[]) total[key] += pruned[key];
      // Until a statement finds nothing: a thread root becomes prunable once its replies went.
      if (pruned.entries + pruned.notifications === 0) break;
    }
    cubes.push({ cubeId: due.cubeId, floor, ...total });
  }
  if (cubes.length > 0) {
    const items = cubes.reduce((n, c) => n + c.entries + c.notifications, 0);
    deps.logger.info({ cubes: cubes.length, items }, "retention pruned");
  }
  return { held: true, cubes };
}
