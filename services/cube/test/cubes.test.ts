import { status } from "@grpc/grpc-js";
import { RoleSectionOp } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { RoleClass } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { CubeAccess, grant, type Harness, newClient, newTenant, startHarness } from "./harness";

let h: Harness;
let user: string;
let client: { id: string; token: string };
beforeAll(async () => {
  h = await startHarness("cube_cubes");
  const t = await newTenant(h, "cubes");
  user = t.userToken;
  client = await newClient(h, user, "agent");
});
afterAll(async () => {
  await h.close();
});

const count = async (table: string) =>
  Number((await h.sql<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`))[0]?.n);

describe("cubes", () => {
  it("create is idempotent on the request key per principal", async () => {
    const requestKey = crypto.randomUUID();
    const first = await h.cube.createCube({ requestKey, name: "alpha", directive: "d" }, asBearer(client.token));
    expect(first.created).toBe(true);
    expect(first.cube?.callerAccess).toBe(CubeAccess.MANAGE);
    const again = await h.cube.createCube({ requestKey, name: "alpha", directive: "d" }, asBearer(client.token));
    expect(again.created).toBe(false);
    expect(again.cube?.id).toBe(first.cube?.id);
    await expectStatus(
      h.cube.createCube({ requestKey, name: "beta", directive: "d" }, asBearer(client.token)),
      status.ALREADY_EXISTS,
    );
    // Ten concurrent creates with one key: one cube.
    const key2 = crypto.randomUUID();
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        h.cube.createCube({ requestKey: key2, name: "gamma", directive: "" }, asBearer(client.token)),
      ),
    );
    expect(new Set(results.map((r) => r.cube?.id)).size).toBe(1);
    expect(results.filter((r) => r.created).length).toBe(1);
  });

  it("rejects bad input naming the field and writes nothing", async () => {
    const before = await count("cubes");
    const key = crypto.randomUUID();
    await expectStatus(
      h.cube.createCube({ requestKey: "nope", name: "x" }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "request_key",
    );
    await expectStatus(
      h.cube.createCube({ requestKey: key, name: "" }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "name",
    );
    await expectStatus(
      h.cube.createCube({ requestKey: key, name: "x", directive: "d".repeat(100_001) }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "directive",
    );
    await expectStatus(
      h.cube.createCube({ requestKey: key, name: "x", taxonomyJson: "[1]" }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "taxonomy_json",
    );
    await expectStatus(
      h.cube.createCube({ requestKey: key, name: "x", taxonomyJson: "{" }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "taxonomy_json",
    );
    await expectStatus(
      h.cube.createCube(
        { requestKey: key, name: "x", taxonomyJson: JSON.stringify({ kinds: ["a".repeat(100_000)] }) },
        asBearer(client.token),
      ),
      status.INVALID_ARGUMENT,
      "taxonomy_json",
    );
    await expectStatus(h.cube.getCube({ cubeId: "1234" }, asBearer(client.token)), status.INVALID_ARGUMENT, "cube_id");
    expect(await count("cubes")).toBe(before);
  });

  it("update changes directive and/or taxonomy, needs one of them and manage access", async () => {
    const { cube } = await h.cube.createCube(
      { requestKey: crypto.randomUUID(), name: "upd", directive: "d0" },
      asBearer(client.token),
    );
    const cubeId = cube?.id as string;
    await expectStatus(h.cube.updateCube({ cubeId }, asBearer(client.token)), status.INVALID_ARGUMENT, "directive");
    const tax = JSON.stringify({ kinds: ["status", "question"] });
    const u1 = await h.cube.updateCube({ cubeId, taxonomyJson: tax }, asBearer(client.token));
    expect(u1.cube?.directive).toBe("d0");
    expect(u1.cube?.taxonomyJson).toBe(tax);
    const u2 = await h.cube.updateCube({ cubeId, directive: "d1" }, asBearer(client.token));
    expect(u2.cube?.directive).toBe("d1");
    expect(u2.cube?.taxonomyJson).toBe(tax);
    await expectStatus(
      h.cube.updateCube({ cubeId, taxonomyJson: "x".repeat(100_001) }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "taxonomy_json",
    );
    const u3 = await h.cube.updateCube({ cubeId, taxonomyJson: "" }, asBearer(client.token));
    expect(u3.cube?.taxonomyJson).toBeUndefined();
    const reader = await newClient(h, user, "reader");
    await grant(h, user, reader.id, cubeId, CubeAccess.WRITE);
    await expectStatus(
      h.cube.updateCube({ cubeId, directive: "no" }, asBearer(reader.token)),
      status.PERMISSION_DENIED,
    );
    const got = await h.cube.getCube({ cubeId }, asBearer(reader.token));
    expect(got.cube?.directive).toBe("d1");
  });

  it("lists readable cubes oldest first with pages", async () => {
    const t = await newTenant(h, "listing");
    const c = await newClient(h, t.userToken, "lister");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await h.cube.createCube(
        { requestKey: crypto.randomUUID(), name: `c${i}`, directive: "" },
        asBearer(c.token),
      );
      ids.push(r.cube?.id as string);
    }
    const p1 = await h.cube.listCubes({ pageSize: 2 }, asBearer(c.token));
    const p2 = await h.cube.listCubes({ pageSize: 2, pageToken: p1.nextPageToken }, asBearer(c.token));
    const p3 = await h.cube.listCubes({ pageSize: 2, pageToken: p2.nextPageToken }, asBearer(c.token));
    expect([...p1.cubes, ...p2.cubes, ...p3.cubes].map((x) => x.id)).toEqual(ids);
    expect(p3.nextPageToken).toBe("");
    await expectStatus(
      h.cube.listCubes({ pageToken: "garbage" }, asBearer(c.token)),
      status.INVALID_ARGUMENT,
      "page_token",
    );
    await expectStatus(h.cube.listCubes({ pageSize: -1 }, asBearer(c.token)), status.INVALID_ARGUMENT, "page_size");
    const other = await newClient(h, t.userToken, "other");
    expect((await h.cube.listCubes({}, asBearer(other.token))).cubes).toEqual([]);
    expect((await h.cube.listCubes({}, asBearer(t.userToken))).cubes.length).toBe(5);
  });
});

describe("roles", () => {
  let cubeId: string;
  beforeAll(async () => {
    const r = await h.cube.createCube(
      { requestKey: crypto.randomUUID(), name: "roles", directive: "" },
      asBearer(client.token),
    );
    cubeId = r.cube?.id as string;
  });

  it("creates roles with class and flags; one default per cube; unique names", async () => {
    const queen = await h.cube.createRole(
      {
        cubeId,
        name: "queen",
        roleClass: RoleClass.QUEEN,
        isDefault: true,
        canBroadcast: true,
        receivesAllDirect: true,
        mandatory: true,
        humanSeat: true,
      },
      asBearer(client.token),
    );
    expect(queen.role).toMatchObject({
      roleClass: RoleClass.QUEEN,
      isDefault: true,
      canBroadcast: true,
      receivesAllDirect: true,
      mandatory: true,
      humanSeat: true,
    });
    const worker = await h.cube.createRole({ cubeId, name: "worker", isDefault: true }, asBearer(client.token));
    expect(worker.role?.roleClass).toBe(RoleClass.WORKER);
    const roles = await h.cube.listRoles({ cubeId }, asBearer(client.token));
    expect(roles.roles.map((r) => [r.name, r.isDefault])).toEqual([
      ["queen", false],
      ["worker", true],
    ]);
    await expectStatus(h.cube.createRole({ cubeId, name: "worker" }, asBearer(client.token)), status.ALREADY_EXISTS);
    await expectStatus(
      h.cube.createRole({ cubeId, name: "x", roleClass: 7 as RoleClass }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "role_class",
    );
    await expectStatus(
      h.cube.createRole({ cubeId, name: "x".repeat(101) }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "name",
    );
  });

  it("updates only the fields that are set; empty update is refused", async () => {
    const { role } = await h.cube.createRole(
      { cubeId, name: "tester", shortDescription: "tests" },
      asBearer(client.token),
    );
    const roleId = role?.id as string;
    await expectStatus(h.cube.updateRole({ cubeId, roleId }, asBearer(client.token)), status.INVALID_ARGUMENT, "role");
    const u = await h.cube.updateRole(
      { cubeId, roleId, canBroadcast: true, roleClass: RoleClass.QUEEN },
      asBearer(client.token),
    );
    expect(u.role).toMatchObject({
      name: "tester",
      shortDescription: "tests",
      canBroadcast: true,
      roleClass: RoleClass.QUEEN,
    });
    await expectStatus(
      h.cube.updateRole({ cubeId, roleId, roleClass: RoleClass.UNSPECIFIED }, asBearer(client.token)),
      status.INVALID_ARGUMENT,
      "role_class",
    );
    await expectStatus(
      h.cube.updateRole({ cubeId, roleId, name: "worker" }, asBearer(client.token)),
      status.ALREADY_EXISTS,
    );
    await expectStatus(
      h.cube.updateRole({ cubeId, roleId: crypto.randomUUID(), name: "zz" }, asBearer(client.token)),
      status.NOT_FOUND,
    );
  });

  it("patches sections: add, replace, remove, with precondition errors", async () => {
    const { role } = await h.cube.createRole(
      { cubeId, name: "documented", detailedDescription: "Intro\n\n## Duties\nDo things.\n\n## Limits\nNone." },
      asBearer(client.token),
    );
    const roleId = role?.id as string;
    const patch = (op: RoleSectionOp, section: string, text = "") =>
      h.cube.patchRoleSection({ cubeId, roleId, op, section, text }, asBearer(client.token));
    const r1 = await patch(RoleSectionOp.REPLACE, "Duties", "Do other things.");
    expect(r1.role?.detailedDescription).toBe("Intro\n\n## Duties\nDo other things.\n\n## Limits\nNone.");
    const r2 = await patch(RoleSectionOp.ADD, "Tools", "grep");
    expect(r2.role?.detailedDescription).toBe(
      "Intro\n\n## Duties\nDo other things.\n\n## Limits\nNone.\n\n## Tools\ngrep\n",
    );
    const r3 = await patch(RoleSectionOp.REMOVE, " Limits ");
    expect(r3.role?.detailedDescription).toBe("Intro\n\n## Duties\nDo other things.\n\n## Tools\ngrep\n");
    await expectStatus(patch(RoleSectionOp.ADD, "Duties", "x"), status.FAILED_PRECONDITION);
    await expectStatus(patch(RoleSectionOp.REPLACE, "Missing", "x"), status.FAILED_PRECONDITION);
    await expectStatus(patch(RoleSectionOp.REMOVE, "Tools", "not empty"), status.INVALID_ARGUMENT, "text");
    await expectStatus(patch(RoleSectionOp.UNSPECIFIED, "Tools"), status.INVALID_ARGUMENT, "op");
    await expectStatus(patch(RoleSectionOp.ADD, "two\nlines", "x"), status.INVALID_ARGUMENT, "section");
    await expectStatus(patch(RoleSectionOp.ADD, "Huge", "x".repeat(99_990)), status.INVALID_ARGUMENT, "text");
    const listed = await h.cube.listRoles({ cubeId }, asBearer(client.token));
    expect(listed.roles.find((r) => r.id === roleId)?.detailedDescription).toBe(
      "Intro\n\n## Duties\nDo other things.\n\n## Tools\ngrep\n",
    );
  });
});

describe("isolation", () => {
  it("a foreign tenant cannot read, change or learn about cubes and roles", async () => {
    const b = await newTenant(h, "cubes-b");
    const foreign = await newClient(h, b.userToken, "foreign");
    const r = await h.cube.createCube(
      { requestKey: crypto.randomUUID(), name: "secret", directive: "s" },
      asBearer(client.token),
    );
    const cubeId = r.cube?.id as string;
    const { role } = await h.cube.createRole({ cubeId, name: "w", isDefault: true }, asBearer(client.token));
    const roleId = role?.id as string;
    for (const token of [foreign.token, b.userToken]) {
      await expectStatus(h.cube.getCube({ cubeId }, asBearer(token)), status.NOT_FOUND);
      await expectStatus(h.cube.updateCube({ cubeId, directive: "pwned" }, asBearer(token)), status.NOT_FOUND);
      await expectStatus(h.cube.createRole({ cubeId, name: "evil" }, asBearer(token)), status.NOT_FOUND);
      await expectStatus(h.cube.updateRole({ cubeId, roleId, name: "evil" }, asBearer(token)), status.NOT_FOUND);
      await expectStatus(h.cube.listRoles({ cubeId }, asBearer(token)), status.NOT_FOUND);
      await expectStatus(
        h.cube.patchRoleSection({ cubeId, roleId, op: RoleSectionOp.ADD, section: "x", text: "y" }, asBearer(token)),
        status.NOT_FOUND,
      );
      // Users may not attach seats at all (a kind rule, not an oracle); foreign clients see nothing.
      await expectStatus(
        h.cube.attachSeat({ cubeId, roleId }, asBearer(token)),
        token === foreign.token ? status.NOT_FOUND : status.PERMISSION_DENIED,
      );
      await expectStatus(h.cube.listDrones({ cubeId }, asBearer(token)), status.NOT_FOUND);
      await expectStatus(
        h.cube.evictDrone({ cubeId, droneId: crypto.randomUUID() }, asBearer(token)),
        status.NOT_FOUND,
      );
      expect((await h.cube.listCubes({}, asBearer(token))).cubes).toEqual([]);
    }
    const same = await h.cube.getCube({ cubeId }, asBearer(client.token));
    expect(same.cube?.directive).toBe("s");
  });
});
