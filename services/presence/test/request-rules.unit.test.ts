import { create } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { LinkRequestSchema } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { RegisterMachineRequestSchema } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { issueToken, type Principal } from "@unimatrix/service-kit/auth";
import { DomainError } from "@unimatrix/service-kit/errors";
import { checkRequest } from "@unimatrix/service-kit/grpc";
import { PageTokens, pageSize, requireUuid } from "@unimatrix/service-kit/rules";
import { requireMachine, requireTenant } from "../src/rules/access";
import { heartbeatMissed, heartbeatSeconds, validateHello, validateLater } from "../src/rules/link";
import {
  LIST_PAGE,
  listBinding,
  positionOf,
  positionValue,
  requireMachineToken,
  validateName,
} from "../src/rules/machines";

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

  test("machine names: 1-200 characters, not blank, no control characters (the contract and the service together)", () => {
    const both = (name: string) => {
      checkRequest(RegisterMachineRequestSchema, create(RegisterMachineRequestSchema, { name }));
      return validateName(name);
    };
    expect(both("build-01")).toBe("build-01");
    expect(both("é".repeat(200))).toBe("é".repeat(200));
    expect(both("🤖".repeat(200))).toBe("🤖".repeat(200));
    for (const bad of ["", "   ", "a".repeat(201), "a\u0000b", "a\nb", "tab\there"]) {
      const error = failure(() => both(bad));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toMatch(/^name: /);
    }
  });

  test("page size: 0 → 50, capped at 500, negative refused", () => {
    expect(pageSize("page_size", 0, LIST_PAGE)).toBe(50);
    expect(pageSize("page_size", 1, LIST_PAGE)).toBe(1);
    expect(pageSize("page_size", 500, LIST_PAGE)).toBe(500);
    expect(pageSize("page_size", 501, LIST_PAGE)).toBe(500);
    expect(failure(() => pageSize("page_size", -1, LIST_PAGE)).message).toMatch(/^page_size: /);
  });

  test("page tokens are sealed to the caller and the include_revoked filter", () => {
    const tokens = new PageTokens("test-internal-key-0123456789abcdef0123456789", "presence.ListMachines");
    const user: Principal = { kind: "user", subjectId: ID, tenantId: TENANT };
    const position = { name: "alpha", id: "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b" };
    const binding = listBinding(user, false);
    const token = tokens.seal(positionValue(position), binding);
    expect(positionOf(tokens.open(token, binding))).toEqual(position);
    expect(positionOf(tokens.open("", binding))).toBeNull();
    // The old readable format, garbage, a tampered token, another caller's, other filters: all refused.
    const readable = Buffer.from(JSON.stringify(positionValue(position))).toString("base64url");
    const other: Principal = { kind: "client", subjectId: ID, tenantId: TENANT };
    const tampered = `${Buffer.from(JSON.stringify({ n: "zzz", i: position.id })).toString("base64url")}.${token.split(".")[1]}`;
    for (const open of [
      () => tokens.open(readable, binding),
      () => tokens.open("garbage!", binding),
      () => tokens.open(tampered, binding),
      () => tokens.open(token, listBinding(other, false)),
      () => tokens.open(token, listBinding(user, true)),
    ]) {
      const error = failure(open);
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.message).toMatch(/^page_token: /);
    }
  });

  test("an opened token must hold a listing position", () => {
    for (const bad of [{}, { n: "a" }, { n: "a", i: "not-a-uuid" }, { n: 1, i: ID }, "x", [1]]) {
      expect(failure(() => positionOf(bad)).message).toMatch(/^page_token: /);
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

  test("hello first, with bounded fields (the contract's rules); never again", () => {
    const checked = (message: ReturnType<typeof hello>) => () => {
      checkRequest(LinkRequestSchema, message);
      validateHello(message);
    };
    expect(checked(hello("umx/1", "host"))).not.toThrow();
    expect(checked(hello("v".repeat(100), "h".repeat(255)))).not.toThrow();
    expect(failure(() => validateHello(heartbeat)).message).toMatch(/^hello: /);
    expect(failure(checked(hello("v".repeat(101), "h"))).message).toMatch(/^hello.agent_version: /);
    expect(failure(checked(hello("v", "h".repeat(256)))).message).toMatch(/^hello.hostname: /);
    expect(checked(hello("", ""))).not.toThrow();
    expect(failure(checked(hello("v\u0000", "h"))).message).toMatch(/^hello.agent_version: /);
    expect(failure(checked(hello("v", "host\nname"))).message).toMatch(/^hello.hostname: /);
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
