import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { credentialKey } from "@unimatrix/service-kit/auth";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { optionalUuid, pageSize } from "@unimatrix/service-kit/rules";
import { toAuditEvent } from "../convert";
import type { DeviceDeps } from "../deps";
import { CALLERS, listScope, scopeOf } from "../rules/access";
import { auditTypeFilter } from "../rules/catalog";
import { auditFilters, pageOf } from "../rules/paging";
import { timeRange } from "../rules/request";
import { listAudit } from "../store/audit";

/** AuditService: USER callers read their tenant's trail, CLIENT callers what they own, the operator all. */
export function auditHandlers(deps: DeviceDeps): ServiceImpl<typeof AuditService> {
  const { db, pages } = deps;
  return {
    async listAuditEvents(request, ctx) {
      const principal = await ctx.principal();
      const scope = scopeOf(principal, CALLERS.listAuditEvents);
      const limit = pageSize("page_size", request.pageSize);
      const deviceId = optionalUuid("device_id", request.deviceId) ?? null;
      const types = auditTypeFilter(request.eventTypes);
      const { start, end } = timeRange(
        request.startTime ? timestampDate(request.startTime) : null,
        request.endTime ? timestampDate(request.endTime) : null,
      );
      const binding = { caller: credentialKey(principal), filter: auditFilters({ deviceId, types, start, end }) };
      const { tenantId, ownerSubjectId } = listScope(scope);
      const rows = await listAudit(db, {
        tenantId,
        ownerSubjectId,
        deviceId,
        types,
        start,
        end,
        beforeSeq: pages.audit.open(request.pageToken, binding),
        limit: limit + 1,
      });
      const { page, nextPageToken } = pageOf(rows, limit, (last) => pages.audit.seal(last.seq, binding));
      return { events: page.map(toAuditEvent), nextPageToken };
    },
  };
}
