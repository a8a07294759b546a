import type { DescMethod } from "@bufbuild/protobuf";
import { publicMethods } from "@unimatrix/service-kit/testing";
import { BOUNDARIES, binaryWith, jsonWith, numericPaths } from "./sweep/boundaries";
import { rowCounter } from "./sweep/rows";
import { type Answer, connectCall, servedByGateway } from "./sweep/transports";
import { call, type System, seedTenant, startSystem } from "./system";

/**
 * Issue 25 item 4: every numeric field of every request the gateway serves (found by walking the
 * generated descriptors, nested messages included) × 0, −1, 2^31, 2^53, 2^63−1, 2^63, 2^64−1 ×
 * Connect JSON and binary. No answer is a 5xx or INTERNAL, a refusal names the field it is about,
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

    test("no 5xx, refusals name their field and change no row", async () => {
      const services = [system.cube, system.device, system.presence];
      const methods = publicMethods()
        .map(({ method }) => method)
        .filter((method) => servedByGateway(method) && numericPaths(method.input).length > 0);
      const failures: string[] = [];
      const fields = new Set<string>();
      const outcomes: Record<string, number> = {};
      const counter = await rowCounter(services);
      let baseline = await counter.counts();
      const changedSince = (counts: Record<string, number>) =>
        Object.keys(counts).filter((table) => counts[table] !== baseline[table]);
      for (const method of methods) {
        for (const path of numericPaths(method.input)) {
          fields.add(`${method.name}.${path.name}`);
          for (const value of BOUNDARIES) {
            for (const format of ["json", "proto"] as const) {
              const body =
                format === "json"
                  ? Buffer.from(jsonWith(method, ids, path, value))
                  : binaryWith(method, ids, path, value);
              const answer: Answer = await connectCall(system, method, format, body, tokenFor(method));
              outcomes[answer.code] = (outcomes[answer.code] ?? 0) + 1;
              const where = `${method.parent.name}.${method.name} ${format} ${path.name} ← ${value}`;
              if (answer.http >= 500 || ["internal", "unknown", "data_loss"].includes(answer.code)) {
                failures.push(`${where}: HTTP ${answer.http} ${answer.code} ${answer.message}`);
              } else if (answer.code === "invalid_argument" && !answer.message.startsWith(`${path.fields[0]!.name}`)) {
                failures.push(`${where}: names another field: ${answer.message}`);
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
      await counter.close();
      console.log(
        `boundary sweep (${store}): ${methods.length} RPCs, ${fields.size} numeric fields (${[...fields].join(", ")}), ` +
          `${fields.size * BOUNDARIES.length * 2} requests; answers ${JSON.stringify(outcomes)}; ${failures.length} failures`,
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
        ]),
      );
    }, 600_000);
  },
);
