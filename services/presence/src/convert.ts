import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PrincipalKind, type PrincipalSchema } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import type { Notice } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import type {
  LinkCloseReason,
  LinkResponseSchema,
  LinkSessionBound,
} from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import {
  WatchMachinesResponseSchema as ResponseSchema,
  type WatchMachinesResponseSchema,
} from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import type { MachineSchema } from "@unimatrix/contracts/unimatrix/presence/v1/types_pb";
import { encodeOnce } from "@unimatrix/service-kit/grpc";
import type { SnapshotItem } from "./store/log";
import type { MachineRecord, PresenceEvent } from "./store/rows";

/** A Link response as the link stream yields it. */
export type LinkResponse = MessageInitShape<typeof LinkResponseSchema>;

/** A watch event as handlers yield it. */
export type WatchEvent = MessageInitShape<typeof WatchMachinesResponseSchema>;

/** The wire form of a machine. */
export function machineMessage(machine: MachineRecord): MessageInitShape<typeof MachineSchema> {
  return {
    id: machine.id,
    tenantId: machine.tenantId,
    name: machine.name,
    linked: machine.linked,
    presenceChangedAt: machine.changedAt ? timestampFromDate(machine.changedAt) : undefined,
    createdAt: timestampFromDate(machine.createdAt),
    revokedAt: machine.revokedAt ? timestampFromDate(machine.revokedAt) : undefined,
  };
}

const messages = new WeakMap<PresenceEvent, WatchEvent>();

/**
 * The watch event of a transition, built once per event object and encoded once for every
 * watcher it is written to (the feed hands the same event object to all its watchers).
 */
export function transitionEvent(event: PresenceEvent): WatchEvent {
  let message = messages.get(event);
  if (!message) {
    message = encodeOnce(create(ResponseSchema, transitionInit(event)));
    messages.set(event, message);
  }
  return message;
}

function transitionInit(event: PresenceEvent): WatchEvent {
  const value = {
    cursor: event.seq.toString(),
    machineId: event.machineId,
    name: event.name,
    at: timestampFromDate(event.at),
  };
  return {
    event: event.linked ? { case: "machineLinked", value } : { case: "machineUnlinked", value },
  };
}

/**
 * The snapshot event, built as a message (not an init shape) so the transport does not copy its
 * items a second time.
 */
export function snapshotEvent(cursor: bigint, reset: boolean, items: readonly SnapshotItem[]): WatchEvent {
  return create(ResponseSchema, {
    event: {
      case: "machineSnapshot",
      value: {
        cursor: cursor.toString(),
        reset,
        items: items.map((item) => ({
          machineId: item.machineId,
          name: item.name,
          linked: item.linked,
          changedAt: item.changedAt ? timestampFromDate(item.changedAt) : undefined,
        })),
      },
    },
  });
}

/** Encoded size of a transition's watch event: what a watcher has to take off the wire. */
export function transitionSize(event: PresenceEvent): number {
  return toBinary(ResponseSchema, create(ResponseSchema, transitionInit(event))).length;
}

/** `machine_ready`: the backlog up to `cursor` was delivered; live events follow. */
export function readyEvent(cursor: bigint): WatchEvent {
  return { event: { case: "machineReady", value: { cursor: cursor.toString() } } };
}

/** `going_away{cursor}`: this replica is stopping; call again (another replica) with `cursor`. */
export function goingAwayEvent(cursor: bigint): WatchEvent {
  return { event: { case: "goingAway", value: { cursor: cursor.toString() } } };
}

/** A watch heartbeat at `at`. */
export function watchHeartbeat(at: Date): WatchEvent {
  return { event: { case: "heartbeat", value: { at: timestampFromDate(at) } } };
}

/** `access_revoked`: the watcher's credential no longer authenticates; the stream completes. */
export function accessRevokedEvent(): WatchEvent {
  return { event: { case: "accessRevoked", value: {} } };
}

/** The MACHINE principal a machine token authenticates as (MachineService.Authenticate). */
export function machinePrincipal(machine: {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
}): MessageInitShape<typeof PrincipalSchema> {
  return {
    kind: PrincipalKind.MACHINE,
    tenantId: machine.tenantId,
    subjectId: machine.id,
    credentialId: machine.id,
    displayName: machine.name,
    expiresAt: undefined,
  };
}

/** `linked`: the link is current; heartbeats every `heartbeatSeconds`. */
export function linkedResponse(machineId: string, linkId: string, heartbeatSeconds: number): LinkResponse {
  return { event: { case: "linked", value: { machineId, heartbeatIntervalSeconds: heartbeatSeconds, linkId } } };
}

/** A link heartbeat at `at`. */
export function linkHeartbeat(at: Date): LinkResponse {
  return { event: { case: "heartbeat", value: { at: timestampFromDate(at) } } };
}

/** The link's "going away": this replica is stopping; reconnect (to another replica) at once. */
export function goingAwayResponse(): LinkResponse {
  return { event: { case: "goingAway", value: {} } };
}

/** A notice for a session on the machine, as the Link carries it (the cube notice's id, unchanged). */
export function noticeResponse(notice: Notice): LinkResponse {
  return {
    event: {
      case: "notice",
      value: {
        id: notice.id,
        cubeId: notice.cubeId,
        droneId: notice.droneId,
        droneLabel: notice.droneLabel,
        entryId: notice.entryId,
        text: notice.text,
      },
    },
  };
}

/** `session_bound`: the answer to a daemon's `session` request. */
export function sessionBoundResponse(bound: Omit<LinkSessionBound, "$typeName">): LinkResponse {
  return { event: { case: "sessionBound", value: { ...bound } } };
}

/** `closed(reason)`: the server ends the link. */
export function closedResponse(reason: LinkCloseReason): LinkResponse {
  return { event: { case: "closed", value: { reason } } };
}
