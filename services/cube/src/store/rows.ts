import type { Principal } from "@unimatrix/service-kit/auth";
import type { ActivityItem, Claim, Drone } from "../../generated/prisma/client";

export type {
  ActivityItem as ActivityRow,
  ApiClient,
  Claim,
  Cube,
  CubeGrant,
  Decision,
  Drone,
  DroneSession,
  Prisma,
  Receipt,
  Role,
  Tenant,
  User,
} from "../../generated/prisma/client";

/** Ack and claim state of an entry. */
export interface EntryState {
  readonly ackCount: number;
  /** Drones that acked, oldest ack first. */
  readonly ackedByDroneIds: readonly string[];
  /** The current claim (HELD or STALE); null when unclaimed or released. */
  readonly claim: Claim | null;
  /** On a thread root: its number of replies; 0 elsewhere. */
  readonly replyCount: number;
}

/** The state of an entry nobody reacted to yet (and of every notification). */
export const NO_REACTIONS: EntryState = { ackCount: 0, ackedByDroneIds: [], claim: null, replyCount: 0 };

/** One activity item as stores return it: the row, and for an entry its ack and claim state. */
export interface ItemRow {
  readonly row: ActivityItem;
  readonly state: EntryState;
}

/** A drone row with what its wire form needs besides the row. */
export interface DroneRow {
  readonly drone: Drone;
  readonly roleName: string;
  readonly participant: boolean;
  readonly live: boolean;
  readonly seenSince?: boolean;
}

/** A resolved token: the kit principal plus what the Authenticate RPC reports. */
export interface ResolvedToken {
  readonly principal: Principal;
  readonly credentialId: string;
  readonly displayName: string;
  readonly expiresAt?: Date;
}
