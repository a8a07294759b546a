/** Bus notes of device transitions (placement, connection, enrollment) and their publisher. */
import { CREDENTIAL_CHANNEL, credentialTag } from "@unimatrix/service-kit/auth";
import { type Bus, publishAfterCommit } from "@unimatrix/service-kit/bus";
import type { Logger } from "pino";

/** What a bus note says happened; the audit row with `cursor` as its seq holds the whole record. */
export type NoteType =
  | "device_enrolled"
  | "device_revoked"
  | "device_online"
  | "device_offline"
  | "session_placed"
  | "session_rebound"
  | "run_began"
  | "run_ended";

/**
 * A doorbell on channel `device:<tenant>`: published after the change committed. Readers that miss
 * one heal by listing audit events after their last cursor.
 */
export interface DeviceNote {
  readonly type: NoteType;
  readonly tenantId: string;
  /** The seq of the audit row committed with the change. */
  readonly cursor: bigint;
  readonly deviceId: string;
  readonly rootSessionId?: string;
  readonly generation?: bigint;
  readonly rev?: bigint;
  readonly at: Date;
}

/** The channel of a tenant's device notes (relative; the bus adds its prefix). */
function deviceChannel(tenantId: string): string {
  return `device:${tenantId}`;
}

/** The JSON text of a note as published. */
function encodeNote(note: DeviceNote): string {
  return JSON.stringify({
    type: note.type,
    cursor: note.cursor.toString(),
    deviceId: note.deviceId,
    ...(note.rootSessionId !== undefined && { rootSessionId: note.rootSessionId }),
    ...(note.generation !== undefined && { generation: note.generation.toString() }),
    ...(note.rev !== undefined && { rev: note.rev.toString() }),
    at: note.at.toISOString(),
  });
}

/**
 * Publishes committed changes in order (an offline note before the next online), each through the
 * kit's one post-commit publish: awaited, never throwing (a lost note is logged and counted;
 * readers heal from the audit trail).
 */
export class NotePublisher {
  constructor(
    private readonly bus: Bus,
    private readonly logger: Logger,
  ) {}

  /**
   * Rings placement notes without holding the caller's answer for Redis's reply: each publish is
   * handed to the bus (one connection, so in order) before this returns, so a note of a later call
   * never overtakes it; failures are logged and counted as in `publish`. Not for revocations: their
   * credential news must reach every cache before the revoking call answers.
   */
  ring(notes: readonly DeviceNote[]): void {
    for (const note of notes) {
      void publishAfterCommit(this.bus, deviceChannel(note.tenantId), encodeNote(note), this.logger);
    }
  }

  async publish(notes: readonly DeviceNote[]): Promise<void> {
    for (const note of notes) {
      await publishAfterCommit(this.bus, deviceChannel(note.tenantId), encodeNote(note), this.logger);
      // A revoked device's credential: credential news for every gateway's cache and open streams.
      if (note.type === "device_revoked") {
        await publishAfterCommit(this.bus, CREDENTIAL_CHANNEL, credentialTag.device(note.deviceId), this.logger);
      }
    }
  }
}
