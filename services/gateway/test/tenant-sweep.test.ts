import { toBinary, toJson } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { internalMethods, publicMethods } from "@unimatrix/app";
import { signPrincipal } from "@unimatrix/service-kit/auth";
import { TEST_INTERNAL_KEY, validRequest } from "@unimatrix/service-kit/testing";
import { connectCall, grpcCall, servedByGateway } from "./sweep/transports";
import { call, type System, seedTenant, startSystem } from "./system";

/** RPCs whose request is a credential, not ids (nothing of A's can be named in them). */
const CREDENTIAL_RPCS = new Set(["EnrollDevice", "Authenticate"]);
/** Codes a call naming another tenant's ids may answer (DESIGN §2: NOT_FOUND, no existence oracle); ALREADY_EXISTS is B colliding with itself (both callers create the same name). */
const ALLOWED = new Set([
  "not_found",
  "permission_denied",
  "failed_precondition",
  "invalid_argument",
  "already_exists",
  "ok",
]);

describe("the tenant sweep: every RPC as tenant B with tenant A's ids", () => {
  let system: System;
  let a: Awaited<ReturnType<typeof seedTenant>>;
  let b: Awaited<ReturnType<typeof seedTenant>>;
  const ids: Record<string, string> = {};
  /** Everything of A's that must never reach B: ids, names, messages. */
  const secrets: string[] = [];
  let bMachine: { machine: { id: string } };

  beforeAll(async () => {
    system = await startSystem("gw_tenants", { rateLimitPerSecond: 0 });
    a = await seedTenant(system, "acme-secret-tenant", 1);
    b = await seedTenant(system, "globex", 1);
    const agent = a.clients[0]!;
    const seat = await call<{ drone: { id: string; label: string }; sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: a.cubeId, roleId: a.roleId, hostname: "acme-secret-host" },
      agent.token,
    );
    const entry = await call<{ entry: { id: string } }>(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: a.cubeId, message: "acme secret message", visibility: "VISIBILITY_BROADCAST" },
      seat.sessionToken,
    );
    const decision = await call<{ decision: { id: string } }>(
      system,
      "unimatrix.cube.v1.ActivityService/RecordDecision",
      { cubeId: a.cubeId, title: "acme secret decision", entryId: entry.entry.id },
      seat.sessionToken,
    );
    const machine = await call<{ machine: { id: string } }>(
      system,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name: "acme-secret-machine" },
      a.user,
    );
    const issued = await call<{ enrollToken: { id: string }; token: string }>(
      system,
      "unimatrix.device.v1.EnrollmentService/IssueEnrollToken",
      { ttlSeconds: 600, label: "acme-secret-label" },
      a.user,
    );
    const spare = await call<{ enrollToken: { id: string } }>(
      system,
      "unimatrix.device.v1.EnrollmentService/IssueEnrollToken",
      { ttlSeconds: 600, label: "acme-secret-spare" },
      a.user,
    );
    const device = await call<{ device: { id: string; owner: { subjectId: string } } }>(
      system,
      "unimatrix.device.v1.DeviceService/EnrollDevice",
      {
        enrollToken: issued.token,
        publicKey: "YWNtZXNlY3JldGtleQ",
        platform: "DEVICE_PLATFORM_LINUX",
        displayName: "acme-secret-device",
      },
    );
    await call(
      system,
      "unimatrix.device.v1.PlacementService/PlaceSession",
      { rootSessionId: "acme-secret-root", deviceId: device.device.id },
      a.user,
    );
    await call(
      system,
      "unimatrix.device.v1.PlacementService/BeginRun",
      { rootSessionId: "acme-secret-root", runId: "acme-secret-run" },
      a.user,
    );
    // A's seat on A's machine gets a DIRECT entry: a notice queued for A's machine (NoticeService).
    const onMachine = await call<{ drone: { id: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: a.cubeId, roleId: a.roleId, hostname: "acme-secret-host", machineId: machine.machine.id },
      agent.token,
    );
    await call(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      {
        cubeId: a.cubeId,
        message: "acme secret notice",
        visibility: "VISIBILITY_DIRECT",
        recipientDroneIds: [onMachine.drone.id],
      },
      seat.sessionToken,
    );
    const sql = await system.cube.database.openSession();
    try {
      const [notice] = await sql.query<{ id: string }>(
        `SELECT id::text FROM "${system.cube.database.schema}".notices WHERE drone_id = $1`,
        [onMachine.drone.id],
      );
      ids.notice_id = notice?.id as string;
    } finally {
      await sql.close();
    }
    bMachine = await call<{ machine: { id: string } }>(
      system,
      "unimatrix.presence.v1.MachineService/RegisterMachine",
      { name: "globex-machine" },
      b.user,
    );
    Object.assign(ids, {
      cube_id: a.cubeId,
      role_id: a.roleId,
      drone_id: seat.drone.id,
      prior_drone_id: seat.drone.id,
      entry_id: entry.entry.id,
      since_entry_id: entry.entry.id,
      reply_to_entry_id: entry.entry.id,
      client_id: agent.id,
      user_id: device.device.owner.subjectId,
      owner_subject_id: device.device.owner.subjectId,
      machine_id: machine.machine.id,
      device_id: device.device.id,
      enroll_token_id: spare.enrollToken.id,
      root_session_id: "acme-secret-root",
      run_id: "acme-secret-run",
      // A's live drone session token (BindSession as B's machine: NOT_FOUND; AttachSeat: rejected).
      session_token: seat.sessionToken,
    });
    secrets.push(...Object.values(ids), decision.decision.id, seat.drone.label, "acme-secret", "acme secret");
  }, 180_000);
  afterAll(async () => {
    await system?.stop();
  });

  test("answers NOT_FOUND (or the documented PERMISSION_DENIED / FAILED_PRECONDITION) and leaks nothing", async () => {
    const callers = { user: b.user, client: b.clients[0]!.token };
    const failures: string[] = [];
    const codes: Record<string, number> = {};
    let sent = 0;
    const methods = publicMethods().filter(
      ({ method }) => servedByGateway(method) && !CREDENTIAL_RPCS.has(method.name),
    );
    for (const { method } of methods) {
      const request = validRequest(method.input, ids);
      const body = Buffer.from(JSON.stringify(toJson(method.input, request)));
      const named = method.input.fields.some((f) => ids[f.name] !== undefined);
      for (const [who, token] of Object.entries(callers)) {
        const answer = await connectCall(system, method, "json", body, token);
        sent++;
        codes[answer.code] = (codes[answer.code] ?? 0) + 1;
        const where = `${method.parent.name}.${method.name} as B's ${who}`;
        if (!ALLOWED.has(answer.code)) failures.push(`${where}: ${answer.code} ${answer.message}`);
        if (answer.code === "invalid_argument" && !/^[a-z_.]+: /.test(answer.message))
          failures.push(`${where}: invalid_argument naming no field: ${answer.message}`);
        // Echoing an id B itself sent is no leak; anything else of A's is.
        const sent_ = body.toString("utf8");
        const leaked = secrets.filter((s) => answer.text.includes(s) && !sent_.includes(s));
        if (leaked.length > 0) failures.push(`${where}: answer contains A's ${leaked.join(", ")}`);
        if (answer.code === "ok" && named && method.name.startsWith("Get")) failures.push(`${where}: read A's record`);
      }
    }
    // Internal services (gRPC only): NoticeService as B's machine, and as a machine of B's tenant
    // carrying A's machine id. ConfirmNotice of A's notice is NOT_FOUND; B's notice stream carries
    // nothing of A's (its first message, a heartbeat, or the call's deadline with nothing sent).
    const cube = new grpc.Client(`127.0.0.1:${system.cube.port}`, grpc.credentials.createInsecure());
    const machines = [bMachine.machine.id, ids.machine_id as string].map((subjectId) =>
      signPrincipal({ kind: "machine", tenantId: b.tenantId, subjectId }, TEST_INTERNAL_KEY, Date.now(), 600_000),
    );
    const internal = internalMethods();
    for (const { method } of internal) {
      const body = toBinary(method.input, validRequest(method.input, ids));
      for (const principal of machines) {
        const answer = await grpcCall(cube, method, body, { principal });
        sent++;
        codes[answer.code] = (codes[answer.code] ?? 0) + 1;
        const where = `${method.parent.name}.${method.name} as B's machine`;
        const expected = method.methodKind === "server_streaming" ? ["deadline_exceeded", "ok"] : ["not_found"];
        if (!expected.includes(answer.code)) failures.push(`${where}: ${answer.code} ${answer.message}`);
        const leaked = secrets.filter((x) => answer.text.includes(x));
        if (leaked.length > 0) failures.push(`${where}: answer contains A's ${leaked.join(", ")}`);
      }
    }
    cube.close();
    expect(internal.length).toBeGreaterThanOrEqual(2);

    // A's data is intact and still A's.
    const read = await call<{ items: { entry?: { message: string } }[] }>(
      system,
      "unimatrix.cube.v1.ActivityService/ReadActivity",
      { cubeId: a.cubeId },
      a.user,
    );
    expect(read.items.map((i) => i.entry?.message)).toContain("acme secret message");
    console.log(
      `tenant sweep: ${methods.length} RPCs × ${Object.keys(callers).length} callers of tenant B, ${sent} requests, ` +
        `answers ${Object.entries(codes)
          .map(([c, n]) => `${c} ${n}`)
          .join(", ")}, ${failures.length} failures`,
    );
    expect(failures).toEqual([]);
    expect(methods.length).toBeGreaterThanOrEqual(45);
  }, 300_000);
});
