import { randomUUID } from "node:crypto";
import { type Principal, parseToken } from "@unimatrix/service-kit/auth";
import { AlreadyExistsError, FailedPreconditionError, PermissionDeniedError } from "@unimatrix/service-kit/errors";
import type { CubeDeps } from "../src/deps";
import { createCube } from "../src/ops/create-cube";
import { revokeCubeGrant, setCubeGrant } from "../src/ops/cube-grant";
import { createTenant, issueClient, issueUserToken, revokeClient, rotateClient } from "../src/ops/identity";
import { readUnread } from "../src/ops/read-unread";
import { recordDecision } from "../src/ops/record-decision";
import { createRole, patchRoleSection, updateRole } from "../src/ops/roles";
import { updateCube } from "../src/ops/update-cube";
import { resolveToken } from "../src/reads/credentials";
import { MANAGE, READ, WRITE } from "../src/rules/access";
import { authTag } from "../src/store/auth-cache";
import { type Harness, newCube, post, seat, startHarness } from "./harness";

// The op level for the write paths of cubes, roles, grants, identity and decisions: each called as
// a function on a replica's real dependencies, its result and the effects it hands the publisher.

let h: Harness;
let deps: CubeDeps;

beforeAll(async () => {
  h = await startHarness("ops_admin");
  deps = h.service.deps;
});
afterAll(async () => {
  await h.close();
});

async function principalOf(token: string): Promise<Principal> {
  const parsed = parseToken(token);
  const resolved = parsed && (await resolveToken(deps, parsed));
  if (!resolved) throw new Error("token did not resolve");
  return resolved.principal;
}

/** A tenant (through the op), its user, and a client (through the op). */
async function tenant() {
  const made = await createTenant(deps, `admin-${randomUUID().slice(0, 8)}`, "admin");
  expect(made.effects).toEqual({});
  const tenantId = made.result.tenant.id;
  const issued = await issueClient(deps, tenantId, "agent");
  expect(issued.effects).toEqual({});
  return {
    tenantId,
    userToken: made.result.token,
    user: await principalOf(made.result.token),
    client: {
      id: issued.result.client.id,
      token: issued.result.token,
      principal: await principalOf(issued.result.token),
    },
  };
}

const cubeInput = (requestKey: string, name = "c") => ({ requestKey, name, directive: "d", taxonomyJson: undefined });

