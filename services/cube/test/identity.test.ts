import { status } from "@grpc/grpc-js";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import {
  CubeAccess,
  grant,
  type Harness,
  newClient,
  newCube,
  newTenant,
  OPERATOR_TOKEN,
  post,
  seat,
  startHarness,
} from "./harness";

let h: Harness;
beforeAll(async () => {
  h = await startHarness("cube_identity");
});
afterAll(async () => {
  await h.close();
});

describe("tenants and users", () => {
  it("only the operator creates tenants; names are unique", async () => {
    const t = await newTenant(h, "acme");
    expect(t.userToken).toMatch(/^umx_user_/);
    await expectStatus(newTenant(h, "acme"), status.ALREADY_EXISTS);
    await expectStatus(
      h.identity.createTenant({ name: "other", adminDisplayName: "x" }, asBearer(t.userToken)),
      status.PERMISSION_DENIED,
    );
    await expectStatus(
      h.identity.createTenant({ name: "", adminDisplayName: "x" }, asBearer(OPERATOR_TOKEN)),
      status.INVALID_ARGUMENT,
      "name",
    );
    await expectStatus(h.identity.createTenant({ name: "nobody", adminDisplayName: "x" }), status.UNAUTHENTICATED);
  });

  it("stores only digests of tokens", async () => {
    const t = await newTenant(h, "digests");
    const secret = t.userToken.split("_")[3] as string;
    const rows = await h.sql<{ n: string }>(
      "SELECT count(*)::text AS n FROM user_tokens WHERE encode(lookup_digest, 'hex') LIKE $1 OR encode(verifier_digest, 'escape') LIKE $1",
      [`%${secret}%`],
    );
    expect(rows[0]?.n).toBe("0");
    const lengths = await h.sql<{ l: number; v: number }>(
      "SELECT length(lookup_digest) AS l, length(verifier_digest) AS v FROM user_tokens LIMIT 1",
    );
    expect(lengths[0]).toEqual({ l: 32, v: 32 });
  });

  it("authenticates each token kind and refuses bad ones", async () => {
    const t = await newTenant(h, "auth");
    const c = await newClient(h, t.userToken, "agent");
    const { cubeId } = await newCube(h, c.token);
    const s = await seat(h, c.token, cubeId);
    const user = await h.identity.authenticate({ token: t.userToken });
    expect(user.principal?.kind).toBe(PrincipalKind.USER);
    expect(user.principal?.tenantId).toBe(t.tenantId);
    const client = await h.identity.authenticate({ token: c.token });
    expect(client.principal?.kind).toBe(PrincipalKind.CLIENT);
    expect(client.principal?.subjectId).toBe(c.id);
    const drone = await h.identity.authenticate({ token: s.token });
    expect(drone.principal).toMatchObject({
      kind: PrincipalKind.DRONE_SESSION,
      clientId: c.id,
      cubeId,
      droneId: s.droneId,
      displayName: s.label,
    });
    expect(drone.principal?.expiresAt).toBeDefined();
    const op = await h.identity.authenticate({ token: OPERATOR_TOKEN });
    expect(op.principal?.kind).toBe(PrincipalKind.OPERATOR);
    await expectStatus(h.identity.authenticate({ token: "" }), status.INVALID_ARGUMENT, "token");
    await expectStatus(h.identity.authenticate({ token: "nonsense" }), status.UNAUTHENTICATED);
    const forged = `${c.token.slice(0, -4)}AAAA`;
    await expectStatus(h.identity.authenticate({ token: forged }), status.UNAUTHENTICATED);
  });
});

