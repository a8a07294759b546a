import { create } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { LinkRequestSchema } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { DomainError, issueToken, type Principal } from "@unimatrix/service-kit";
import { requireMachine, requireTenant, requireUuid } from "../src/rules/access";
import { heartbeatMissed, heartbeatSeconds, validateHello, validateLater } from "../src/rules/link";
import { decodePosition, encodePosition, pageSizeOf, requireMachineToken, validateName } from "../src/rules/machines";

const TENANT = "00000000-0000-4000-8000-000000000001";
const ID = "00000000-0000-4000-8000-000000000002";

/** The status code and message `fn` fails with. */
function failure(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("expected a failure");
}

describe("who may call", () => {
  const user: Principal = { kind: "user", subjectId: ID, tenantId: TENANT };
  const machine: Principal = { kind: "machine", subjectId: ID, tenantId: TENANT };
  const operator: Principal = { kind: "operator", subjectId: "operator", tenantId: null };
  const device: Principal = { kind: "device", subjectId: ID, tenantId: TENANT };

  test("tenant principals of the allowed kinds pass; operators and other kinds are PERMISSION_DENIED", () => {
    expect(requireTenant(user, ["user", "client"])).toEqual(user);
    expect(requireTenant(machine, ["user", "client", "machine"])).toEqual(machine);
    expect(failure(() => requireTenant(machine, ["user", "client"])).code).toBe(status.PERMISSION_DENIED);
    expect(failure(() => requireTenant(operator, ["user", "client", "machine"])).code).toBe(status.PERMISSION_DENIED);
    expect(failure(() => requireTenant(device, ["user", "client", "machine"])).code).toBe(status.PERMISSION_DENIED);
  });

  test("only a machine opens a link", () => {
    expect(requireMachine(machine)).toEqual(machine);
    for (const p of [user, operator, device])
      expect(failure(() => requireMachine(p)).code).toBe(status.PERMISSION_DENIED);
  });
});

describe("request fields", () => {
  test("ids are canonical lowercase UUIDs", () => {
    const lower = "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b";
    expect(requireUuid("machine_id", lower)).toBe(lower);
    for (const bad of ["", "x", lower.toUpperCase(), `${lower} `, `${lower}\n`, lower.replaceAll("-", "")]) {
      const error = failure(() => requireUuid("machine_id", bad));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toMatch(/^machine_id: /);
    }
  });

  test("machine names: 1-200 characters, not blank, no control characters", () => {
    expect(validateName("build-01")).toBe("build-01");
    expect(validateName("é".repeat(200))).toBe("é".repeat(200));
    expect(validateName("🤖".repeat(200))).toBe("🤖".repeat(200));
    for (const bad of ["", "   ", "a".repeat(201), "a\u0000b", "a\nb", "tab\there"]) {
      const error = failure(() => validateName(bad));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toMatch(/^name: /);
    }
  });

  test("page size: 0 → 50, capped at 500, negative refused", () => {
    expect(pageSizeOf(0)).toBe(50);
    expect(pageSizeOf(1)).toBe(1);
    expect(pageSizeOf(500)).toBe(500);
    expect(pageSizeOf(501)).toBe(500);
    expect(failure(() => pageSizeOf(-1)).message).toMatch(/^page_size: /);
  });

  test("page tokens round-trip a position; anything else is INVALID_ARGUMENT naming page_token", () => {
    expect(decodePosition("")).toBeNull();
    const position = { name: "alpha", id: ID };
    expect(decodePosition(encodePosition(position))).toEqual(position);
    const foreign = Buffer.from(JSON.stringify({ n: "a", i: "not-a-uuid" })).toString("base64url");
    for (const bad of ["garbage!", "e30", foreign, Buffer.from("[1]").toString("base64url")]) {
      const error = failure(() => decodePosition(bad));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toMatch(/^page_token: /);
    }
  });

  test("Authenticate takes a machine token only", () => {
    const token = issueToken("machine").token;
    expect(requireMachineToken(token).kind).toBe("machine");
    expect(failure(() => requireMachineToken("")).message).toMatch(/^token: /);
    expect(failure(() => requireMachineToken(issueToken("user").token)).code).toBe(status.UNAUTHENTICATED);
    expect(failure(() => requireMachineToken("umx_nonsense")).code).toBe(status.UNAUTHENTICATED);
  });
});

describe("link rules", () => {
  const hello = (agentVersion: string, hostname: string) =>
    create(LinkRequestSchema, { event: { case: "hello", value: { agentVersion, hostname } } });
  const heartbeat = create(LinkRequestSchema, { event: { case: "heartbeat", value: {} } });

  test("hello first, with bounded fields; never again", () => {
    expect(() => validateHello(hello("umx/1", "host"))).not.toThrow();
    expect(() => validateHello(hello("v".repeat(100), "h".repeat(255)))).not.toThrow();
    expect(failure(() => validateHello(heartbeat)).message).toMatch(/^hello: /);
    expect(failure(() => validateHello(hello("v".repeat(101), "h"))).message).toMatch(/^hello.agent_version: /);
    expect(failure(() => validateHello(hello("v", "h".repeat(256)))).message).toMatch(/^hello.hostname: /);
    expect(() => validateLater(heartbeat)).not.toThrow();
    expect(failure(() => validateLater(hello("v", "h"))).message).toMatch(/^hello: /);
  });

  test("a link is dead after 3 silent heartbeat intervals; the interval is announced in whole seconds", () => {
    expect(heartbeatMissed(0, 45_000, 15_000)).toBe(false);
    expect(heartbeatMissed(0, 45_001, 15_000)).toBe(true);
    expect(heartbeatSeconds(15_000)).toBe(15);
    expect(heartbeatSeconds(200)).toBe(1);
    expect(heartbeatSeconds(1_600)).toBe(2);
  });
});
