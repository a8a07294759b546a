import type { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit";
import {
  claimOutcomeToWire,
  claimToWire,
  decisionToWire,
  entryToWire,
  itemToWire,
  releaseOutcomeToWire,
} from "../convert";
import type { FeedHub } from "../live/feed";
import { subscribeActivity } from "../live/subscribe";
import { encodeCursor } from "../rules/cursor";
import { checkEntry } from "../rules/entry";
import {
  boundedBytes,
  decodePageToken,
  encodePageToken,
  MAX_MESSAGE_BYTES,
  name,
  optionalUuid,
  pageSize,
  uuid,
} from "../rules/request";
import { appendEntry, readActivity, readUnread } from "../store/activity";
import { listDecisions, recordDecision } from "../store/decisions";
import { ackEntry, claimEntry, releaseClaim } from "../store/reactions";
import type { CubeDeps } from "./deps";

/** ActivityService: the log, acks, claims, decisions and the live stream. */
export function activityHandlers(deps: CubeDeps, hub: FeedHub): ServiceImpl<typeof ActivityService> {
  const subscribe = subscribeActivity(deps, hub);
  return {
    async appendEntry(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const input = checkEntry(request);
      const entry = await appendEntry(deps, await ctx.principal(), cubeId, input);
      hub.wake(cubeId);
      return { entry: entryToWire(entry) };
    },

    async readActivity(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      const page = await readActivity(deps, await ctx.principal(), cubeId, request.cursor, size);
      return {
        items: page.items.map(itemToWire),
        nextCursor: page.last === page.after ? request.cursor : encodeCursor(cubeId, page.last),
        hasMore: page.hasMore,
      };
    },

    async readUnread(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const size = pageSize(request.pageSize);
      const page = await readUnread(deps, await ctx.principal(), cubeId, size);
      return { items: page.items.map(itemToWire), cursor: encodeCursor(cubeId, page.last), hasMore: page.hasMore };
    },

    async ackEntry(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const entryId = uuid("entry_id", request.entryId);
      const result = await ackEntry(deps, await ctx.principal(), cubeId, entryId);
      if (result.newlyAcked) hub.wake(cubeId);
      return { newlyAcked: result.newlyAcked, entry: entryToWire(result.entry) };
    },

    async claimEntry(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const entryId = uuid("entry_id", request.entryId);
      const result = await claimEntry(deps, await ctx.principal(), cubeId, entryId);
      if (result.outcome === "claimed") hub.wake(cubeId);
      return {
        outcome: claimOutcomeToWire(result.outcome),
        claim: claimToWire(result.claim),
        entry: entryToWire(result.entry),
      };
    },

    async releaseClaim(request, ctx) {
      const cubeId = uuid("cube_id", request.cubeId);
      const entryId = uuid("entry_id", request.entryId);
      const result = await releaseClaim(deps, await ctx.principal(), cubeId, entryId);
      if (result.outcome === "released") hub.wake(cubeId);
      return {
        outcome: releaseOutcomeToWire(result.outcome),
        claim: claimToWire(result.claim),
        entry: entryToWire(result.entry),
      };
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

    subscribeActivity: subscribe,
  };
}