describe("ops: cubes, roles, grants, identity and decisions", () => {
  test("create-cube: idempotent on the request key, no effects; other content under the key is ALREADY_EXISTS", async () => {
    const t = await tenant();
    const key = randomUUID();
    const first = await createCube(deps, t.user, cubeInput(key));
    expect(first.result.created).toBe(true);
    expect(first.effects).toEqual({});
    const again = await createCube(deps, t.user, cubeInput(key));
    expect(again.result).toMatchObject({ created: false, cube: { id: first.result.cube.id } });
    await expect(createCube(deps, t.user, cubeInput(key, "other"))).rejects.toThrow(AlreadyExistsError);
  });

  test("update-cube and update-role drop the cube's cached access (it carries the taxonomy and roles)", async () => {
    const t = await tenant();
    const { cubeId, roleId } = await newCube(h, t.userToken);
    const updated = await updateCube(deps, t.user, cubeId, { taxonomyJson: '{"kinds":["status"]}' });
    expect(updated.result.cube.taxonomyJson).toBe('{"kinds":["status"]}');
    expect(updated.effects).toEqual({ authTags: [authTag.cube(cubeId)] });
    const role = await updateRole(deps, t.user, cubeId, roleId, { canBroadcast: false });
    expect(role.result.canBroadcast).toBe(false);
    expect(role.effects).toEqual({ authTags: [authTag.cube(cubeId)] });
  });

  test("create-role and patch-role-section change no cached access", async () => {
    const t = await tenant();
    const { cubeId } = await newCube(h, t.userToken);
    const fields = {
      name: "reviewer",
      shortDescription: "reviews",
      detailedDescription: "## Scope\nall",
      roleClass: "worker" as const,
      isDefault: false,
      mandatory: false,
      humanSeat: false,
      canBroadcast: true,
      receivesAllDirect: false,
    };
    const role = await createRole(deps, t.user, cubeId, fields);
    expect(role.effects).toEqual({});
    await expect(createRole(deps, t.user, cubeId, fields)).rejects.toThrow(AlreadyExistsError);
    const patched = await patchRoleSection(deps, t.user, cubeId, role.result.id, "replace", "Scope", "only docs");
    expect(patched.result.detailedDescription).toBe("## Scope\nonly docs");
    expect(patched.effects).toEqual({});
    await expect(createRole(deps, t.client.principal, cubeId, { ...fields, name: "x" })).rejects.toThrow();
  });

  test("cube-grant: a grant change drops the cube's cached access and re-checks the client's streams", async () => {
    const t = await tenant();
    const { cubeId } = await newCube(h, t.userToken);
    const granted = await setCubeGrant(deps, t.user, t.client.id, cubeId, WRITE);
    const changed = { authTags: [authTag.cube(cubeId)], access: { cubeIds: [cubeId], subjectIds: [t.client.id] } };
    expect(granted.effects).toEqual(changed);
    expect((await setCubeGrant(deps, t.user, t.client.id, cubeId, MANAGE)).result.access).toBe(MANAGE);
    const revoked = await revokeCubeGrant(deps, t.user, t.client.id, cubeId);
    expect(revoked).toEqual({ result: true, effects: changed });
    expect(await revokeCubeGrant(deps, t.user, t.client.id, cubeId)).toEqual({ result: false, effects: {} });
  });

  test("identity: rotating or revoking a client names it and the cubes its sessions were in; a user token has no effects", async () => {
    const t = await tenant();
    const { cubeId } = await newCube(h, t.userToken);
    await setCubeGrant(deps, t.user, t.client.id, cubeId, WRITE);
    await seat(h, t.client.token, cubeId);
    const token = await issueUserToken(deps, t.tenantId, { displayName: "second" });
    expect(token.effects).toEqual({});
    const rotated = await rotateClient(deps, t.tenantId, t.client.id);
    expect(rotated.result.revoked).toBe(1);
    expect(rotated.effects.authTags).toEqual([authTag.client(t.client.id)]);
    expect(rotated.effects.access?.subjectIds).toEqual([t.client.id]);
    expect(rotated.effects.access?.cubeIds).toContain(cubeId);
    const revoked = await revokeClient(deps, t.tenantId, t.client.id);
    expect(revoked.result.revokedAt).not.toBeNull();
    expect(revoked.effects.authTags).toEqual([authTag.client(t.client.id)]);
    await expect(rotateClient(deps, t.tenantId, t.client.id)).rejects.toThrow(FailedPreconditionError);
  });

  test("record-decision: on a visible entry by id or position, no effects; READ alone may not", async () => {
    const t = await tenant();
    const { cubeId } = await newCube(h, t.userToken);
    await setCubeGrant(deps, t.user, t.client.id, cubeId, WRITE);
    const drone = await seat(h, t.client.token, cubeId);
    const entry = await post(h, drone.token, cubeId, "ship it?");
    const byPosition = { field: "entry_position", position: entry.position };
    const decided = await recordDecision(deps, t.user, cubeId, { title: "ship", rationale: "", entry: byPosition });
    expect(decided.result.entryId).toBe(entry.id);
    expect(decided.effects).toEqual({});
    await setCubeGrant(deps, t.user, t.client.id, cubeId, READ);
    await expect(recordDecision(deps, t.client.principal, cubeId, { title: "no", rationale: "" })).rejects.toThrow(
      PermissionDeniedError,
    );
  });

  test("read-unread with peek: the same items, the inbox does not move", async () => {
    const t = await tenant();
    const { cubeId } = await newCube(h, t.userToken);
    await setCubeGrant(deps, t.user, t.client.id, cubeId, WRITE);
    const a = await seat(h, t.client.token, cubeId);
    const b = await seat(h, t.client.token, cubeId);
    await post(h, a.token, cubeId, "one");
    const reader = await principalOf(b.token);
    const peeked = await readUnread(deps, reader, cubeId, 10, true);
    expect(peeked.result.items.map((i) => i.row.message)).toEqual(["one"]);
    const taken = await readUnread(deps, reader, cubeId, 10);
    expect(taken.result.items.map((i) => i.row.message)).toEqual(["one"]);
    expect(taken.result.after).toBe(peeked.result.after);
    expect((await readUnread(deps, reader, cubeId, 10, true)).result.items).toEqual([]);
  });
});
