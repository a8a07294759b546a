import { randomUUID } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { PUBLIC_SERVICES } from "@unimatrix/app";
import { createClient } from "@unimatrix/service-kit/grpc";
import { expectStatus, validRequest } from "@unimatrix/service-kit/testing";
import { as, count, type Harness, OPERATOR, startHarness, tenant } from "./harness";

/** RPCs whose request carries its own credential and need no caller principal. */
const PRINCIPAL_FREE = new Set(["EnrollDevice", "Authenticate"]);

describe("the operator manages tenants, not their devices", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("device_operator");
  });
  afterAll(async () => {
    await h?.close();
  });

  test("every device RPC answers the operator PERMISSION_DENIED and changes nothing", async () => {
    const tables = ["enroll_tokens", "devices", "placements", "run_claims", "audit_events"];
    const before = await Promise.all(tables.map((t) => count(h, t)));
    let called = 0;
    for (const service of PUBLIC_SERVICES.device) {
      const client = createClient(service, `127.0.0.1:${h.service.port}`) as unknown as Record<string, unknown>;
      for (const method of service.methods) {
        if (PRINCIPAL_FREE.has(method.name)) continue;
        const request = validRequest(method.input);
        const call = client[method.localName] as (r: unknown, m: unknown) => Promise<unknown>;
        await expectStatus(call(request, as(OPERATOR)), status.PERMISSION_DENIED).catch((error: Error) => {
          throw new Error(`${method.name}: ${error.message}`);
        });
        called++;
      }
      (client as unknown as { close(): void }).close();
    }
    expect(called).toBe(15);
    expect(await Promise.all(tables.map((t) => count(h, t)))).toEqual(before);
  });

  test("a USER naming a subject outside its tenant (or unknown) as token owner gets NOT_FOUND", async () => {
    const a = tenant();
    const b = tenant();
    await h.enrollment.issueEnrollToken({ ttlSeconds: 60 }, as(a.user));
    const before = await count(h, "enroll_tokens");
    for (const subject of [a.user.subjectId, randomUUID()]) {
      await expectStatus(
        h.enrollment.issueEnrollToken({ ttlSeconds: 60, ownerSubjectId: subject }, as(b.user)),
        status.NOT_FOUND,
        "owner_subject_id",
      );
    }
    expect(await count(h, "enroll_tokens")).toBe(before);
    const own = await h.enrollment.issueEnrollToken({ ttlSeconds: 60, ownerSubjectId: b.user.subjectId }, as(b.user));
    expect(own.enrollToken?.owner?.subjectId).toBe(b.user.subjectId);
  });
});
