import type { DescMethod } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { publicMethods } from "@unimatrix/app";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { type Principal, principalFromMessage, signPrincipal } from "@unimatrix/service-kit/auth";
import { createClient } from "@unimatrix/service-kit/grpc";
import { TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { BOUNDARIES, binaryWith, jsonWith, numericPaths } from "./sweep/boundaries";
import { rowCounter } from "./sweep/rows";
import { type Answer, connectCall, grpcCall, servedByGateway } from "./sweep/transports";
import { call, type System, seedTenant, startSystem } from "./system";

/** An INVALID_ARGUMENT message that starts with a field path (`since_time: …`), not `request: …`. */
const NAMES_A_FIELD = /^(?!request:)[a-z][a-z0-9_]*(\.[a-z0-9_]+)*: /;

/**
 * Issue 25 item 4: every numeric field of every request the gateway serves (found by walking the
 * generated descriptors, nested messages included) × 0, −1, 2^31, 2^53, 2^63−1, 2^63, 2^64−1 ×
 * Connect JSON and binary through the gateway, and protobuf over direct gRPC (Link's bidi stream too). No answer is a 5xx or INTERNAL, a refusal names the field it is about,
 * and no refusal changes a row (row counts of every table around every call).
 */
describe.each([
  ["Postgres", "postgres"],
  ["the embedded store (PGlite)", "embedded"],
] as const)(
  "the boundary sweep on %s: every numeric request field × 0, −1, 2^31, 2^53, 2^63−1, 2^63, 2^64−1",
  (_name, store) => {
    let system: System;
    let acme: Awaited<ReturnType<typeof seedTenant>>;
    let ids: Record<string, string>;
    let deviceToken: string;
    let droneToken: string;
    let machineToken: string;
    let userPrincipal: Principal;
    let dronePrincipal: Principal;

    const leaseSeconds = process.env.DEVICE_LEASE_SECONDS;
    beforeAll(async () => {
      // The lease acquired below outlives the sweep: its expiry would write an audit row mid-sweep.
      process.env.DEVICE_LEASE_SECONDS = "3600";
      system = await startSystem(`gw_boundary_${store}`, { rateLimitPerSecond: 0 }, store);
      if (leaseSeconds === undefined) delete process.env.DEVICE_LEASE_SECONDS;
      else process.env.DEVICE_LEASE_SECONDS = leaseSeconds;
      acme = await seedTenant(system, "acme", 1);
      const seat = await call<{ sessionToken: string }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: acme.cubeId, roleId: acme.roleId, hostname: "edge" },
        acme.clients[0]!.token,
      );
      droneToken = seat.sessionToken;
      const posted = await call<{ entry: { id: string } }>(
        system,
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        { cubeId: acme.cubeId, message: "claim me", visibility: "VISIBILITY_BROADCAST" },
        droneToken,
      );
      const issued = await call<{ token: string }>(
        system,
        "unimatrix.device.v1.EnrollmentService/IssueEnrollToken",
        { ttlSeconds: 600 },
        acme.user,
      );
      const enrolled = await call<{ device: { id: string }; deviceToken: string }>(
        system,
        "unimatrix.device.v1.DeviceService/EnrollDevice",
        { enrollToken: issued.token, publicKey: "b0undary5weep0000000000000000000", platform: "DEVICE_PLATFORM_LINUX" },
      );
      deviceToken = enrolled.deviceToken;
      // A live lease (generation 1), so heartbeats and releases reach the row they would change.
      await call(
        system,
        "unimatrix.device.v1.DeviceService/AcquireConnection",
        { deviceId: enrolled.device.id },
        deviceToken,
      );
      const identity = createClient(IdentityService, `127.0.0.1:${system.cube.port}`);
      userPrincipal = principalFromMessage((await identity.authenticate({ token: acme.user })).principal)!;
      dronePrincipal = principalFromMessage((await identity.authenticate({ token: droneToken })).principal)!;
      identity.close();
      const machine = await call<{ token: string }>(
        system,
        "unimatrix.presence.v1.MachineService/RegisterMachine",
        { name: "boundary" },
        acme.user,
      );
      machineToken = machine.token;
      ids = { cube_id: acme.cubeId, role_id: acme.roleId, entry_id: posted.entry.id, device_id: enrolled.device.id };
    }, 120_000);
    afterAll(async () => {
      await system?.stop();
    });

    /** The credential that reaches the method's store code: the device for its lease, a drone for fences. */
    const tokenFor = (method: DescMethod) =>
      method.parent.name === "DeviceService" && method.name.endsWith("Connection")
        ? deviceToken
        : method.name === "TakeOverClaim" || method.name === "CheckFence"
          ? droneToken
          : acme.user;

    /** The same callers as gateway-signed principals for direct gRPC (a machine's bearer token for Link). */
    const grpcAuthFor = (method: DescMethod) =>
      method.parent.name === "LinkService"
        ? { bearer: machineToken }
        : {
            principal: signPrincipal(
              tokenFor(method) === deviceToken
                ? { kind: "device", tenantId: acme.tenantId, subjectId: ids.device_id! }
                : tokenFor(method) === droneToken
                  ? dronePrincipal
                  : userPrincipal,
              TEST_INTERNAL_KEY,
              Date.now(),
              3_600_000,
            ),
          };

    test("Connect JSON, Connect binary and direct gRPC: no 5xx, refusals name their field and change no row", async () => {
      const services = { cube: system.cube, device: system.device, presence: system.presence };
      const clients = Object.fromEntries(
        Object.entries(services).map(([name, s]) => [
          name,
          new grpc.Client(`127.0.0.1:${s.port}`, grpc.credentials.createInsecure()),
        ]),
      ) as Record<string, grpc.Client>;
      const methods = publicMethods().filter(({ method }) => numericPaths(method.input).length > 0);
      const failures: string[] = [];
      const fields = new Set<string>();
      const outcomes: Record<string, number> = {};
      let sent = 0;
      const counter = await rowCounter(Object.values(services));
      let baseline = await counter.counts();
      const changedSince = (counts: Record<string, number>) =>
        Object.keys(counts).filter((table) => counts[table] !== baseline[table]);
      for (const { context, method } of methods) {
        const transports = [...(servedByGateway(method) ? (["json", "proto"] as const) : []), "grpc" as const];
        for (const path of numericPaths(method.input)) {
          fields.add(`${method.name}.${path.name}`);
          for (const value of BOUNDARIES) {
            for (const transport of transports) {
              const answer: Answer =
                transport === "grpc"
                  ? await grpcCall(clients[context]!, method, binaryWith(method, ids, path, value), grpcAuthFor(method))
                  : await connectCall(
                      system,
                      method,
                      transport,
                      transport === "json"
                        ? Buffer.from(jsonWith(method, ids, path, value))
                        : binaryWith(method, ids, path, value),
                      tokenFor(method),
                    );
              sent++;
              outcomes[answer.code] = (outcomes[answer.code] ?? 0) + 1;
              const where = `${method.parent.name}.${method.name} ${transport} ${path.name} ← ${value}`;
              if (answer.http >= 500 || ["internal", "unknown", "data_loss"].includes(answer.code)) {
                failures.push(`${where}: HTTP ${answer.http} ${answer.code} ${answer.message}`);
              } else if (answer.code === "invalid_argument" && !NAMES_A_FIELD.test(answer.message)) {
                // A value the contract admits may still be refused by a rule about another field
                // (Link: `hello: must be the first message`), so any field will do; `request` will not.
                failures.push(`${where}: names no field: ${answer.message}`);
              }
              const counts = await counter.counts();
              if (answer.code !== "ok") {
                const changed = changedSince(counts);
                if (changed.length > 0) failures.push(`${where}: refused (${answer.code}) but changed ${changed}`);
              }
              baseline = counts;
            }
          }
        }
      }
      for (const client of Object.values(clients)) client.close();
      await counter.close();
      console.log(
        `boundary sweep (${store}): ${methods.length} RPCs, ${fields.size} numeric fields (${[...fields].join(", ")}), ` +
          `${sent} requests; answers ${JSON.stringify(outcomes)}; ${failures.length} failures`,
      );
      expect(failures).toEqual([]);
      // The walk reaches the nested and the 64-bit fields, not just page sizes.
      expect([...fields]).toEqual(
        expect.arrayContaining([
          "HeartbeatConnection.generation",
          "TakeOverClaim.fence",
          "RebindSession.expected_rev",
          "DronesSince.since_time.seconds",
          "ListAuditEvents.end_time.nanos",
          "Link.heartbeat.at.seconds",
        ]),
      );
    }, 600_000);
  },
);
