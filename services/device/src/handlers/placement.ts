import type { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { requireUuid } from "@unimatrix/service-kit/rules";
import { BEGIN_OUTCOME, END_OUTCOME, PLACE_OUTCOME, REBIND_OUTCOME, toPlacement } from "../convert";
import type { DeviceDeps } from "../deps";
import { actorOf, CALLERS, scopeOf } from "../rules/access";
import { beginRun, endRun, getPlacement, placeSession, rebindSession } from "../store/placements";

/**
 * PlacementService: USER/CLIENT principals (and the operator); a DEVICE may read its own placements.
 * Each write answers once its transaction committed and its notes are handed to the bus, without
 * waiting for Redis's reply (the database is the truth; a lost note heals from the audit trail).
 */
export function placementHandlers(deps: DeviceDeps): ServiceImpl<typeof PlacementService> {
  const { db, clock, publisher } = deps;
  return {
    async placeSession(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.placeSession);
      const session = request.rootSessionId;
      const device = requireUuid("device_id", request.deviceId);
      const result = await placeSession(db, scope, session, device, actorOf(scope), clock.now());
      publisher.ring(result.notes);
      const placement = "placement" in result && result.placement ? toPlacement(result.placement) : undefined;
      return { outcome: PLACE_OUTCOME[result.outcome], placement };
    },

    async getPlacement(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.getPlacement);
      const row = await getPlacement(db, scope, request.rootSessionId);
      return { placement: toPlacement(row) };
    },

    async rebindSession(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.rebindSession);
      const session = request.rootSessionId;
      const device = requireUuid("device_id", request.deviceId);
      const rev = request.expectedRev;
      const result = await rebindSession(db, scope, session, device, rev, actorOf(scope), clock.now());
      publisher.ring(result.notes);
      if (result.outcome === "gone") return { outcome: REBIND_OUTCOME.gone };
      return {
        outcome: REBIND_OUTCOME[result.outcome],
        placement: toPlacement(result.placement),
        previousDeviceId: result.previousDeviceId ?? "",
      };
    },

    async beginRun(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.beginRun);
      const session = request.rootSessionId;
      const run = request.runId;
      const result = await beginRun(db, scope, session, run, actorOf(scope), clock.now());
      publisher.ring(result.notes);
      if (result.outcome === "gone") return { outcome: BEGIN_OUTCOME.gone };
      return { outcome: BEGIN_OUTCOME[result.outcome], placement: toPlacement(result.placement) };
    },

    async endRun(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.endRun);
      const session = request.rootSessionId;
      const run = request.runId;
      const result = await endRun(db, scope, session, run, actorOf(scope), clock.now());
      publisher.ring(result.notes);
      if (result.outcome === "gone") return { outcome: END_OUTCOME.gone };
      return { outcome: END_OUTCOME[result.outcome], placement: toPlacement(result.placement) };
    },
  };
}
