import * as net from "node:net";
import { status } from "@grpc/grpc-js";
import { asBearer, eventually, expectStatus } from "@unimatrix/service-kit/testing";
import { AUTH_CACHE_DOWN_MAX_AGE_MS } from "../src/store/auth-cache";
import {
  CubeAccess,
  grant,
  type Harness,
  newClient,
  newCube,
  newTenant,
  post,
  type Replica,
  seat,
  startHarness,
} from "./harness";

/** A Redis URL on a port nothing listens on: that replica's bus is down for the whole suite. */
async function unreachableRedis(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `redis://127.0.0.1:${port}`;
}

/** The gRPC code of a call (0 when it succeeded). */
async function codeOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return status.OK;
  } catch (error) {
    return (error as { code: number }).code;
  }
}

// With the bus up a cached entry lives 60 s: anything refused well within that was invalidated.
const AT_ONCE_MS = 3_000;

let h: Harness;
let b: Replica;
let cut: Replica;
beforeAll(async () => {
  h = await startHarness("cube_auth_cache");
  b = await h.replica();
  cut = await h.replica({ redisUrl: await unreachableRedis() });
});
afterAll(() => h.close());

describe("auth cache across replicas (one schema, one bus)", () => {
  test("a token and its access are served from memory: a row changed behind the service's back is not seen", async () => {
    const t = await newTenant(h, "cached");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token, "c");
    expect((await b.cube.getCube({ cubeId }, asBearer(owner.token))).cube?.id).toBe(cubeId);
    // Revoked by SQL, no doorbell: replica b still trusts what it cached (this is what the bus is for).
    await h.sql("UPDATE clients SET revoked_at = now() WHERE id = $1::uuid", [owner.id]);
    expect((await b.cube.getCube({ cubeId }, asBearer(owner.token))).cube?.id).toBe(cubeId);
    // A replica that never saw the token asks the database.
    await expectStatus(cut.cube.getCube({ cubeId }, asBearer(owner.token)), status.UNAUTHENTICATED);
  });

  test("revocation on one replica takes effect at once on another", async () => {
    const t = await newTenant(h, "revoke");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token, "c");
    const drone = await seat(h, owner.token, cubeId);
    await b.cube.getCube({ cubeId }, asBearer(owner.token));
    await post(b, drone.token, cubeId, "before");
    await h.identity.revokeClient({ clientId: owner.id }, asBearer(t.userToken));
    const started = Date.now();
    await eventually(
      async () => (await codeOf(b.cube.getCube({ cubeId }, asBearer(owner.token)))) === status.UNAUTHENTICATED,
      "the revoked client refused on the other replica",
      AT_ONCE_MS,
    );
    // Its drone session went with it.
    await eventually(
      async () => (await codeOf(post(b, drone.token, cubeId, "after"))) === status.UNAUTHENTICATED,
      "the revoked client's drone refused on the other replica",
      AT_ONCE_MS,
    );
    expect(Date.now() - started).toBeLessThan(AT_ONCE_MS);
    const log = await h.sql<{ message: string }>(
      "SELECT message FROM activity_items WHERE cube_id = $1::uuid AND item_type = 'entry' ORDER BY position",
      [cubeId],
    );
    expect(log.map((r) => r.message)).toEqual(["before"]);
  });

  test("rotation on one replica refuses the old credential at once on another; the new one works there", async () => {
    const t = await newTenant(h, "rotate");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token, "c");
    await b.cube.getCube({ cubeId }, asBearer(owner.token));
    const rotated = await h.identity.rotateClientCredential({ clientId: owner.id }, asBearer(t.userToken));
    await eventually(
      async () => (await codeOf(b.cube.getCube({ cubeId }, asBearer(owner.token)))) === status.UNAUTHENTICATED,
      "the old credential refused on the other replica",
      AT_ONCE_MS,
    );
    expect((await b.cube.getCube({ cubeId }, asBearer(rotated.token))).cube?.id).toBe(cubeId);
  });

  test("a removed grant and an evicted drone take effect at once on another replica", async () => {
    const t = await newTenant(h, "grants");
    const owner = await newClient(h, t.userToken, "owner");
    const reader = await newClient(h, t.userToken, "reader");
    const { cubeId } = await newCube(h, owner.token, "c");
    await grant(h, t.userToken, reader.id, cubeId, CubeAccess.WRITE);
    expect((await b.cube.getCube({ cubeId }, asBearer(reader.token))).cube?.callerAccess).toBe(CubeAccess.WRITE);
    await grant(h, t.userToken, reader.id, cubeId, CubeAccess.READ);
    await eventually(
      async () => (await b.cube.getCube({ cubeId }, asBearer(reader.token))).cube?.callerAccess === CubeAccess.READ,
      "the lowered grant on the other replica",
      AT_ONCE_MS,
    );
    await h.identity.revokeCubeGrant({ clientId: reader.id, cubeId }, asBearer(t.userToken));
    await eventually(
      async () => (await codeOf(b.cube.getCube({ cubeId }, asBearer(reader.token)))) === status.NOT_FOUND,
      "the removed grant on the other replica",
      AT_ONCE_MS,
    );

    const drone = await seat(h, owner.token, cubeId);
    await post(b, drone.token, cubeId, "seen");
    await h.cube.evictDrone({ cubeId, droneId: drone.droneId }, asBearer(owner.token));
    await eventually(
      async () => (await codeOf(post(b, drone.token, cubeId, "evicted"))) === status.UNAUTHENTICATED,
      "the evicted drone refused on the other replica",
      AT_ONCE_MS,
    );
  });

  test("a role that loses broadcast is refused at once on another replica", async () => {
    const t = await newTenant(h, "roles");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId, roleId } = await newCube(h, owner.token, "c");
    const drone = await seat(h, owner.token, cubeId);
    await post(b, drone.token, cubeId, "allowed");
    await h.cube.updateRole({ cubeId, roleId, canBroadcast: false }, asBearer(owner.token));
    await eventually(
      async () => (await codeOf(post(b, drone.token, cubeId, "refused"))) === status.PERMISSION_DENIED,
      "the broadcast refused on the other replica",
      AT_ONCE_MS,
    );
  });
});

describe("auth cache on a replica whose bus is down", () => {
  test("a revocation it cannot hear about takes effect within the fallback bound", async () => {
    const t = await newTenant(h, "cut");
    const owner = await newClient(h, t.userToken, "owner");
    const { cubeId } = await newCube(h, owner.token, "c");
    await cut.cube.getCube({ cubeId }, asBearer(owner.token));
    const revokedAt = Date.now();
    await h.identity.revokeClient({ clientId: owner.id }, asBearer(t.userToken));
    await eventually(
      async () => (await codeOf(cut.cube.getCube({ cubeId }, asBearer(owner.token)))) === status.UNAUTHENTICATED,
      "the revoked client refused on the cut replica",
      AUTH_CACHE_DOWN_MAX_AGE_MS + 3_000,
    );
    expect(Date.now() - revokedAt).toBeLessThanOrEqual(AUTH_CACHE_DOWN_MAX_AGE_MS + 3_000);
  });
});
