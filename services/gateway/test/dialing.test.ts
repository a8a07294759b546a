import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { CubeService, ListCubesResponseSchema } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { readConfig } from "@unimatrix/service-kit/config";
import { serviceDefinition } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { TEST_INTERNAL_KEY, testConfig } from "@unimatrix/service-kit/testing";
import { type RunningGateway, startGateway } from "../src";
import { gatewayEnv } from "../src/config";
import { connectJson, OPERATOR_TOKEN } from "./system";

/**
 * A real gRPC server (stock grpc-js) speaking the cube's CubeService and counting the calls it
 * gets. `failReads` makes its ListCubes answer UNAVAILABLE (as a replica going away does); its
 * CreateCube always does. Errors go trailers-only, as grpc-js sends them when no header was sent.
 */
async function countingCube(label: string, failReads = false) {
  const calls = { listCubes: 0, createCube: 0 };
  const server = new grpc.Server();
  const unavailable = { code: grpc.status.UNAVAILABLE, details: `${label} is going away` };
  server.addService(serviceDefinition(CubeService), {
    listCubes: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => {
      calls.listCubes++;
      if (failReads) callback(unavailable);
      else callback(null, create(ListCubesResponseSchema, { cubes: [], nextPageToken: label }));
    },
    createCube: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => {
      calls.createCube++;
      callback(unavailable);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { port, calls, stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())) };
}

async function gatewayAt(cubeAddress: string): Promise<RunningGateway & { url: string }> {
  const config = testConfig({ operatorToken: OPERATOR_TOKEN, redisUrl: undefined });
  const gateway = await startGateway({
    config,
    gateway: { ...readConfig(gatewayEnv, {}), port: 0, cubeAddress },
    internalKey: TEST_INTERNAL_KEY,
    logger: silentLogger(),
  });
  return Object.assign(gateway, { url: `http://127.0.0.1:${gateway.port}` });
}

const listCubes = (gateway: { url: string }) =>
  connectJson(gateway, "unimatrix.cube.v1.CubeService/ListCubes", {}, OPERATOR_TOKEN);

describe("gateway: dialing the services", () => {
  it("accepts every gRPC target form and refuses what grpc-js cannot dial (exit 78 names the variable)", () => {
    for (const target of [
      "dns:///cube-headless:7001",
      "dns://10.0.0.10:53/cube-headless.ns.svc:7001",
      "ipv4:10.0.0.1:7001,10.0.0.2:7001",
      "ipv6:[::1]:7001,[::2]:7001",
      "cube:7001",
      "127.0.0.1:7001",
      "[::1]:7001",
      "unix:/run/cube.sock",
    ]) {
      expect(readConfig(gatewayEnv, { CUBE_ADDRESS: target }).cubeAddress).toBe(target);
    }
    for (const target of ["cube", "dns:///", "ipv4:", "ipv4:10.0.0.1:7001,", "cube :7001", "http://cube:7001"]) {
      expect(() => readConfig(gatewayEnv, { CUBE_ADDRESS: target })).toThrow(/CUBE_ADDRESS must be a gRPC target/);
    }
  });

  it("serves through CUBE_ADDRESS=dns:///localhost:<port>", async () => {
    const cube = await countingCube("only");
    const gateway = await gatewayAt(`dns:///localhost:${cube.port}`);
    try {
      const { status, body } = await listCubes(gateway);
      expect([status, body.nextPageToken]).toEqual([200, "only"]);
      expect(cube.calls.listCubes).toBe(1);
    } finally {
      await gateway.stop();
      await cube.stop();
    }
  });

  it("spreads calls round-robin over every address of an ipv4: list", async () => {
    const [a, b] = await Promise.all([countingCube("a"), countingCube("b")]);
    const gateway = await gatewayAt(`ipv4:127.0.0.1:${a.port},127.0.0.1:${b.port}`);
    try {
      const answeredBy: string[] = [];
      for (let i = 0; i < 40; i++) {
        const { status, body } = await listCubes(gateway);
        expect(status).toBe(200);
        answeredBy.push(String(body.nextPageToken));
      }
      expect(a.calls.listCubes + b.calls.listCubes).toBe(40);
      // Both backends serve; once both are connected the picker alternates between them.
      expect(a.calls.listCubes).toBeGreaterThanOrEqual(10);
      expect(b.calls.listCubes).toBeGreaterThanOrEqual(10);
      const tail = answeredBy.slice(-10);
      for (let i = 1; i < tail.length; i++) expect(tail[i]).not.toBe(tail[i - 1]);
    } finally {
      await gateway.stop();
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it("retries a read that meets UNAVAILABLE on another replica, and never replays a write", async () => {
    const [sick, well] = await Promise.all([countingCube("sick", true), countingCube("well")]);
    const gateway = await gatewayAt(`ipv4:127.0.0.1:${sick.port},127.0.0.1:${well.port}`);
    try {
      for (let i = 0; i < 10; i++) {
        const { status, body } = await listCubes(gateway);
        expect([status, body.nextPageToken]).toEqual([200, "well"]);
      }
      expect(well.calls.listCubes).toBe(10);
      expect(sick.calls.listCubes).toBeGreaterThan(0); // the sick one was tried and the call retried

      const write = await connectJson(
        gateway,
        "unimatrix.cube.v1.CubeService/CreateCube",
        { requestKey: crypto.randomUUID(), name: "x", directive: "y" },
        OPERATOR_TOKEN,
      );
      expect([write.status, write.body.code]).toEqual([503, "unavailable"]);
      expect(sick.calls.createCube + well.calls.createCube).toBe(1);
    } finally {
      await gateway.stop();
      await Promise.all([sick.stop(), well.stop()]);
    }
  });
});
