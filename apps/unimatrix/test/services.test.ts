import * as grpc from "@grpc/grpc-js";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { startCube } from "@unimatrix/cube";
import { startDevice } from "@unimatrix/device";
import { startPresence } from "@unimatrix/presence";
import { serviceDefinition } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import type { RunningService } from "@unimatrix/service-kit/service";
import { type TestSchema, testBusPrefix, testConfig, testSchema } from "@unimatrix/service-kit/testing";

const starters = { cube: startCube, device: startDevice, presence: startPresence };

describe.each(Object.entries(starters))("%s service on Postgres and Redis", (name, start) => {
  let schema: TestSchema;
  let service: RunningService;

  beforeAll(async () => {
    schema = testSchema(name);
    service = await start({
      config: testConfig({ busPrefix: testBusPrefix(name) }),
      port: 0,
      schema: schema.schema,
      logger: silentLogger(),
    });
  });
  afterAll(async () => {
    await service.stop();
    await schema.drop();
  });

  it("answers a stock @grpc/grpc-js health client with SERVING, for the server and each of its services", async () => {
    // A plain generic client, no Unimatrix wrapper: what any gRPC user would write.
    const Client = grpc.makeGenericClientConstructor(serviceDefinition(Health), "Health");
    const client = new Client(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
    const check = (serviceName: string) =>
      new Promise<{ status: HealthCheckResponse_ServingStatus }>((resolve, reject) =>
        (client as unknown as Record<string, (...a: unknown[]) => void>).check!(
          { service: serviceName },
          (error: grpc.ServiceError | null, response: { status: HealthCheckResponse_ServingStatus }) =>
            error ? reject(error) : resolve(response),
        ),
      );
    try {
      expect((await check("")).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      const services = service.host.health;
      const prefix = `unimatrix.${name}.v1.`;
      const names = ["IdentityService", "CubeService", "ActivityService", "EnrollmentService", "DeviceService"]
        .concat(["PlacementService", "AuditService", "MachineService", "LinkService"])
        .map((n) => prefix + n)
        .filter((n) => services.get(n) !== undefined);
      expect(names.length).toBeGreaterThanOrEqual(2);
      for (const serviceName of names) {
        expect((await check(serviceName)).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      }
    } finally {
      client.close();
    }
  });

  it("created its schema and migration record in Postgres", async () => {
    const session = await service.database.openSession();
    try {
      const rows = await session.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name = '_unimatrix_migrations'",
        [schema.schema],
      );
      expect(rows).toEqual([{ table_name: "_unimatrix_migrations" }]);
    } finally {
      await session.close();
    }
  });
});
