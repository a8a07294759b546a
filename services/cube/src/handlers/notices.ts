import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { NoticeService } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { requireUuid } from "@unimatrix/service-kit/rules";
import type { CubeDeps } from "../deps";
import { runOp } from "../effects";
import { watchNotices } from "../live/notices";
import { bindSession } from "../ops/bind-session";
import { confirmNotice } from "../ops/confirm-notice";
import { machineOf } from "../rules/access";

/** NoticeService: a machine's notices (MACHINE principals only; presence relays them over the Link). */
export function noticeHandlers(deps: CubeDeps): ServiceImpl<typeof NoticeService> {
  return {
    async *watchNotices(_request, ctx) {
      const caller = machineOf(await ctx.principal());
      yield* watchNotices(deps, caller, ctx);
    },

    async confirmNotice(request, ctx) {
      const caller = machineOf(await ctx.principal());
      const noticeId = requireUuid("notice_id", request.noticeId);
      const newlyConfirmed = await runOp(deps, confirmNotice(deps, caller.tenantId, caller.machineId, noticeId));
      return { newlyConfirmed };
    },

    async bindSession(request, ctx) {
      const caller = machineOf(await ctx.principal());
      const bound = await runOp(deps, bindSession(deps, caller, request.sessionToken, request.unbind));
      return {
        droneId: bound.droneId,
        cubeId: bound.cubeId,
        expiresAt: timestampFromMs(bound.expiresAt.getTime()),
        changed: bound.changed,
      };
    },
  };
}
