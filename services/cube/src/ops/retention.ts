/**
 * The retention round (the background job `retention`, every `CUBE_RETENTION_INTERVAL_MS`): on one
 * replica of the fleet at a time — the holder of the `retention` job lease — each cube whose
 * floor is due to rise (age or count, the cube's own settings over the service defaults) gets its
 * floor raised, then what lies at or below it is deleted in batches of `CUBE_RETENTION_BATCH`.
 *
 * Every due cube is visited once per round, a page of 100 cubes at a time; a cube's floor rises in
 * steps of 20 batches, each step's rows deleted before the next, the lease renewed (and the
 * service's stop checked) before each step.
 *
 * Lock order: the lease row (one statement, alone); per cube its cube row (the floor, one
 * statement, alone); then per batch the pruned items' acks, claims, receipts, notices and item
 * rows (one statement each, in that order). The floor rises before anything under it is
 * deleted, so a reader that checks the floor after its scan never misses a row silently.
 * Writes nothing any stream waits for: nothing to publish.
 */
import type { CubeDeps } from "../deps";
import { type FloorDue, floorsDue, type Pruned, pruneBatch, raiseFloor, takeJobLease } from "../tables/retention";

/** The name of the retention job's fleet-wide lease. */
export const RETENTION_LEASE = "retention";

/** Cubes read per page of due floors (a round walks every due cube once, in id order). */
const CUBES_PER_PAGE = 100;

/** Below every cube id: where a round's walk starts. */
const FIRST = "00000000-0000-0000-0000-000000000000";

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

/** Batches one step of the floor covers at most (in positions: `STEP_BATCHES × CUBE_RETENTION_BATCH`). */
const STEP_BATCHES = 20;

/**
 * Raises one cube's floor towards `target` a step at a time, deleting under each step before the
 * next, while `go()` says so (the service is not stopping and this replica still holds the
 * lease): a round cut short leaves the floor where everything under it is gone, and the next
 * round goes on from there.
 */
async function pruneCube(deps: CubeDeps, due: FloorDue, now: Date, go: () => Promise<boolean>): Promise<CubePruned> {
  const total = { entries: 0, notifications: 0, receipts: 0, notices: 0, acks: 0, claims: 0 };
  const step = BigInt(deps.config.retentionBatch * STEP_BATCHES);
  let floor = due.floor;
  while (floor < due.target && (await go())) {
    floor = await raiseFloor(deps.prisma, due.cubeId, floor + step < due.target ? floor + step : due.target);
    for (;;) {
      const pruned = await pruneBatch(deps.prisma, due.cubeId, floor, now, deps.config.retentionBatch);
      for (const key of Object.keys(total) as (keyof Pruned)[]) total[key] += pruned[key];
      // Until a statement finds nothing: a thread root becomes prunable once its replies went.
      if (pruned.entries + pruned.notifications === 0) break;
    }
  }
  return { cubeId: due.cubeId, floor, ...total };
}

/** Runs one retention round as `holder` (this replica's id); `signal` (the service stopping) ends it at the next step. */
export async function retentionRound(deps: CubeDeps, holder: string, signal?: AbortSignal): Promise<RetentionRound> {
  const { config } = deps;
  const now = deps.clock.now();
  // Taken (or renewed) before every page and step: a round that outlasted its lease stops rather
  // than run beside the replica that took over.
  const lease = () => {
    const at = deps.clock.now();
    return takeJobLease(
      deps.prisma,
      RETENTION_LEASE,
      holder,
      at,
      new Date(at.getTime() + leaseMs(config.retentionIntervalMs)),
    );
  };
  if (signal?.aborted || !(await lease())) return { held: false, cubes: [] };
  let going = true;
  const go = async () => {
    going &&= !signal?.aborted && (await lease());
    return going;
  };
  const defaults = { maxAgeSeconds: config.retentionMaxAgeSeconds, maxItems: config.retentionMaxItems };
  const cubes: CubePruned[] = [];
  // Every due cube once per round, whatever their number: a page at a time, in id order.
  for (let after = FIRST; going; ) {
    const page = await floorsDue(deps.prisma, defaults, now, after, CUBES_PER_PAGE);
    for (const due of page) if (going) cubes.push(await pruneCube(deps, due, now, go));
    if (page.length < CUBES_PER_PAGE) break;
    after = page.at(-1)?.cubeId ?? after;
  }
  if (cubes.length > 0) {
    const items = cubes.reduce((n, c) => n + c.entries + c.notifications, 0);
    deps.logger.info({ cubes: cubes.length, items }, "retention pruned");
  }
  return { held: true, cubes };
}
