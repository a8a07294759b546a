import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { InvalidArgumentError, type ServiceImpl } from "@unimatrix/service-kit";
import { scopeOf } from "../access";
import { type AuditType, listAudit } from "../store/audit";
import { auditTypeFromWire, toAuditEvent } from "./convert";
import type { HandlerDeps } from "./deps";
import { decodePageToken, encodePageToken, tokenBigint } from "./paging";
import { pageSize, uuid } from "./validate";

/** AuditService: USER callers read their tenant's trail, CLIENT callers what they own, the operator all. */
export function auditHandlers(deps: HandlerDeps): ServiceImpl<typeof AuditService> {
  const { db } = deps;
  return {
    async listAuditEvents(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["all", "tenant", "owner"]);
      const limit = pageSize(request.pageSize);
      const deviceId = request.deviceId === "" ? null : uuid("device_id", request.deviceId);
      const types: AuditType[] = [];
      for (const wire of request.eventTypes) {
        const type = auditTypeFromWire(wire);
        if (!type) throw new InvalidArgumentError("event_types", "must not contain UNSPECIFIED or unknown types");
        if (!types.includes(type)) types.push(type);
      }
      types.sort();
      const start = request.startTime ? timestampDate(request.startTime) : null;
      const end = request.endTime ? timestampDate(request.endTime) : null;
      if (start && end && end.getTime() < start.getTime()) {
        throw new InvalidArgumentError("end_time", "must not be before start_time");
      }
      const filters = { m: "audit", deviceId, types, s: start?.getTime() ?? null, e: end?.getTime() ?? null };
      const key = decodePageToken(request.pageToken, filters, 1);
      const rows = await listAudit(db, {
        tenantId: scope.kind === "all" ? null : scope.tenantId,
        ownerSubjectId: scope.kind === "owner" ? scope.subjectId : null,
        deviceId,
        types,
        start,
        end,
        beforeSeq: key ? tokenBigint(key[0] as string) : null,
        limit: limit + 1,
      });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        events: page.map(toAuditEvent),
        nextPageToken: rows.length > limit && last ? encodePageToken([last.seq.toString()], filters) : "",
      };
    },
  };
}
