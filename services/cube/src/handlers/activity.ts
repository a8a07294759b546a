import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type ActivityService,
  ClaimOutcome,
  ReleaseOutcome,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { InvalidArgumentError, type ServiceImpl } from "@unimatrix/service-kit";
import type { Claim } from "../../generated/prisma/client";
import { decisionToWire } from "../convert";
import type { CubeDeps } from "../deps";
import { appendEntry, readActivity, readUnread } from "../store/activity";
import { listDecisions, recordDecision } from "../store/decisions";
import { ackEntry, claimEntry, releaseClaim } from "../store/reactions";
import type { FeedHub } from "../stream/feed";
import { subscribeActivity } from "../stream/subscribe";
import {
  boundedBytes,
  charLength,
  decodePageToken,
  encodePageToken,
  MAX_MESSAGE_BYTES,
  name,
  optionalUuid,
  pageSize,
  uuid,
} from "../validate";

const claimToWire = (claim: Claim | null | undefined) =>
  claim
    ? {
        holderDroneId: claim.holderDroneId ?? "",
        holderPrincipalId: claim.holderPrincipalId,
        holderLabel: claim.holderLabel,
        claimedAt: timestampFromDate(claim.claimedAt),
      }
    : undefined;

/** ActivityService: the log, acks, claims, decisions and the live stream. */
export function activityHandlers(deps: CubeDeps, hub: FeedHub): Partial<ServiceImpl<typeof ActivityService>> {
  return {
    async appendEntry(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const message = boundedBytes("message", request.message, MAX_MESSAGE_BYTES, true);
      let visibility: "broadcast" | "direct";
      if (request.visibility === Visibility.BROADCAST) visibility = "broadcast";
      else if (request.visibility === Visibility.DIRECT) visibility = "direct";
      else throw new InvalidArgumentError("visibility", "must be BROADCAST or DIRECT");
      const recipients = request.recipientDroneIds.map((id) => uuid("recipient_drone_ids", id));
      if (visibility === "broadcast" && recipients.length > 0)
        throw new InvalidArgumentError("recipient_drone_ids", "must be empty for BROADCAST");
      if (visibility === "direct" && (recipients.length === 0 || recipients.length > 100))
        throw new InvalidArgumentError("recipient_drone_ids", "DIRECT needs 1-100 recipients");
      if (new Set(recipients).size !== recipients.length)
        throw new InvalidArgumentError("recipient_drone_ids", "must be distinct");
      if (request.kind !== undefined && (request.kind.trim() === "" || charLength(request.kind) > 64))
        throw new InvalidArgumentError("kind", "must be 1-64 characters");
      const entry = await appendEntry(deps, await ctx.principal(), cubeId, {
        message,
        visibility,
        recipientDroneIds: recipients,
        kind: request.kind,
      });
      hub.wake(cubeId);
      return { entry };
    },

    async readActivity(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      return readActivity(deps, await ctx.principal(), cubeId, request.cursor, size);
    },

    async readUnread(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      return readUnread(deps, await ctx.principal(), cubeId, size);
    },

    async ackEntry(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const entryId = uuid("entry_id", request.entryId);
      const result = await ackEntry(deps, await ctx.principal(), cubeId, entryId);
      if (result.newlyAcked) hub.wake(cubeId);
      return result;
    },

    async claimEntry(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const entryId = uuid("entry_id", request.entryId);
      const result = await claimEntry(deps, await ctx.principal(), cubeId, entryId);
      if (result.outcome === "claimed") hub.wake(cubeId);
      const outcome = {
        claimed: ClaimOutcome.CLAIMED,
        held: ClaimOutcome.ALREADY_HELD,
        other: ClaimOutcome.ALREADY_CLAIMED,
      }[result.outcome];
      return { outcome, claim: claimToWire(result.claim), entry: result.entry };
    },

    async releaseClaim(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const entryId = uuid("entry_id", request.entryId);
      const result = await releaseClaim(deps, await ctx.principal(), cubeId, entryId);
      if (result.outcome === "released") hub.wake(cubeId);
      const outcome = {
        released: ReleaseOutcome.RELEASED,
        none: ReleaseOutcome.NOT_CLAIMED,
        other: ReleaseOutcome.HELD_BY_OTHER,
      }[result.outcome];
      return { outcome, claim: claimToWire(result.claim), entry: result.entry };
    },

    async recordDecision(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const title = name("title", request.title, 500);
      const rationale = boundedBytes("rationale", request.rationale, MAX_MESSAGE_BYTES);
      const entryId = optionalUuid("entry_id", request.entryId);
      const decision = await recordDecision(deps, await ctx.principal(), cubeId, { title, rationale, entryId });
      return { decision: decisionToWire(decision) };
    },

    async listDecisions(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      const scope = `decisions:${cubeId}`;
      const offset = decodePageToken(request.pageToken, scope);
      const rows = await listDecisions(deps, await ctx.principal(), cubeId, offset, size);
      return {
        decisions: rows.slice(0, size).map(decisionToWire),
        nextPageToken: rows.length > size ? encodePageToken(offset + size, scope) : "",
      };
    },

    subscribeActivity: subscribeActivity(deps, hub),
  };
}
