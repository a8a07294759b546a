import type { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { optionalUuid, pageSize, requireUuid, UnimplementedError } from "@unimatrix/service-kit";
import { credentialKey } from "@unimatrix/service-kit/auth";
import type { StreamCounter } from "@unimatrix/service-kit/bus";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import {
  claimOutcomeToWire,
  claimToWire,
  decisionToWire,
  entryToWire,
  itemToWire,
  releaseOutcomeToWire,
} from "../convert";
import type { ActivityFeed } from "../live/feed";
import { subscribeActivity } from "../live/subscribe";
import { encodeCursor } from "../rules/cursor";
import { checkEntry } from "../rules/entry";
import { OffsetPages } from "../rules/paging";
import { name } from "../rules/request";
import { appendEntry, readActivity, readUnread } from "../store/activity";
import { listDecisions, recordDecision } from "../store/decisions";
import { ackEntry, claimEntry, releaseClaim } from "../store/reactions";
import type { CubeDeps } from "./deps";

/** ActivityService: the log, acks, claims, decisions and the live stream. */
export function activityHandlers(
  deps: CubeDeps,
  feed: ActivityFeed,
  streams?: StreamCounter,
): ServiceImpl<typeof ActivityService> {
  const subscribe = subscribeActivity(deps, feed, streams);
  /** Reads a cube's new rows on this replica now (a failed read is logged by the feed, which heals on its timer). */
  const wake = (cubeId: string) => void feed.wake(cubeId).catch(() => {});
  const decisionPages = new OffsetPages(deps.internalKey, "ListDecisions");
  return {
    async appendEntry(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const input = checkEntry(request);
      const entry = await appendEntry(deps, await ctx.principal(), cubeId, input);
      wake(cubeId);
      return { entry: entryToWire(entry) };
    },

    async readActivity(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const page = await readActivity(deps, await ctx.principal(), cubeId, request.cursor, size);
      return {
        items: page.items.map(itemToWire),
        nextCursor: page.last === page.after ? request.cursor : encodeCursor(cubeId, page.last),
        hasMore: page.hasMore,
      };
    },

    async readUnread(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const page = await readUnread(deps, await ctx.principal(), cubeId, size);
      return { items: page.items.map(itemToWire), cursor: encodeCursor(cubeId, page.last), hasMore: page.hasMore };
    },

    async ackEntry(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const entryId = requireUuid("entry_id", request.entryId);
      const result = await ackEntry(deps, await ctx.principal(), cubeId, entryId);
      if (result.newlyAcked) wake(cubeId);
      return { newlyAcked: result.newlyAcked, entry: entryToWire(result.entry) };
    },

    async claimEntry(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const entryId = requireUuid("entry_id", request.entryId);
      const result = await claimEntry(deps, await ctx.principal(), cubeId, entryId);
      if (result.outcome === "claimed") wake(cubeId);
      return {
        outcome: claimOutcomeToWire(result.outcome),
        claim: claimToWire(result.claim),
        entry: entryToWire(result.entry),
      };
    },

    async releaseClaim(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const entryId = requireUuid("entry_id", request.entryId);
      const result = await releaseClaim(deps, await ctx.principal(), cubeId, entryId);
      if (result.outcome === "released") wake(cubeId);
      return {
        outcome: releaseOutcomeToWire(result.outcome),
        claim: claimToWire(result.claim),
        entry: entryToWire(result.entry),
      };
    },

    async recordDecision(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const title = name("title", request.title);
      const rationale = request.rationale;
      const entryId = optionalUuid("entry_id", request.entryId);
      const decision = await recordDecision(deps, await ctx.principal(), cubeId, { title, rationale, entryId });
      return { decision: decisionToWire(decision) };
    },

    async listDecisions(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const binding = { caller: credentialKey(principal), filter: { cubeId } };
      const offset = decisionPages.offset(request.pageToken, binding);
      const page = decisionPages.page(
        await listDecisions(deps, principal, cubeId, offset, size),
        offset,
        size,
        binding,
      );
      return { decisions: page.rows.map(decisionToWire), nextPageToken: page.next };
    },

    subscribeActivity: subscribe,

    // Issue 16 (threads, claim leases, receipts, questions): contract first, handlers next.
    readThread: unimplemented("ReadThread"),
    renewClaim: unimplemented("RenewClaim"),
    takeOverClaim: unimplemented("TakeOverClaim"),
    checkFence: unimplemented("CheckFence"),
    listReceipts: unimplemented("ListReceipts"),
    listQuestions: unimplemented("ListQuestions"),
  };
}

/** A handler for an RPC whose contract landed before its implementation. */
export function unimplemented(method: string): () => never {
  return () => {
    throw new UnimplementedError(method);
  };
}
