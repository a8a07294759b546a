import { status } from "@grpc/grpc-js";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { UnauthenticatedError } from "@unimatrix/service-kit/errors";
import { type CallContext, createClient, GrpcHost } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { eventually, type TestSchema, testBusPrefix, testConfig, testSchema } from "@unimatrix/service-kit/testing";
import { type PresenceService, startPresence } from "../src";

const bearer = (token: string) => ({ metadata: { authorization: `Bearer ${token}` } });
const TENANT = "7c1e8a52-5d0e-4f53-9a7b-0d6f4c1e2a10";
const USER = "0f5b3c4d-1a2b-4c3d-8e9f-123456789abc";

/**
 * A stand-in for cube's IdentityService (a real gRPC server) that answers `umx_user_fast_*`
 * at once and never answers `umx_user_slow_*`, recording each call's deadline and end.
 */
function identityPeer() {
  const seen: { token: string; deadline: Date | undefined; endedAt?: number }[] = [];
  const host = new GrpcHost({ logger: silentLogger() });
  host.addService(IdentityService, {
    async authenticate(request: { token: string }, ctx: CallContext) {
      const call: (typeof seen)[number] = { token: request.token, deadline: ctx.deadline };
      seen.push(call);
      if (request.token.startsWith("umx_user_slow_")) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        call.endedAt = Date.now();
        throw new UnauthenticatedError("too late");
      }
      return { principal: { kind: PrincipalKind.USER, tenantId: TENANT, subjectId: USER } };
    },
  } as never);
  return { host, seen };
}

describe("presence → cube Authenticate", () => {
  const schema: TestSchema = testSchema("pcdeadline");
  const peer = identityPeer();
  let presence: PresenceService;
  let machines: ReturnType<typeof createClient<typeof MachineService>>;

  beforeAll(async () => {
    const port = await peer.host.listen("127.0.0.1", 0);
    presence = await startPresence({
      config: testConfig({ busPrefix: testBusPrefix("pcdeadline") }),
      port: 0,
      schema: schema.schema,
      logger: silentLogger(),
      // Any gRPC target: a dns:/// name, dialed round-robin by the kit client.
      presence: { cubeAddress: `dns:///localhost:${port}` },
    });
    machines = createClient(MachineService, `127.0.0.1:${presence.port}`);
  });
  afterAll(async () => {
    machines?.close();
    await presence?.stop();
    await peer.host.shutdown(500);
    await schema.drop();
  });

  it("resolves a user token through a dns:/// target", async () => {
    const listed = await machines.listMachines({}, bearer("umx_user_fast_secret"));
    expect(listed.machines).toEqual([]);
    expect(peer.seen.map((c) => c.token)).toEqual(["umx_user_fast_secret"]);
  });

  it("passes the caller's remaining deadline, and the lookup ends when it passes", async () => {
    const deadline = Date.now() + 400;
    await expect(
      machines.listMachines({}, { ...bearer("umx_user_slow_secret"), deadline: new Date(deadline) }),
    ).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    const call = peer.seen.find((c) => c.token === "umx_user_slow_secret");
    expect(call?.deadline).toBeDefined();
    // The caller's deadline (clocks are the same here; a little slack for the hops), not presence's 5 s default.
    expect(Math.abs((call?.deadline?.getTime() ?? 0) - deadline)).toBeLessThan(150);
    await eventually(() => call?.endedAt !== undefined, "the cube lookup to be cut at the caller's deadline", 2_000);
    expect((call?.endedAt ?? 0) - deadline).toBeLessThan(1_000);
  });
});
