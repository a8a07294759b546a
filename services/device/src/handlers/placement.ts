import {
  BeginRunOutcome,
  EndRunOutcome,
  type PlacementService,
  PlaceSessionOutcome,
  RebindSessionOutcome,
} from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit";
import { actorOf, scopeOf } from "../access";
import { beginRun, endRun, getPlacement, placeSession, rebindSession } from "../store/placements";
import { toPlacement } from "./convert";
import type { HandlerDeps } from "./deps";
import { expectedRev, opaqueId, uuid } from "./validate";

const PLACE = {
  bound: PlaceSessionOutcome.BOUND,
  same: PlaceSessionOutcome.SAME,
  device_conflict: PlaceSessionOutcome.DEVICE_CONFLICT,
  device_not_found: PlaceSessionOutcome.DEVICE_NOT_FOUND,
  device_revoked: PlaceSessionOutcome.DEVICE_REVOKED,
} as const;

const REBIND = {
  rebound: RebindSessionOutcome.REBOUND,
  idempotent: RebindSessionOutcome.IDEMPOTENT,
  rev_conflict: RebindSessionOutcome.REV_CONFLICT,
  active_run: RebindSessionOutcome.ACTIVE_RUN,
  gone: RebindSessionOutcome.GONE,
  device_not_found: RebindSessionOutcome.DEVICE_NOT_FOUND,
  device_revoked: RebindSessionOutcome.DEVICE_REVOKED,
} as const;

const BEGIN = {
  begun: BeginRunOutcome.BEGUN,
  already_active: BeginRunOutcome.ALREADY_ACTIVE,
  busy: BeginRunOutcome.BUSY,
  gone: BeginRunOutcome.GONE,
} as const;

const END = {
  ended: EndRunOutcome.ENDED,
  not_active: EndRunOutcome.NOT_ACTIVE,
  other_run: EndRunOutcome.OTHER_RUN,
  gone: EndRunOutcome.GONE,
} as const;

/** PlacementService: USER/CLIENT principals (and the operator); a DEVICE may read its own placements. */
export function placementHandlers(deps: HandlerDeps): ServiceImpl<typeof PlacementService> {
  const { db, clock, publisher } = deps;
  const writers = ["all", "tenant", "owner"] as const;
  return {
    async placeSession(request, ctx) {
      const scope = scopeOf(await ctx.principal(), writers);
      const session = opaqueId("root_session_id", request.rootSessionId);
      const device = uuid("device_id", request.deviceId);
      const result = await placeSession(db, scope, session, device, actorOf(scope), clock.now());
      await publisher.publish(result.notes);
      const placement = "placement" in result && result.placement ? toPlacement(result.placement) : undefined;
      return { outcome: PLACE[result.outcome], placement };
    },

    async getPlacement(request, ctx) {
      const scope = scopeOf(await ctx.principal(), [...writers, "device"]);
      const row = await getPlacement(db, scope, opaqueId("root_session_id", request.rootSessionId));
      return { placement: toPlacement(row) };
    },

    async rebindSession(request, ctx) {
      const scope = scopeOf(await ctx.principal(), writers);
      const session = opaqueId("root_session_id", request.rootSessionId);
      const device = uuid("device_id", request.deviceId);
      const rev = expectedRev(request.expectedRev);
      const result = await rebindSession(db, scope, session, device, rev, actorOf(scope), clock.now());
      await publisher.publish(result.notes);
      if (result.outcome === "gone") return { outcome: REBIND.gone };
      return {
        outcome: REBIND[result.outcome],
        placement: toPlacement(result.placement),
        previousDeviceId: result.previousDeviceId ?? "",
      };
    },

    async beginRun(request, ctx) {
      const scope = scopeOf(await ctx.principal(), writers);
      const session = opaqueId("root_session_id", request.rootSessionId);
      const run = opaqueId("run_id", request.runId);
      const result = await beginRun(db, scope, session, run, actorOf(scope), clock.now());
      await publisher.publish(result.notes);
      if (result.outcome === "gone") return { outcome: BEGIN.gone };
      return { outcome: BEGIN[result.outcome as keyof typeof BEGIN], placement: toPlacement(result.placement) };
    },

    async endRun(request, ctx) {
      const scope = scopeOf(await ctx.principal(), writers);
      const session = opaqueId("root_session_id", request.rootSessionId);
      const run = opaqueId("run_id", request.runId);
      const result = await endRun(db, scope, session, run, actorOf(scope), clock.now());
      await publisher.publish(result.notes);
      if (result.outcome === "gone") return { outcome: END.gone };
      return { outcome: END[result.outcome as keyof typeof END], placement: toPlacement(result.placement) };
    },
  };
}
