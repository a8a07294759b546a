import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ClaimOutcome,
  ReleaseOutcome,
  type SubscribeActivityResponse,
  SubscribeActivityResponseSchema,
  TakeOverOutcome,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import {
  AttachSeatOutcome,
  type AttachSeatResponseSchema,
  type DronesSinceResponseSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import type { NoticeSchema } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import {
  type ActivityItemSchema,
  type ClaimSchema,
  ClaimState,
  type CubeSchema,
  type DecisionSchema,
  DeliveryChannel,
  DronePosture,
  type DroneSchema,
  type EntrySchema,
  NotificationKind,
  type NotificationSchema,
  type ReceiptSchema,
  RoleClass,
  type RoleSchema,
  SeatState,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { principalKindOf } from "@unimatrix/service-kit/auth";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import type { AttachResult } from "./ops/attach-seat";
import type { ClaimResult } from "./ops/claim";
import type { ReleaseResult } from "./ops/release";
import { encodeCursor } from "./rules/cursor";
import type { TakeOverDecision } from "./rules/lease";
import { noticeText } from "./rules/preview";
import type { SeatStateName } from "./rules/seat";
import { taxonomyKinds } from "./rules/taxonomy";
import type { ActivityRow, Claim, Cube, Decision, DroneRow, ItemRow, Receipt, Role } from "./store/rows";
import type { PendingNotice } from "./tables/notices";

export const ts = (date: Date) => timestampFromDate(date);
export const optTs = (date: Date | null | undefined) => (date ? timestampFromDate(date) : undefined);

/** A cube as the caller sees it (with the caller's access level). */
export function cubeToWire(cube: Cube, callerAccess: number): MessageInitShape<typeof CubeSchema> {
  return {
    id: cube.id,
    tenantId: cube.tenantId,
    name: cube.name,
    directive: cube.directive,
    taxonomyJson: cube.taxonomyJson ?? undefined,
    taxonomyKinds: cube.taxonomyJson ? [...taxonomyKinds(cube.taxonomyJson)] : [],
    ownerId: cube.ownerId,
    ownerKind: principalKindOf(cube.ownerKind),
    callerAccess,
    createdAt: ts(cube.createdAt),
    updatedAt: ts(cube.updatedAt),
    retention: { maxAgeSeconds: cube.retentionMaxAgeSeconds ?? 0, maxItems: cube.retentionMaxItems ?? 0 },
    floorCursor: cube.retainedFloor > 0n ? encodeCursor(cube.id, cube.retainedFloor) : "",
  };
}

/** A role of a cube. */
export function roleToWire(role: Role): MessageInitShape<typeof RoleSchema> {
  return {
    id: role.id,
    cubeId: role.cubeId,
    name: role.name,
    shortDescription: role.shortDescription,
    detailedDescription: role.detailedDescription,
    roleClass: role.roleClass === "queen" ? RoleClass.QUEEN : RoleClass.WORKER,
    isDefault: role.isDefault,
    mandatory: role.mandatory,
    humanSeat: role.humanSeat,
    canBroadcast: role.canBroadcast,
    receivesAllDirect: role.receivesAllDirect,
    createdAt: ts(role.createdAt),
    updatedAt: ts(role.updatedAt),
  };
}

/** A drone with its role name, posture and liveness. */
export function droneToWire(view: DroneRow): MessageInitShape<typeof DroneSchema> {
  const { drone } = view;
  return {
    id: drone.id,
    cubeId: drone.cubeId,
    roleId: drone.roleId,
    roleName: view.roleName,
    label: drone.label,
    clientId: drone.clientId,
    hostname: drone.hostname,
    posture: view.participant ? DronePosture.PARTICIPANT : DronePosture.OBSERVER,
    createdAt: ts(drone.createdAt),
    lastSeenAt: ts(drone.lastSeenAt),
    lastLogPostAt: optTs(drone.lastLogPostAt),
    live: view.live,
    evictedAt: optTs(drone.evictedAt),
    silentPingCount: drone.silentPingCount,
    lastSilentPingAt: optTs(drone.lastSilentPingAt),
    seenSince: view.seenSince ?? false,
    state: seatStateToWire(drone.state),
    stateNote: drone.stateNote,
    stateChangedAt: optTs(drone.stateChangedAt),
    machineId: drone.machineId ?? "",
  };
}

const SEAT_STATES: Record<string, SeatState> = {
  working: SeatState.WORKING,
  waiting: SeatState.WAITING,
  blocked: SeatState.BLOCKED,
  idle: SeatState.IDLE,
};

/** A stored seat state (null: never set). */
function seatStateToWire(state: string | null): SeatState {
  return SEAT_STATES[state ?? ""] ?? SeatState.UNSPECIFIED;
}

/** A wire seat state as stored (UNSPECIFIED is refused by the contract before this). */
export function seatStateFromWire(state: SeatState): SeatStateName {
  const name = Object.entries(SEAT_STATES).find(([, v]) => v === state)?.[0];
  if (!name) throw new InvalidArgumentError("state", "must be WORKING, WAITING, BLOCKED or IDLE");
  return name as SeatStateName;
}

/** A claim on an entry (none, or released: undefined). */
export function claimToWire(claim: Claim | null): MessageInitShape<typeof ClaimSchema> | undefined {
  if (!claim || claim.state === "released") return undefined;
  return {
    holderDroneId: claim.holderDroneId ?? "",
    holderPrincipalId: claim.holderPrincipalId,
    holderLabel: claim.holderLabel,
    claimedAt: ts(claim.claimedAt),
    fence: BigInt(claim.fence),
    state: claim.state === "stale" ? ClaimState.STALE : ClaimState.HELD,
    renewedAt: ts(claim.renewedAt),
    staleAt: ts(claim.staleAt),
  };
}

/** One recipient's receipt of an entry. */
export function receiptToWire(row: Receipt & { label: string }): MessageInitShape<typeof ReceiptSchema> {
  return {
    droneId: row.droneId,
    label: row.label,
    deliveredAt: optTs(row.deliveredAt),
    deliveredVia:
      row.deliveredVia === "stream"
        ? DeliveryChannel.STREAM
        : row.deliveredVia === "machine_link"
          ? DeliveryChannel.MACHINE_LINK
          : row.deliveredVia === "hook"
            ? DeliveryChannel.HOOK
            : DeliveryChannel.UNSPECIFIED,
    readAt: optTs(row.readAt),
    ackedAt: optTs(row.ackedAt),
    nudgedAt: optTs(row.nudgedAt),
  };
}

/** An entry with its ack and claim state. */
export function entryToWire({ row, state }: ItemRow): MessageInitShape<typeof EntrySchema> {
  return {
    id: row.id,
    cubeId: row.cubeId,
    cursor: encodeCursor(row.cubeId, row.position),
    position: row.position,
    author: {
      droneId: row.authorDroneId ?? "",
      label: row.authorLabel ?? "",
      principalId: row.authorPrincipalId ?? "",
      principalKind: principalKindOf(row.authorPrincipalKind ?? ""),
    },
    message: row.message,
    visibility: row.visibility === "direct" ? Visibility.DIRECT : Visibility.BROADCAST,
    recipientDroneIds: row.visibility === "direct" ? row.recipientDroneIds : [],
    kind: row.kind ?? "",
    createdAt: ts(row.createdAt),
    ackCount: state.ackCount,
    ackedByDroneIds: [...state.ackedByDroneIds],
    claim: claimToWire(state.claim),
    replyToEntryId: row.replyToEntryId ?? "",
    threadRootEntryId: row.threadRootEntryId ?? "",
    replyCount: state.replyCount,
    expectsReply: row.expectsReply,
    question: row.question,
    answerEntryId: row.answerEntryId ?? "",
    seatState: row.seatState ? { state: seatStateToWire(row.seatState), note: row.seatStateNote ?? "" } : undefined,
  };
}

const NOTIFICATION_KINDS: Record<string, NotificationKind> = {
  ack: NotificationKind.ACK,
  claim: NotificationKind.CLAIM,
  release: NotificationKind.RELEASE,
  heartbeat_ping: NotificationKind.HEARTBEAT_PING,
  reply: NotificationKind.REPLY,
  claim_stale: NotificationKind.CLAIM_STALE,
  takeover: NotificationKind.TAKEOVER,
  unread_nudge: NotificationKind.UNREAD_NUDGE,
};

/** A notification (to one drone). */
function notificationToWire(row: ActivityRow): MessageInitShape<typeof NotificationSchema> {
  return {
    id: row.id,
    cubeId: row.cubeId,
    cursor: encodeCursor(row.cubeId, row.position),
    position: row.position,
    kind: NOTIFICATION_KINDS[row.notificationKind ?? ""] ?? NotificationKind.UNSPECIFIED,
    text: row.message,
    entryId: row.entryId ?? "",
    recipientDroneId: row.recipientDroneIds[0] ?? "",
    actorDroneId: row.actorDroneId ?? "",
    actorRoleName: row.actorRoleName ?? "",
    createdAt: ts(row.createdAt),
  };
}

/** An activity item: an entry or a notification. */
export function itemToWire(item: ItemRow): MessageInitShape<typeof ActivityItemSchema> {
  return item.row.itemType === "entry"
    ? { item: { case: "entry", value: entryToWire(item) } }
    : { item: { case: "notification", value: notificationToWire(item.row) } };
}

/** The SubscribeActivity event of an activity item, built (so a feed can share and encode it once). */
export function eventOf(item: ItemRow): SubscribeActivityResponse {
  return item.row.itemType === "entry"
    ? create(SubscribeActivityResponseSchema, { event: { case: "entry", value: entryToWire(item) } })
    : create(SubscribeActivityResponseSchema, { event: { case: "notification", value: notificationToWire(item.row) } });
}

/** A claim attempt's outcome. */
export function claimOutcomeToWire(outcome: ClaimResult["outcome"]): ClaimOutcome {
  return { claimed: ClaimOutcome.CLAIMED, held: ClaimOutcome.ALREADY_HELD, other: ClaimOutcome.ALREADY_CLAIMED }[
    outcome
  ];
}

/** A take-over attempt's outcome. */
export function takeOverOutcomeToWire(outcome: TakeOverDecision): TakeOverOutcome {
  return {
    take_over: TakeOverOutcome.TAKEN_OVER,
    not_stale: TakeOverOutcome.NOT_STALE,
    fence_moved: TakeOverOutcome.FENCE_MOVED,
    not_claimed: TakeOverOutcome.NOT_CLAIMED,
    already_held: TakeOverOutcome.ALREADY_HELD,
  }[outcome];
}

/** A release attempt's outcome. */
export function releaseOutcomeToWire(outcome: ReleaseResult["outcome"]): ReleaseOutcome {
  return {
    released: ReleaseOutcome.RELEASED,
    none: ReleaseOutcome.NOT_CLAIMED,
    other: ReleaseOutcome.HELD_BY_OTHER,
  }[outcome];
}

/** A recorded decision. */
export function decisionToWire(row: Decision): MessageInitShape<typeof DecisionSchema> {
  return {
    id: row.id,
    cubeId: row.cubeId,
    author: {
      droneId: row.authorDroneId ?? "",
      label: row.authorLabel,
      principalId: row.authorPrincipalId,
      principalKind: principalKindOf(row.authorPrincipalKind),
    },
    title: row.title,
    rationale: row.rationale,
    entryId: row.entryId ?? "",
    createdAt: ts(row.createdAt),
  };
}

/** An AttachSeat answer: SESSION_REJECTED alone, or the drone with its session (the token only when new). */
export function attachToWire(result: AttachResult): MessageInitShape<typeof AttachSeatResponseSchema> {
  if (result.outcome === "rejected") return { outcome: AttachSeatOutcome.SESSION_REJECTED };
  return {
    outcome: result.outcome === "created" ? AttachSeatOutcome.CREATED : AttachSeatOutcome.REUSED,
    drone: droneToWire(result.drone),
    sessionId: result.session.id,
    sessionToken: result.token ?? "",
    sessionExpiresAt: ts(result.session.expiresAt),
    headCursor: encodeCursor(result.drone.drone.cubeId, result.head),
  };
}

/** A DronesSince answer: every non-evicted drone with `seen_since`, and the anchor's instant. */
export function dronesSinceToWire(result: {
  drones: readonly DroneRow[];
  anchorTime: Date;
}): MessageInitShape<typeof DronesSinceResponseSchema> {
  return { drones: result.drones.map(droneToWire), anchorTime: ts(result.anchorTime) };
}

/** A pending notice as WatchNotices sends it (text from the preview rules). */
export function noticeToWire(notice: PendingNotice): MessageInitShape<typeof NoticeSchema> {
  return {
    id: notice.id,
    cubeId: notice.cubeId,
    droneId: notice.droneId,
    droneLabel: notice.droneLabel,
    entryId: notice.entryId ?? "",
    text: noticeText(notice),
    createdAt: ts(notice.createdAt),
  };
}
