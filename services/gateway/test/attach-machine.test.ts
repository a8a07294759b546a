import { status } from "@grpc/grpc-js";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { type RunningCube, startCube } from "@unimatrix/cube";
import { createClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { call, connectJson, type System, seedTenant, startSystem } from "./system";

type Tenant = Awaited<ReturnType<typeof seedTenant>>;

/** AttachSeat's machine_id is checked with presence, as the caller: only the caller's tenant's machines. */
describe("AttachSeat: machine_id belongs to the caller's tenant", () => {
  let system: System;
  let acme: Tenant;
  let globex: Tenant;
  let ours: string;
  let theirs: string;

  const register = async (tenant: Tenant, name: string) =>
    (
      await call<{ machine: { id: string } }>(
        system,
        "unimatrix.presence.v1.MachineService/RegisterMachine",
        { name },
        tenant.user,
      )
    ).machine.id;
  const attach = (machineId: string) =>
    connectJson(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "box", machineId },
      acme.clients[0]!.token,
    );
  const drones = async () =>
    (
      await call<{ drones?: unknown[] }>(
        system,
        "unimatrix.cube.v1.CubeService/ListDrones",
        { cubeId: acme.cubeId, includeEvicted: true },
        acme.user,
      )
    ).drones?.length ?? 0;

  beforeAll(async () => {
    system = await startSystem("gw_attach_machine");
    acme = await seedTenant(system, "acme", 1);
    globex = await seedTenant(system, "globex", 1);
    ours = await register(acme, "acme-box");
    theirs = await register(globex, "globex-box");
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("answers NOT_FOUND naming machine_id for another tenant's machine and for none, alike, writing nothing", async () => {
    const before = await drones();
    const foreign = await attach(theirs);
    const unknown = await attach(crypto.randomUUID());
    for (const answer of [foreign, unknown]) {
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ code: "not_found", message: "machine_id: machine not found" });
    }
    expect(await drones()).toBe(before);
    const own = await attach(ours);
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ outcome: "ATTACH_SEAT_OUTCOME_CREATED", drone: { machineId: ours } });
    expect(await drones()).toBe(before + 1);
  });

  it("refuses a revoked machine of the caller's own with FAILED_PRECONDITION", async () => {
    const old = await register(acme, "acme-old-box");
    await call(system, "unimatrix.presence.v1.MachineService/RevokeMachine", { machineId: old }, acme.user);
    const answer = await attach(old);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ code: "failed_precondition", message: "machine_id: the machine is revoked" });
  });

  it("answers UNAVAILABLE (never INTERNAL) and changes nothing while presence cannot answer", async () => {
    let cube: RunningCube | undefined;
    try {
      cube = await startCube({
        config: system.config,
        port: 0,
        schema: system.cubeSchema,
        logger: silentLogger(),
        cube: { presenceAddress: "127.0.0.1:1", livenessIntervalMs: 0 },
      });
      const client = createClient(CubeService, `127.0.0.1:${cube.port}`);
      try {
        const before = await drones();
        await expectStatus(
          client.attachSeat(
            { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "box", machineId: ours },
            asBearer(acme.clients[0]!.token),
          ),
          status.UNAVAILABLE,
          "machine_id",
        );
        expect(await drones()).toBe(before);
      } finally {
        client.close();
      }
    } finally {
      await cube?.stop();
    }
  });
});
