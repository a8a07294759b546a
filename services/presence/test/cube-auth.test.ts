import { status } from "@grpc/grpc-js";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { startCube } from "@unimatrix/cube";
import { createClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import type { RunningService } from "@unimatrix/service-kit/service";
import { asBearer, type TestSchema, testBusPrefix, testConfig, testSchema } from "@unimatrix/service-kit/testing";
import { type PresenceService, startPresence } from "../src";

const OPERATOR = "umx_operator_presencecubeauth_0123456789";

describe("presence resolves user and client tokens through cube's Authenticate", () => {
  const schemas: TestSchema[] = [testSchema("pcauth_cube"), testSchema("pcauth_presence")];
  let cube: RunningService;
  let presence: PresenceService;

  beforeAll(async () => {
    const config = testConfig({ busPrefix: testBusPrefix("pcauth"), operatorToken: OPERATOR });
    cube = await startCube({ config, port: 0, schema: schemas[0]!.schema, logger: silentLogger() });
    presence = await startPresence({
      config,
      port: 0,
      schema: schemas[1]!.schema,
      logger: silentLogger(),
      presence: { cubeAddress: `127.0.0.1:${cube.port}` },
    });
  });
  afterAll(async () => {
    await presence?.stop();
    await cube?.stop();
    for (const schema of schemas) await schema.drop();
  });

  it("accepts a user's and a client's bearer token straight over gRPC, in their tenant, until revoked", async () => {
    const identity = createClient(IdentityService, `127.0.0.1:${cube.port}`);
    const machines = createClient(MachineService, `127.0.0.1:${presence.port}`);
    try {
      const tenant = await identity.createTenant({ name: "acme", adminDisplayName: "admin" }, asBearer(OPERATOR));
      const other = await identity.createTenant({ name: "globex", adminDisplayName: "admin" }, asBearer(OPERATOR));
      const client = await identity.issueClient({ name: "daemon-admin" }, asBearer(tenant.adminUserToken));

      const registered = await machines.registerMachine({ name: "build-01" }, asBearer(tenant.adminUserToken));
      expect(registered.machine?.tenantId).toBe(tenant.tenant?.id);
      const listed = await machines.listMachines({}, asBearer(client.token));
      expect(listed.machines.map((m) => m.name)).toEqual(["build-01"]);
      const foreign = await machines.listMachines({}, asBearer(other.adminUserToken));
      expect(foreign.machines).toEqual([]);

      await identity.revokeClient({ clientId: client.client!.id }, asBearer(tenant.adminUserToken));
      await expect(machines.listMachines({}, asBearer(client.token))).rejects.toMatchObject({
        code: status.UNAUTHENTICATED,
      });
      await expect(machines.listMachines({}, asBearer("umx_user_unknown_secret"))).rejects.toMatchObject({
        code: status.UNAUTHENTICATED,
      });
    } finally {
      identity.close();
      machines.close();
    }
  });
});
