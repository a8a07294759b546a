import type { Principal } from "@unimatrix/service-kit/auth";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer } from "@unimatrix/service-kit/testing";
import { AccessRechecks } from "../src/live/rechecks";
import { CubeAccess, grant, type Harness, newClient, newCube, newTenant, startHarness } from "./harness";

let h: Harness;
let user: string;
let tenantId: string;
beforeAll(async () => {
  h = await startHarness("cube_rechecks");
  const t = await newTenant(h, "rechecks");
  user = t.userToken;
  tenantId = t.tenantId;
});
afterAll(async () => {
  await h.close();
});

/** A READ client of a new cube, as its streams' principal. */
async function reader(name: string) {
  const owner = await newClient(h, user, `${name}-owner`);
  const { cubeId } = await newCube(h, owner.token, name);
  const client = await newClient(h, user, name);
  await grant(h, user, client.id, cubeId, CubeAccess.READ);
  const [row] = await h.sql<{ credential_id: string }>("SELECT credential_id::text FROM clients WHERE id = $1", [
    client.id,
  ]);
  const principal: Principal = { kind: "client", subjectId: client.id, tenantId };
  return { cubeId, client, principal, credentialId: row?.credential_id as string };
}

describe("access re-checks of open streams, batched per credential", () => {
  it("streams asking in one turn share one check; a fresh ask once it was sent gets its own; a periodic one takes it", async () => {
    const r = await reader("shared");
    const rechecks = new AccessRechecks(h.service.deps, 60_000);
    const asked = Array.from({ length: 10 }, () => rechecks.check(r.principal, r.cubeId, r.credentialId, true));
    for (const outcome of asked) expect(outcome).toBe(asked[0]);
    expect((await asked[0])?.kind).toBe("viewer");
    const fresh = rechecks.check(r.principal, r.cubeId, r.credentialId, true);
    expect(fresh).not.toBe(asked[0]);
    await fresh;
    expect(rechecks.check(r.principal, r.cubeId, r.credentialId, false)).toBe(fresh);
    // Another credential (a rotation) or another cube is another check.
    expect(rechecks.check(r.principal, r.cubeId, "other-credential", false)).not.toBe(fresh);
  });

  it("the periodic safety net takes a check sent less than reuseMs ago on the deps' clock, and sends its own after", async () => {
    const r = await reader("reuse-window");
    const clock = new ManualClock(Date.UTC(2026, 11, 3, 12));
    const rechecks = new AccessRechecks({ ...h.service.deps, clock }, 2_500);
    const first = rechecks.check(r.principal, r.cubeId, r.credentialId, false);
    await first;
    clock.advance(2_499);
    expect(rechecks.check(r.principal, r.cubeId, r.credentialId, false)).toBe(first);
    clock.advance(1);
    const second = rechecks.check(r.principal, r.cubeId, r.credentialId, false);
    expect(second).not.toBe(first);
    expect((await second).kind).toBe("viewer");
  });

  it("a fresh check asked after a revocation reads it, though a check of the same credential was just sent", async () => {
    const r = await reader("revoked");
    const rechecks = new AccessRechecks(h.service.deps, 60_000);
    const before = rechecks.check(r.principal, r.cubeId, r.credentialId, false);
    await before;
    await h.identity.revokeCubeGrant({ clientId: r.client.id, cubeId: r.cubeId }, asBearer(user));
    // The periodic safety net may take the earlier check; a doorbell's check never does.
    expect(rechecks.check(r.principal, r.cubeId, r.credentialId, false)).toBe(before);
    const after = rechecks.check(r.principal, r.cubeId, r.credentialId, true);
    expect(after).not.toBe(before);
    expect(await after).toEqual({ kind: "revoked", reason: "access to the cube was removed" });
    await h.identity.revokeClient({ clientId: r.client.id }, asBearer(user));
    expect(await rechecks.check(r.principal, r.cubeId, r.credentialId, true)).toEqual({
      kind: "revoked",
      reason: "client revoked",
    });
  });
});
