import type { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import type { ServiceImpl } from "@unimatrix/service-kit";
import { toEnrollToken } from "../convert";
import { actorOf, CALLERS, scopeOf, tokenOwner } from "../rules/access";
import { ttlSeconds } from "../rules/enroll";
import { decodeTimeKey, encodeTimeKey, pageOf, tokenFilters } from "../rules/paging";
import { optionalUuid, pageSize, text, uuid } from "../rules/request";
import type { DeviceDeps } from "../service";
import { issueEnrollToken, listUnusedTokens, revokeEnrollToken } from "../store/tokens";

/** EnrollmentService: USER and CLIENT principals of a tenant (the operator may revoke a token). */
export function enrollmentHandlers(deps: DeviceDeps): ServiceImpl<typeof EnrollmentService> {
  const { db, clock } = deps;
  return {
    async issueEnrollToken(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.issueEnrollToken);
      const ttl = ttlSeconds(request.ttlSeconds);
      const label = text("label", request.label, 200);
      const named = optionalUuid("owner_subject_id", request.ownerSubjectId);
      const { row, token } = await issueEnrollToken(db, {
        tenantId: scope.tenantId,
        ownerSubjectId: tokenOwner(scope, named),
        actorId: actorOf(scope),
        ttlSeconds: ttl,
        label,
        now: clock.now(),
      });
      return { enrollToken: toEnrollToken(row), token };
    },

    async listEnrollTokens(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.listEnrollTokens);
      const limit = pageSize(request.pageSize);
      const filters = tokenFilters();
      const after = decodeTimeKey(request.pageToken, filters);
      const rows = await listUnusedTokens(db, scope, clock.now(), after, limit + 1);
      const { page, nextPageToken } = pageOf(rows, limit, (last) => encodeTimeKey(last.created_at, last.id, filters));
      return { enrollTokens: page.map(toEnrollToken), nextPageToken };
    },

    async revokeEnrollToken(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.revokeEnrollToken);
      const id = uuid("enroll_token_id", request.enrollTokenId);
      const row = await revokeEnrollToken(db, scope, id, actorOf(scope), clock.now());
      return { enrollToken: toEnrollToken(row) };
    },
  };
}
