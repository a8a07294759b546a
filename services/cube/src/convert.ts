import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type ActivityItemSchema,
  type ClientSchema,
  type CubeSchema,
  type DecisionSchema,
  DronePosture,
  type DroneSchema,
  type EntrySchema,
  NotificationKind,
  type NotificationSchema,
  RoleClass,
  type RoleSchema,
  Visibility,
} from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { principalKindOf } from "@unimatrix/service-kit";
import type { ActivityItem as ActivityRow, ApiClient, Cube, Decision, Drone, Role } from "../generated/prisma/client";
import { encodeCursor } from "./cursor";

const ts = (date: Date) => timestampFromDate(date);
const optTs = (date: Date | null | undefined) => (date ? timestampFromDate(date) : undefined);

export function cubeToWire(cube: Cube, callerAccess: number): MessageInitShape<typeof CubeSchema> {
  return {
    id: cube.id,
    tenantId: cube.tenantId,
    name: cube.name,
    directive: cube.directive,
    taxonomyJson: cube.taxonomyJson ?? undefined,
    ownerId: cube.ownerId,
    ownerKind: principalKindOf(cube.ownerKind),
    callerAccess,
    createdAt: ts(cube.createdAt),
    updatedAt: ts(cube.updatedAt),
  };
}

export function clientToWire(client: ApiClient): MessageInitShape<typeof ClientSchema> {
  return {
    id: client.id,
    tenantId: client.tenantId,
    name: client.name,
    createdAt: ts(client.createdAt),
    credentialIssuedAt: ts(client.credentialIssuedAt),
    revokedAt: optTs(client.revokedAt),
  };
}

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

/** A drone row with what its wire form needs besides the row. */
export interface DroneView {
  readonly drone: Drone;
  readonly roleName: string;
  readonly participant: boolean;
  readonly live: boolean;
  readonly seenSince?: boolean;
}

export function droneToWire(view: DroneView): MessageInitShape<typeof DroneSchema> {
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
  };
}

/** Ack and claim state of an entry. */
export interface EntryExtras {
  readonly ackCount: number;
  readonly ackedByDroneIds: readonly string[];
  readonly claim?: { holderPrincipalId: string; holderDroneId: string | null; holderLabel: string; claimedAt: Date };
}

export function entryToWire(row: ActivityRow, extras: EntryExtras): MessageInitShape<typeof EntrySchema> {
  return {
    id: row.id,
    cubeId: row.cubeId,
    cursor: encodeCursor(row.cubeId, row.position),
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
    ackCount: extras.ackCount,
    ackedByDroneIds: [...extras.ackedByDroneIds],
    claim: extras.claim
      ? {
          holderDroneId: extras.claim.holderDroneId ?? "",
          holderPrincipalId: extras.claim.holderPrincipalId,
          holderLabel: extras.claim.holderLabel,
          claimedAt: ts(extras.claim.claimedAt),
        }
      : undefined,
  };
}

const NOTIFICATION_KINDS: Record<string, NotificationKind> = {
  ack: NotificationKind.ACK,
  claim: NotificationKind.CLAIM,
  release: NotificationKind.RELEASE,
  heartbeat_ping: NotificationKind.HEARTBEAT_PING,
};

export function notificationToWire(row: ActivityRow): MessageInitShape<typeof NotificationSchema> {
  return {
    id: row.id,
    cubeId: row.cubeId,
    cursor: encodeCursor(row.cubeId, row.position),
    kind: NOTIFICATION_KINDS[row.notificationKind ?? ""] ?? NotificationKind.UNSPECIFIED,
    text: row.message,
    entryId: row.entryId ?? "",
    recipientDroneId: row.recipientDroneIds[0] ?? "",
    actorDroneId: row.actorDroneId ?? "",
    actorRoleName: row.actorRoleName ?? "",
    createdAt: ts(row.createdAt),
  };
}

export type WireItem = MessageInitShape<typeof ActivityItemSchema>;

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
