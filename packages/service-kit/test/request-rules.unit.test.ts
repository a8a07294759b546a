import { readFileSync } from "node:fs";
import { join } from "node:path";
import { create, type DescField, getOption, hasOption } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { publicMethods } from "@unimatrix/app";
import { field as fieldRules } from "@unimatrix/contracts/buf/validate/validate_pb";
import {
  AppendEntryRequestSchema,
  RecordDecisionRequestSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import {
  CreateRoleRequestSchema,
  DronesSinceRequestSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import {
  type AuditEventType,
  ListAuditEventsRequestSchema,
} from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { LinkRequestSchema } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { DomainError } from "@unimatrix/service-kit/errors";
import {
  CONTRACT_PATTERNS,
  checkRequest,
  numberLimits,
  stringLimits,
  UndecodableRequest,
} from "@unimatrix/service-kit/grpc";

const ROOT = join(__dirname, "..", "..", "..");
const CUBE = "0e8b1f62-7a4b-4c9e-9a3e-4b2f1c0d9e8a";

/** The status a check throws: code and details. */
function failure(run: () => void): { code: number; details: string } | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    if (error instanceof DomainError) return { code: error.code, details: error.message };
    throw error;
  }
}

describe("rules in the contract", () => {
  test("the vendored buf/validate/validate.proto compiles to the descriptor @bufbuild/protovalidate embeds", () => {
    const descriptor = (path: string) => /fileDesc\("([^"]*)"/.exec(readFileSync(path, "utf8"))?.[1];
    const ours = descriptor(join(ROOT, "proto", "gen", "buf", "validate", "validate_pb.ts"));
    const theirs = descriptor(
      join(
        ROOT,
        "node_modules",
        "@bufbuild",
        "protovalidate",
        "dist",
        "esm",
        "gen",
        "buf",
        "validate",
        "validate_pb.js",
      ),
    );
    expect(ours).toBeDefined();
    expect(ours).toBe(theirs);
  });

  test("every string, number, enum and repeated field of every public request carries rules", () => {
    const bare: string[] = [];
    const walk = (fields: readonly DescField[], seen: Set<string>) => {
      for (const field of fields) {
        if (field.fieldKind === "message" && !field.message.typeName.startsWith("google.protobuf.")) {
          if (!seen.has(field.message.typeName)) walk(field.message.fields, new Set([...seen, field.message.typeName]));
          continue;
        }
        const ruled = field.fieldKind === "list" || field.fieldKind === "enum" || field.fieldKind === "scalar";
        const isBool = field.fieldKind === "scalar" && field.scalar === 8;
        if (ruled && !isBool && !field.name.includes("heartbeat") && !hasOption(field, fieldRules))
          bare.push(`${field.parent.typeName}.${field.name}`);
      }
    };
    const methods = publicMethods();
    for (const { method } of methods) walk(method.input.fields, new Set([method.input.typeName]));
    expect(methods.length).toBeGreaterThanOrEqual(50);
    expect(bare).toEqual([]);
  });

  test("every pattern the contracts use has a readable reason", () => {
    const patterns = new Set<string>();
    for (const { method } of publicMethods()) {
      const fields = [...method.input.fields, ...method.input.fields.flatMap((f) => f.message?.fields ?? [])];
      for (const field of fields) {
        if (!hasOption(field, fieldRules)) continue;
        const rules = getOption(field, fieldRules);
        const string =
          rules.type.case === "string"
            ? rules.type.value
            : rules.type.case === "repeated" && rules.type.value.items?.type.case === "string"
              ? rules.type.value.items.type.value
              : undefined;
        if (string?.pattern) patterns.add(string.pattern);
      }
    }
    expect(patterns.size).toBeGreaterThanOrEqual(6);
    expect([...patterns].filter((p) => !(p in CONTRACT_PATTERNS))).toEqual([]);
  });

  test("violations are INVALID_ARGUMENT naming the field in snake_case", () => {
    const append = (init: object) =>
      failure(() =>
        checkRequest(
          AppendEntryRequestSchema,
          create(AppendEntryRequestSchema, { cubeId: CUBE, message: "hi", visibility: 1, ...init }),
        ),
      );
    expect(append({})).toBeUndefined();
    expect(append({ message: "x\u0000y" })).toEqual({
      code: status.INVALID_ARGUMENT,
      details: expect.stringMatching(/^message: must be valid UTF-8 text without NUL/),
    });
    expect(append({ message: "line\nand\ttab" })).toBeUndefined();
    expect(append({ message: "bell\u0007" })?.details).toMatch(/^message:/);
    expect(append({ message: "bad \uFFFD utf-8" })?.details).toMatch(/^message:/);
    expect(append({ message: "é".repeat(16_385) })?.details).toMatch(/^message: .*32768 bytes/);
    expect(append({ message: "é".repeat(16_384) })).toBeUndefined();
    expect(append({ cubeId: CUBE.toUpperCase() })).toEqual({
      code: status.INVALID_ARGUMENT,
      details: "cube_id: must be a canonical lowercase UUID",
    });
    expect(append({ visibility: 0 })?.details).toMatch(/^visibility:/);
    expect(append({ visibility: 77 })?.details).toMatch(/^visibility:.*defined/);
    expect(append({ recipientDroneIds: [CUBE, "nope"] })?.details).toMatch(/^recipient_drone_ids: must be a canonical/);
    expect(append({ kind: "a".repeat(65) })?.details).toMatch(/^kind:/);

    const role = (init: object) =>
      failure(() =>
        checkRequest(CreateRoleRequestSchema, create(CreateRoleRequestSchema, { cubeId: CUBE, name: "r", ...init })),
      );
    expect(role({ roleClass: 0 })).toBeUndefined();
    expect(role({ roleClass: 42 })?.details).toMatch(/^role_class:/);
    expect(role({ name: "" })?.details).toMatch(/^name:/);
    expect(role({ name: "two\nlines" })?.details).toMatch(/^name: must be one line/);

    const audit = failure(() =>
      checkRequest(
        ListAuditEventsRequestSchema,
        create(ListAuditEventsRequestSchema, { eventTypes: [1, 999 as AuditEventType] }),
      ),
    );
    expect(audit?.details).toMatch(/^event_types:/);
    const since = failure(() =>
      checkRequest(DronesSinceRequestSchema, create(DronesSinceRequestSchema, { cubeId: CUBE })),
    );
    expect(since?.details).toMatch(/^anchor:/);
    const hello = failure(() =>
      checkRequest(
        LinkRequestSchema,
        create(LinkRequestSchema, { event: { case: "hello", value: { hostname: "h".repeat(256) } } }),
      ),
    );
    expect(hello?.details).toMatch(/^hello\.hostname:/);
  });

  test("an undecodable request is INVALID_ARGUMENT naming the request", () => {
    expect(
      failure(() => checkRequest(AppendEntryRequestSchema, new UndecodableRequest("x.Y", "premature EOF"))),
    ).toEqual({
      code: status.INVALID_ARGUMENT,
      details: "request: is not a valid x.Y message (premature EOF)",
    });
  });

  test("the MCP-facing limits are read from the rules", () => {
    expect(stringLimits(RecordDecisionRequestSchema, "title")).toMatchObject({ required: true, maxLen: 500 });
    expect(stringLimits(AppendEntryRequestSchema, "message")).toMatchObject({ minBytes: 1, maxBytes: 32_768 });
    expect(stringLimits(AppendEntryRequestSchema, "recipient_drone_ids").pattern).toMatch(/^\^\[0-9a-f\]\{8\}/);
    expect(stringLimits(AppendEntryRequestSchema, "kind")).toMatchObject({ minLen: 1, maxLen: 64 });
    expect(stringLimits(AppendEntryRequestSchema, "kind").maxBytes).toBeUndefined();
    expect(numberLimits(AppendEntryRequestSchema, "visibility")).toEqual({});
  });
});
