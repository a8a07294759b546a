import { type ActivityService, RenewOutcome } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { credentialKey } from "@unimatrix/service-kit/auth";
import type { StreamCounter } from "@unimatrix/service-kit/bus";
import { InvalidArgumentError } from "@unimatrix/service-kit/errors";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import {
  claimOutcomeToWire,
  claimToWire,
  decisionToWire,
  entryToWire,
  itemToWire,
  receiptToWire,
  releaseOutcomeToWire,
  takeOverOutcomeToWire,
} from "../convert";
import type { CubeDeps } from "../deps";
import { runOp } from "../effects";
import type { DeliveryRecorder } from "../live/deliveries";
import { type ActivityFeed, offerCommitted } from "../live/feed";
import { subscribeActivity } from "../live/subscribe";
import { ackEntry } from "../ops/ack";
import { appendEntry } from "../ops/append";
import { claimEntry } from "../ops/claim";
import { noteRead } from "../ops/note-read";
import { readUnread } from "../ops/read-unread";
import { recordDecision } from "../ops/record-decision";
import { releaseClaim } from "../ops/release";
import { renewClaim } from "../ops/renew";
import { replyToEntry } from "../ops/reply";
import { takeOverClaim } from "../ops/take-over";
import { readActivity } from "../reads/activity";
import { checkFence, listReceipts } from "../reads/claims";
import { listDecisions } from "../reads/decisions";
import { listQuestions, readThread } from "../reads/threads";
import { encodeCursor } from "../rules/cursor";
import { checkEntry, entryRef, optionalEntryRef } from "../rules/entry";
import { OffsetPages } from "../rules/paging";
import { name } from "../rules/request";

/** ActivityService: the log, acks, claims, decisions and the live stream. */
export function activityHandlers(
  deps: CubeDeps,
  feed: ActivityFeed,
  streams?: StreamCounter,
  deliveries?: DeliveryRecorder,
): ServiceImpl<typeof ActivityService> {
  const subscribe = subscribeActivity(deps, feed, streams, deliveries);
  /** Reads a cube's new rows on this replica now (a failed read is logged by the feed, which heals on its timer). */
  const wake = (cubeId: string) => void feed.wake(cubeId).catch(() => {});
  const decisionPages = new OffsetPages(deps.internalKey, "ListDecisions");
  const threadPages = new OffsetPages(deps.internalKey, "ReadThread");
  const questionPages = new OffsetPages(deps.internalKey, "ListQuestions");
  return {
    async appendEntry(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const input = checkEntry(request);
      const principal = await ctx.principal();
      const { replyTo } = input;
      const op = replyTo
        ? replyToEntry(deps, principal, cubeId, { ...input, replyTo })
        : appendEntry(deps, principal, cubeId, input);
      // This replica's streams get the committed entry at once, before the doorbell rings.
      const entry = await runOp(deps, op, (item) => void offerCommitted(feed, item).catch(() => {}));
      return { entry: entryToWire(entry) };
    },

    async readActivity(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const page = await readActivity(deps, principal, cubeId, request.cursor, size);
      if (!request.peek) await runOp(deps, noteRead(deps, principal, page.items));
      return {
        items: page.items.map(itemToWire),
        nextCursor: page.last === page.after ? request.cursor : encodeCursor(cubeId, page.last),
        hasMore: page.hasMore,
      };
    },

    async readUnread(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const page = await runOp(deps, readUnread(deps, principal, cubeId, size, request.peek, request.confirmThrough));
      if (!request.peek) await runOp(deps, noteRead(deps, principal, page.items));
      return { items: page.items.map(itemToWire), cursor: encodeCursor(cubeId, page.last), hasMore: page.hasMore };
    },

    async ackEntry(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const result = await runOp(deps, ackEntry(deps, await ctx.principal(), cubeId, ref, request.quiet));
      if (result.newlyAcked) wake(cubeId);
      return { newlyAcked: result.newlyAcked, entry: entryToWire(result.entry) };
    },

    async claimEntry(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const result = await runOp(deps, claimEntry(deps, await ctx.principal(), cubeId, ref));
      if (result.outcome === "claimed") wake(cubeId);
      return {
        outcome: claimOutcomeToWire(result.outcome),
        claim: claimToWire(result.claim),
        entry: entryToWire(result.entry),
      };
    },

    async releaseClaim(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const result = await runOp(deps, releaseClaim(deps, await ctx.principal(), cubeId, ref));
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
      const entry = optionalEntryRef(
        { field: "entry_id", id: request.entryId },
        { field: "entry_position", position: request.entryPosition },
      );
      const decision = await runOp(
        deps,
        recordDecision(deps, await ctx.principal(), cubeId, { title, rationale, ...(entry ? { entry } : {}) }),
      );
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

    async readThread(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const filter = { cubeId, entryId: request.entryId, entryPosition: String(request.entryPosition) };
      const binding = { caller: credentialKey(principal), filter };
      const offset = threadPages.offset(request.pageToken, binding);
      const ref = entryRef(request);
      const thread = await readThread(deps, principal, cubeId, ref, offset, size);
      const read = [...(thread.root ? [thread.root] : []), ...thread.replies.slice(0, size)];
      await runOp(deps, noteRead(deps, principal, read));
      const page = threadPages.page(thread.replies, offset, size, binding);
      return {
        root: thread.root ? entryToWire(thread.root) : undefined,
        replies: page.rows.map(entryToWire),
        nextPageToken: page.next,
      };
    },

    async renewClaim(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const result = await runOp(deps, renewClaim(deps, await ctx.principal(), cubeId, ref));
      return {
        outcome: result.outcome === "renewed" ? RenewOutcome.RENEWED : RenewOutcome.NOT_HOLDER,
        claim: claimToWire(result.claim),
      };
    },

    async takeOverClaim(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const fence = requireFence(request.fence);
      const result = await runOp(deps, takeOverClaim(deps, await ctx.principal(), cubeId, ref, fence));
      if (result.outcome === "take_over") wake(cubeId);
      return { outcome: takeOverOutcomeToWire(result.outcome), claim: claimToWire(result.claim) };
    },

    async checkFence(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const fence = requireFence(request.fence);
      const result = await checkFence(deps, await ctx.principal(), cubeId, ref, fence);
      return { holds: result.holds, claim: claimToWire(result.claim) };
    },

    async listReceipts(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const ref = entryRef(request);
      const receipts = await listReceipts(deps, await ctx.principal(), cubeId, ref);
      return { receipts: receipts.map(receiptToWire) };
    },

    async listQuestions(request, ctx) {
      const cubeId = requireUuid("cube_id", request.cubeId);
      const size = pageSize("page_size", request.pageSize);
      const principal = await ctx.principal();
      const binding = {
        caller: credentialKey(principal),
        filter: { cubeId, includeAnswered: request.includeAnswered },
      };
      const offset = questionPages.offset(request.pageToken, binding);
      const page = questionPages.page(
        await listQuestions(deps, principal, cubeId, request.includeAnswered, offset, size),
        offset,
        size,
        binding,
      );
      return {
        questions: page.rows.map((q) => ({
          entry: entryToWire(q.entry),
          answer: q.answer ? entryToWire(q.answer) : undefined,
        })),
        nextPageToken: page.next,
      };
    },
  };
}

/** A fence from a request (the contract requires at least 1). */
function requireFence(fence: bigint): bigint {
  if (fence < 1n) throw new InvalidArgumentError("fence", "must be at least 1");
  return fence;
}
