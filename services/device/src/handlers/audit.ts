import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit";
import { toAuditEvent } from "../convert";
import { CALLERS, listScope, scopeOf } from "../rules/access";
import { auditTypeFilter } from "../rules/catalog";
import { auditFilters, decodeSeqKey, encodeSeqKey, pageOf } from "../rules/paging";
import { optionalUuid, pageSize, timeRange } from "../rules/request";
import type { DeviceDeps } from "../service";
import { listAudit } from "../store/audit";

/** AuditService: USER callers read their tenant's trail, CLIENT callers what they own, the operator all. */
export function auditHandlers(deps: DeviceDeps): ServiceImpl<typeof AuditService> {
  const { db } = deps;
  return {
    async listAuditEvents(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.listAuditEvents);
      const limit = pageSize(request.pageSize);
      const deviceId = optionalUuid("device_id", request.deviceId);
      const types = auditTypeFilter(request.eventTypes);
      const { start, end } = timeRange(
        request.startTime ? timestampDate(request.startTime) : null,
        request.endTime ? timestampDate(request.endTime) : null,
      );
      const filters = auditFilters({ deviceId, types, start, end });
      const { tenantId, ownerSubjectId } = listScope(scope);
      const rows = await listAudit(db, {
        tenantId,
        ownerSubjectId,
        deviceId,
        types,
        start,
        end,
        beforeSeq: decodeSeqKey(request.pageToken, filters),
        limit: limit + 1,
      });
      const { page, nextPageToken } = pageOf(rows, limit, (last) => encodeSeqKey(last.seq, filters));
      return { events: page.map(toAuditEvent), nextPageToken };
    },
  };
}
