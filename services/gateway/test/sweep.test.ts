import type { DescMethod } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { internalMethods, publicMethods } from "@unimatrix/app";
import { Health, HealthCheckResponse_ServingStatus } from "@unimatrix/contracts/grpc/health/v1/health_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { principalFromMessage, signPrincipal } from "@unimatrix/service-kit/auth";
import { createClient } from "@unimatrix/service-kit/grpc";
import { TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { type BadClass, badInputs, CLASSES } from "./sweep/inputs";
import { rowCounts } from "./sweep/rows";
import { type Answer, connectCall, grpcCall, servedByGateway } from "./sweep/transports";
import { call, type System, seedTenant, startSystem } from "./system";

/**
 * A refusal the caller can act on: 4xx, not INTERNAL/UNKNOWN, and INVALID_ARGUMENT names a field:
 * the very field an input breaks (`cube_id ← upper case`), for binary and JSON alike.
 */
function problemWith(answer: Answer, what: string, method: DescMethod): string | null {
  if (answer.code === "ok") return "accepted";
  if (answer.http >= 500) return `HTTP ${answer.http}`;
  if (["internal", "unknown", "data_loss", "unavailable"].includes(answer.code)) return answer.code;
  if (answer.code !== "invalid_argument") return `${answer.code} instead of invalid_argument`;
  if (!/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*: /.test(answer.message)) return `names no field: ${answer.message}`;
  const name = /^([a-z][a-z0-9_]*) ← /.exec(what)?.[1];
  const field = method.input.fields.find((f) => f.name === name);
  // The field, or its oneof when the input sets a second member of one (`anchor: is set by both …`).
  const names = field ? [field.name, ...(field.oneof ? [field.oneof.name] : [])] : [];
  if (names.length > 0 && !names.some((n) => answer.message.startsWith(`${n}:`) || answer.message.startsWith(`${n}.`)))
    return `names another field: ${answer.message}`;
  return null;
}

describe.each([
  ["Postgres", "postgres"],
  ["the embedded store (PGlite)", "embedded"],
] as const)(
  "the sweep on %s: every public RPC × every class of bad input × Connect JSON, Connect binary and gRPC",
  (_name, store) => {
    let system: System;
    let acme: Awaited<ReturnType<typeof seedTenant>>;
    let machineToken: string;
    /** A machine as presence signs it for NoticeService (the only kind cube lets call it). */
    let signedMachine: string;
    /** The user as the gateway forwards it (device and presence take no user tokens directly). */
    let signedUser: string;

    beforeAll(async () => {
      system = await startSystem(`gw_sweep_${store}`, { rateLimitPerSecond: 0 }, store);
      acme = await seedTenant(system, "acme", 1);
      const machine = await call<{ token: string; machine: { id: string } }>(
        system,
        "unimatrix.presence.v1.MachineService/RegisterMachine",
        { name: "sweeper" },
        acme.user,
      );
      machineToken = machine.token;
      const identity = createClient(IdentityService, `127.0.0.1:${system.cube.port}`);
      const { principal } = await identity.authenticate({ token: acme.user });
      identity.close();
      signedUser = signPrincipal(principalFromMessage(principal)!, TEST_INTERNAL_KEY, Date.now(), 3_600_000);
      signedMachine = signPrincipal(
        { kind: "machine", tenantId: principal!.tenantId, subjectId: machine.machine.id },
        TEST_INTERNAL_KEY,
        Date.now(),
        3_600_000,
      );
    }, 120_000);
    afterAll(async () => {
      await system?.stop();
    });

    test("refuses every bad input with INVALID_ARGUMENT naming a field, stays healthy, changes no row", async () => {
      const services = { cube: system.cube, device: system.device, presence: system.presence };
      const clients = Object.fromEntries(
        Object.entries(services).map(([name, s]) => [
          name,
          new grpc.Client(`127.0.0.1:${s.port}`, grpc.credentials.createInsecure()),
        ]),
      ) as Record<string, grpc.Client>;
      const before = await rowCounts(Object.values(services));
      const failures: string[] = [];
      const cells = new Set<string>();
      const perClass = Object.fromEntries(CLASSES.map((c) => [c, 0])) as Record<BadClass, number>;
      let sent = 0;
      const methods = [...publicMethods(), ...internalMethods()];
      for (const { context, method } of methods) {
        const token = method.parent.typeName === "unimatrix.presence.v1.LinkService" ? machineToken : acme.user;
        for (const input of badInputs(method, { cube_id: acme.cubeId, role_id: acme.roleId })) {
          cells.add(`${method.parent.typeName}/${method.name}×${input.class}`);
          const attempts: [string, () => Promise<Answer>][] = [];
          if (input.json !== undefined && servedByGateway(method)) {
            const json = Buffer.from(input.json);
            attempts.push(["connect-json", () => connectCall(system, method, "json", json, token)]);
          }
          if (input.binary !== undefined) {
            const binary = input.binary;
            if (servedByGateway(method))
              attempts.push(["connect-proto", () => connectCall(system, method, "proto", binary, token)]);
            const internal = method.parent.typeName === "unimatrix.cube.v1.NoticeService";
            const auth =
              token === machineToken ? { bearer: token } : { principal: internal ? signedMachine : signedUser };
            attempts.push(["grpc", () => grpcCall(clients[context]!, method, binary, auth)]);
          }
          for (const [transport, send] of attempts) {
            const answer = await send();
            sent++;
            perClass[input.class]++;
            const problem = problemWith(answer, input.what, method);
            if (problem) failures.push(`${method.parent.name}.${method.name} ${transport} ${input.what}: ${problem}`);
          }
        }
      }
      for (const client of Object.values(clients)) client.close();

      // Still healthy: every service SERVING, the gateway answering, a valid call working.
      for (const service of Object.values(services)) {
        const health = createClient(Health, `127.0.0.1:${service.port}`);
        expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
        health.close();
      }
      expect((await fetch(`${system.url}/healthz`)).status).toBe(200);
      await call(system, "unimatrix.cube.v1.CubeService/GetCube", { cubeId: acme.cubeId }, acme.user);

      const after = await rowCounts(Object.values(services));
      const changed = Object.keys(after).filter((table) => after[table] !== before[table]);
      const contexts = new Set(methods.map((m) => m.context));
      console.log(
        `sweep (${store}, ${system.cube.database.kind}): ${methods.length} RPCs of ${contexts.size} contexts, ${cells.size} route×class cells, ` +
          `${sent} requests sent (${CLASSES.map((c) => `${c} ${perClass[c]}`).join(", ")}), ` +
          `${Object.keys(before).length} tables, ${changed.length} changed, ${failures.length} failures`,
      );
      expect(failures).toEqual([]);
      expect(changed).toEqual([]);
      expect(methods.length).toBeGreaterThanOrEqual(50);
      for (const c of CLASSES) expect(perClass[c]).toBeGreaterThan(0);
    }, 600_000);
  },
);
