import type { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { NotFoundError, type ServiceImpl } from "@unimatrix/service-kit";
import { actorOf, scopeOf } from "../access";
import { issueEnrollToken, knownSubject, listUnusedTokens, revokeEnrollToken } from "../store/tokens";
import { toEnrollToken } from "./convert";
import type { HandlerDeps } from "./deps";
import { decodePageToken, encodePageToken, tokenDate } from "./paging";
import { pageSize, text, ttlSeconds, uuid } from "./validate";

/** EnrollmentService: USER and CLIENT principals of a tenant (the operator may revoke a token). */
export function enrollmentHandlers(deps: HandlerDeps): ServiceImpl<typeof EnrollmentService> {
  const { db, clock } = deps;
  return {
    async issueEnrollToken(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["tenant", "owner"]);
      const ttl = ttlSeconds(request.ttlSeconds);
      const label = text("label", request.label, 200);
      const owner = request.ownerSubjectId === "" ? null : uuid("owner_subject_id", request.ownerSubjectId);
      if (scope.kind !== "tenant" && scope.kind !== "owner") throw new Error("unreachable scope");
      // A CLIENT may only issue for itself; naming anyone else is NOT_FOUND (no oracle).
      if (owner !== null && scope.kind === "owner" && owner !== scope.subjectId) {
        throw new NotFoundError(`owner_subject_id ${owner} not found`);
      }
      // A USER may name itself or a subject its tenant's device records know (never another tenant's).
      if (owner !== null && owner !== scope.subjectId && !(await knownSubject(db, scope.tenantId, owner))) {
        throw new NotFoundError(`owner_subject_id ${owner} not found`);
      }
      const { row, token } = await issueEnrollToken(db, {
        tenantId: scope.tenantId,
        ownerSubjectId: owner ?? scope.subjectId,
        actorId: actorOf(scope),
        ttlSeconds: ttl,
        label,
        now: clock.now(),
      });
      return { enrollToken: toEnrollToken(row), token };
    },

    async listEnrollTokens(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["tenant", "owner"]);
      const limit = pageSize(request.pageSize);
      if (scope.kind !== "tenant" && scope.kind !== "owner") throw new Error("unreachable scope");
      const filters = { m: "tokens" };
      const key = decodePageToken(request.pageToken, filters, 2);
      const after = key ? { createdAt: tokenDate(key[0] as string), id: uuid("page_token", key[1] as string) } : null;
      const rows = await listUnusedTokens(db, scope, clock.now(), after, limit + 1);
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        enrollTokens: page.map(toEnrollToken),
        nextPageToken:
          rows.length > limit && last ? encodePageToken([String(last.created_at.getTime()), last.id], filters) : "",
      };
    },

    async revokeEnrollToken(request, ctx) {
      const scope = scopeOf(await ctx.principal(), ["tenant", "owner", "all"]);
      const id = uuid("enroll_token_id", request.enrollTokenId);
      const row = await revokeEnrollToken(db, scope, id, actorOf(scope), clock.now());
      return { enrollToken: toEnrollToken(row) };
    },
  };
}