describe("clients", () => {
  it("rotation replaces the credential and revokes every drone session of the client", async () => {
    const t = await newTenant(h, "rotate");
    const c = await newClient(h, t.userToken, "agent");
    const { cubeId } = await newCube(h, c.token);
    const s1 = await seat(h, c.token, cubeId);
    const s2 = await seat(h, c.token, cubeId);
    await post(h, s1.token, cubeId, "before");
    const rotated = await h.identity.rotateClientCredential({ clientId: c.id }, asBearer(t.userToken));
    expect(rotated.revokedSessionCount).toBe(2);
    expect(rotated.token).not.toBe(c.token);
    await expectStatus(post(h, s1.token, cubeId, "after"), status.UNAUTHENTICATED);
    await expectStatus(post(h, s2.token, cubeId, "after"), status.UNAUTHENTICATED);
    await expectStatus(h.cube.listCubes({}, asBearer(c.token)), status.UNAUTHENTICATED);
    const cubes = await h.cube.listCubes({}, asBearer(rotated.token));
    expect(cubes.cubes.map((x) => x.id)).toEqual([cubeId]);
    // The client may rotate itself.
    const again = await h.identity.rotateClientCredential({ clientId: c.id }, asBearer(rotated.token));
    expect(again.revokedSessionCount).toBe(0);
  });

  it("revocation is immediate and idempotent; active names are unique", async () => {
    const t = await newTenant(h, "revoke");
    const c = await newClient(h, t.userToken, "agent");
    await expectStatus(newClient(h, t.userToken, "agent"), status.ALREADY_EXISTS);
    const r1 = await h.identity.revokeClient({ clientId: c.id }, asBearer(t.userToken));
    expect(r1.client?.revokedAt).toBeDefined();
    const r2 = await h.identity.revokeClient({ clientId: c.id }, asBearer(t.userToken));
    expect(r2.client?.revokedAt).toEqual(r1.client?.revokedAt);
    await expectStatus(h.identity.authenticate({ token: c.token }), status.UNAUTHENTICATED);
    await expectStatus(
      h.identity.rotateClientCredential({ clientId: c.id }, asBearer(t.userToken)),
      status.FAILED_PRECONDITION,
    );
    const reused = await newClient(h, t.userToken, "agent");
    expect(reused.id).not.toBe(c.id);
    const list = await h.identity.listClients({}, asBearer(t.userToken));
    expect(list.clients.map((x) => x.id)).toEqual([reused.id]);
    const all = await h.identity.listClients({ includeRevoked: true }, asBearer(t.userToken));
    expect(all.clients.map((x) => x.id)).toEqual([c.id, reused.id]);
    const self = await h.identity.listClients({ includeRevoked: true }, asBearer(reused.token));
    expect(self.clients.map((x) => x.id)).toEqual([reused.id]);
  });

  it("grants: read < write < manage; the owner's grant stays; readable-only cubes deny manage", async () => {
    const t = await newTenant(h, "grants");
    const owner = await newClient(h, t.userToken, "owner");
    const other = await newClient(h, t.userToken, "other");
    const { cubeId } = await newCube(h, owner.token);
    await expectStatus(h.cube.getCube({ cubeId }, asBearer(other.token)), status.NOT_FOUND);
    await grant(h, owner.token, other.id, cubeId, CubeAccess.READ);
    const got = await h.cube.getCube({ cubeId }, asBearer(other.token));
    expect(got.cube?.callerAccess).toBe(CubeAccess.READ);
    await expectStatus(h.cube.updateCube({ cubeId, directive: "x" }, asBearer(other.token)), status.PERMISSION_DENIED);
    await expectStatus(grant(h, other.token, other.id, cubeId, CubeAccess.MANAGE), status.PERMISSION_DENIED);
    await expectStatus(
      h.identity.setCubeGrant({ clientId: other.id, cubeId, access: CubeAccess.UNSPECIFIED }, asBearer(t.userToken)),
      status.INVALID_ARGUMENT,
      "access",
    );
    await expectStatus(
      h.identity.setCubeGrant({ clientId: other.id, cubeId, access: 9 as CubeAccess }, asBearer(t.userToken)),
      status.INVALID_ARGUMENT,
      "access",
    );
    await grant(h, t.userToken, other.id, cubeId, CubeAccess.MANAGE);
    const updated = await h.cube.updateCube({ cubeId, directive: "new" }, asBearer(other.token));
    expect(updated.cube?.directive).toBe("new");
    await expectStatus(
      h.identity.revokeCubeGrant({ clientId: owner.id, cubeId }, asBearer(t.userToken)),
      status.FAILED_PRECONDITION,
    );
    expect((await h.identity.revokeCubeGrant({ clientId: other.id, cubeId }, asBearer(t.userToken))).removed).toBe(
      true,
    );
    expect((await h.identity.revokeCubeGrant({ clientId: other.id, cubeId }, asBearer(t.userToken))).removed).toBe(
      false,
    );
    await expectStatus(h.cube.getCube({ cubeId }, asBearer(other.token)), status.NOT_FOUND);
    const grants = await h.identity.listCubeGrants({ cubeId }, asBearer(t.userToken));
    expect(grants.grants.map((g) => [g.clientId, g.access])).toEqual([[owner.id, CubeAccess.MANAGE]]);
  });
});

