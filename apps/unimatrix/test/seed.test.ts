import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { type RunningSystem, startParts } from "@unimatrix/service-kit/service";
import {
  asBearer,
  expectStatus,
  seedTenant,
  startSystem,
  TEST_OPERATOR_TOKEN,
  type TestSystem,
  testConfig,
} from "@unimatrix/service-kit/testing";
import { serviceEntry } from "../src/services";

const cubePart = () => serviceEntry("cube").part({ CUBE_PORT: "0" });

/** Seeds over gRPC, then checks that every duplicate name is ALREADY_EXISTS (never INTERNAL). */
async function seedAndCollide(address: string) {
  const seeded = await seedTenant(
    { grpc: address },
    { operatorToken: TEST_OPERATOR_TOKEN, tenant: "acme", cube: { name: "ops" }, clients: ["agent-1", "agent-2"] },
  );
  expect(seeded.clients.map((c) => [c.name, c.token.startsWith("umx_client_")])).toEqual([
    ["agent-1", true],
    ["agent-2", true],
  ]);
  const cubes = createClient(CubeService, address);
  const identity = createClient(IdentityService, address);
  try {
    const listed = await cubes.listCubes({}, asBearer(seeded.clients[1]!.token));
    expect(listed.cubes.map((c) => [c.id, c.name])).toEqual([[seeded.cubeId, "ops"]]);
    const tenant = await expectStatus(
      seedTenant({ grpc: address }, { operatorToken: TEST_OPERATOR_TOKEN, tenant: "acme" }),
      status.ALREADY_EXISTS,
    );
    expect(tenant.message).toMatch(/^CreateTenant: already_exists: /);
    await expectStatus(identity.issueClient({ name: "agent-1" }, asBearer(seeded.userToken)), status.ALREADY_EXISTS);
    await expectStatus(
      cubes.createRole({ cubeId: seeded.cubeId!, name: "worker" }, asBearer(seeded.userToken)),
      status.ALREADY_EXISTS,
    );
  } finally {
    cubes.close();
    identity.close();
  }
}

describe("seedTenant over gRPC, and duplicate names", () => {
  it("on Postgres, through the shared system starter", async () => {
    const system: TestSystem = await startSystem("seed", [cubePart()]);
    try {
      await seedAndCollide(system.address("cube"));
    } finally {
      await system.stop();
    }
  });

  it("on the embedded PGlite default", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "umx-seed-"));
    const config = testConfig({
      databaseUrl: undefined,
      redisUrl: undefined,
      dataDir,
      operatorToken: TEST_OPERATOR_TOKEN,
    });
    const system: RunningSystem = await startParts([cubePart()], { config, logger: () => silentLogger() });
    try {
      await seedAndCollide(`127.0.0.1:${system.get("cube").port}`);
    } finally {
      await system.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
