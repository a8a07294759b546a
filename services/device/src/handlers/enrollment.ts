import type { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { credentialKey } from "@unimatrix/service-kit/auth";
import { NotFoundError } from "@unimatrix/service-kit/errors";
import type { ServiceImpl } from "@unimatrix/service-kit/grpc";
import { optionalUuid, pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import { toEnrollToken } from "../convert";
import type { DeviceDeps } from "../deps";
import { actorOf, CALLERS, scopeOf, tokenOwner } from "../rules/access";
import { ttlSeconds } from "../rules/enroll";
import { pageOf } from "../rules/paging";
import { trimmed } from "../rules/request";
import { issueEnrollToken, knownSubject, listUnusedTokens, revokeEnrollToken } from "../store/tokens";

/** EnrollmentService: USER and CLIENT principals of a tenant (the operator none). */
export function enrollmentHandlers(deps: DeviceDeps): ServiceImpl<typeof EnrollmentService> {
  const { db, clock, pages } = deps;
  return {
    async issueEnrollToken(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.issueEnrollToken);
      const ttl = ttlSeconds(request.ttlSeconds);
      const label = trimmed("label", request.label);
      const owner = tokenOwner(scope, optionalUuid("owner_subject_id", request.ownerSubjectId) ?? null);
      // A USER may name itself or a subject its tenant's device records know (never another tenant's).
      if (owner !== scope.subjectId && !(await knownSubject(db, scope.tenantId, owner))) {
        throw new NotFoundError(`owner_subject_id ${owner} not found`);
      }
      const { row, token } = await issueEnrollToken(db, {
        tenantId: scope.tenantId,
        ownerSubjectId: owner,
        actorId: actorOf(scope),
        ttlSeconds: ttl,
        label,
        now: clock.now(),
      });
      return { enrollToken: toEnrollToken(row), token };
    },

    async listEnrollTokens(request, ctx) {
      const principal = await ctx.principal();
      const scope = scopeOf(principal, CALLERS.listEnrollTokens);
      const limit = pageSize("page_size", request.pageSize);
      const binding = { caller: credentialKey(principal) };
      const after = pages.enrollTokens.open(request.pageToken, binding);
      const rows = await listUnusedTokens(db, scope, clock.now(), after, limit + 1);
      const { page, nextPageToken } = pageOf(rows, limit, (last) =>
        pages.enrollTokens.seal({ at: last.created_at, id: last.id }, binding),
      );
      return { enrollTokens: page.map(toEnrollToken), nextPageToken };
    },

    async revokeEnrollToken(request, ctx) {
      const scope = scopeOf(await ctx.principal(), CALLERS.revokeEnrollToken);
      const id = requireUuid("enroll_token_id", request.enrollTokenId);
      const row = await revokeEnrollToken(db, scope, id, actorOf(scope), clock.now());
      return { enrollToken: toEnrollToken(row) };
    },
  };
}