describe("isolation", () => {
  it("a foreign tenant's ids answer NOT_FOUND on every identity RPC", async () => {
    const a = await newTenant(h, "iso-a");
    const b = await newTenant(h, "iso-b");
    const ca = await newClient(h, a.userToken, "a-agent");
    const cb = await newClient(h, b.userToken, "b-agent");
    const { cubeId } = await newCube(h, ca.token);
    await expectStatus(h.identity.rotateClientCredential({ clientId: ca.id }, asBearer(b.userToken)), status.NOT_FOUND);
    await expectStatus(h.identity.revokeClient({ clientId: ca.id }, asBearer(b.userToken)), status.NOT_FOUND);
    await expectStatus(h.identity.issueUserToken({ userId: a.userId }, asBearer(b.userToken)), status.NOT_FOUND);
    await expectStatus(
      h.identity.setCubeGrant({ clientId: cb.id, cubeId, access: CubeAccess.READ }, asBearer(b.userToken)),
      status.NOT_FOUND,
    );
    await expectStatus(
      h.identity.setCubeGrant({ clientId: cb.id, cubeId, access: CubeAccess.READ }, asBearer(a.userToken)),
      status.NOT_FOUND,
    );
    await expectStatus(
      h.identity.revokeCubeGrant({ clientId: ca.id, cubeId }, asBearer(b.userToken)),
      status.NOT_FOUND,
    );
    expect((await h.identity.listCubeGrants({ cubeId }, asBearer(b.userToken))).grants).toEqual([]);
    expect(
      (await h.identity.listClients({ includeRevoked: true }, asBearer(b.userToken))).clients.map((c) => c.id),
    ).toEqual([cb.id]);
    // a's client is untouched
    expect((await h.identity.authenticate({ token: ca.token })).principal?.subjectId).toBe(ca.id);
  });

  it("users issue more users and tokens in their own tenant", async () => {
    const t = await newTenant(h, "users");
    const bob = await h.identity.issueUserToken({ displayName: "bob" }, asBearer(t.userToken));
    expect(bob.user?.tenantId).toBe(t.tenantId);
    const again = await h.identity.issueUserToken({ userId: bob.user?.id as string }, asBearer(t.userToken));
    expect(again.user?.id).toBe(bob.user?.id);
    expect(again.token).not.toBe(bob.token);
    await expectStatus(
      h.identity.issueUserToken({ userId: "not-a-uuid" }, asBearer(t.userToken)),
      status.INVALID_ARGUMENT,
      "user_id",
    );
    const c = await newClient(h, t.userToken, "agent");
    await expectStatus(h.identity.issueUserToken({ displayName: "eve" }, asBearer(c.token)), status.PERMISSION_DENIED);
  });
});
