/** Placement outcome rules: what a rebind, a run begin and a run end answer, decided from locked rows. */
import type { DeviceRow, PlacementRow } from "../store/rows";
import { canSee, ownedDevice, ownedPlacement, type Scope } from "./access";

/** The outcomes of RebindSession. */
export type RebindOutcome =
  | "rebound"
  | "idempotent"
  | "rev_conflict"
  | "active_run"
  | "gone"
  | "device_not_found"
  | "device_revoked";

/** What a rebind is decided on: the rows it locked and the request. */
export interface RebindFacts {
  readonly scope: Scope;
  /** The placement of the root session in the caller's tenant (undefined: not placed). */
  readonly placement: PlacementRow | undefined;
  /** The target device (undefined: unknown id). */
  readonly device: DeviceRow | undefined;
  /** The run holding the session, or null. */
  readonly claim: string | null;
  readonly deviceId: string;
  readonly expectedRev: bigint;
}

/**
 * The outcome of a rebind, checked in the contract's order: GONE (not placed, or not visible) →
 * DEVICE_NOT_FOUND (unknown, outside the scope, or owned by another subject than the placement) →
 * DEVICE_REVOKED → IDEMPOTENT (already there, even with a stale rev) → REV_CONFLICT → ACTIVE_RUN →
 * REBOUND (the only one that changes anything).
 */
export function rebindOutcome(facts: RebindFacts): RebindOutcome {
  const { scope, placement, device } = facts;
  if (!placement || !canSee(scope, ownedPlacement(placement))) return "gone";
  const sameOwner =
    device !== undefined &&
    device.tenant_id === placement.tenant_id &&
    device.owner_subject_id === placement.owner_subject_id;
  if (!device || !sameOwner || !canSee(scope, ownedDevice(device))) return "device_not_found";
  if (device.status !== "active") return "device_revoked";
  if (placement.device_id === facts.deviceId) return "idempotent";
  if (placement.rev !== facts.expectedRev) return "rev_conflict";
  if (facts.claim !== null) return "active_run";
  return "rebound";
}

/** BeginRun on a placed session held by `claim`: BEGUN only when free; the same run is ALREADY_ACTIVE. */
export function beginRunOutcome(claim: string | null, runId: string): "begun" | "already_active" | "busy" {
  if (claim === runId) return "already_active";
  if (claim !== null) return "busy";
  return "begun";
}

/** EndRun on a placed session held by `claim`: ENDED only for the holding run. */
export function endRunOutcome(claim: string | null, runId: string): "ended" | "not_active" | "other_run" {
  if (claim === null) return "not_active";
  if (claim !== runId) return "other_run";
  return "ended";
}

/** A first placement lost to an existing one: SAME when it is on the asked device, else DEVICE_CONFLICT. */
export function conflictOutcome(current: PlacementRow, deviceId: string): "same" | "device_conflict" {
  return current.device_id === deviceId ? "same" : "device_conflict";
}
