/** A claim lease's state in the database. */
export type LeaseState = "held" | "stale" | "released";

/** What the lease rules look at of a claim row. */
export interface LeaseFacts {
  readonly fence: bigint;
  readonly state: LeaseState;
  readonly holderPrincipalId: string;
  /** HELD: when it turns stale unless renewed; STALE: when it turned stale. */
  readonly staleAt: Date;
}

/** When a lease renewed at `at` turns stale. */
export function staleAtFor(at: Date, leaseSeconds: number): Date {
  return new Date(at.getTime() + leaseSeconds * 1000);
}

/** What TakeOverClaim does for a caller holding `callerKey` who saw `fence`. */
export type TakeOverDecision = "take_over" | "not_claimed" | "already_held" | "fence_moved" | "not_stale";

/**
 * The take-over rule: only a STALE claim with exactly the fence the caller saw, held by someone
 * else, is taken (fence + 1); the database applies the same condition in one conditional UPDATE
 * so exactly one of concurrent callers wins.
 */
export function takeOverDecision(claim: LeaseFacts | null, callerKey: string, fence: bigint): TakeOverDecision {
  if (!claim || claim.state === "released") return "not_claimed";
  if (claim.holderPrincipalId === callerKey) return "already_held";
  if (claim.fence !== fence) return "fence_moved";
  if (claim.state !== "stale") return "not_stale";
  return "take_over";
}

/**
 * Strict fence check: holds only when the claim is HELD with exactly this fence, not past its due
 * time, and (for a drone holder) its session is live — a lapse the scan has not recorded yet does
 * not hold either.
 */
export function fenceHolds(claim: LeaseFacts | null, fence: bigint, now: Date, holderLive: boolean): boolean {
  if (claim?.state !== "held" || claim.fence !== fence) return false;
  return claim.staleAt > now && holderLive;
}
