import { create, toBinary } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import {
  CubeService,
  DronesSinceRequestSchema,
  GetCubeRequestSchema,
} from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { ListAuditEventsRequestSchema } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { LinkRequestSchema } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";

import { binaryFault, checkRequest, jsonTextFault, serviceDefinition, toStatus } from "@unimatrix/service-kit/grpc";

const ID = "0e8b1f62-7a4b-4c9e-9a3e-4b2f1c0d9e8a";
const cat = (...parts: (Uint8Array | number[])[]) => Uint8Array.from(parts.flatMap((p) => [...p]));

describe("decode faults name the field a body breaks (issue 25 item 10)", () => {
  const valid = toBinary(GetCubeRequestSchema, create(GetCubeRequestSchema, { cubeId: ID }));

  test("binary: invalid UTF-8, a wrong wire type and a truncated length name the field", () => {
    expect(binaryFault(GetCubeRequestSchema, valid)).toBeNull();
    expect(binaryFault(GetCubeRequestSchema, Uint8Array.of(0x0a, 3, 0x61, 0xff, 0xfe))?.field).toBe("cube_id");
    expect(binaryFault(GetCubeRequestSchema, Uint8Array.of(0x08, 5))).toEqual({
      field: "cube_id",
      reason: "wrong wire type 0 for a scalar field",
    });
    expect(binaryFault(GetCubeRequestSchema, cat(valid, [0x0a, 0xff]))?.field).toBe("cube_id");
    // No field owns a malformed tag.
    expect(binaryFault(GetCubeRequestSchema, Uint8Array.of(0x0f))?.field).toBe("request");
  });

  test("binary: a nested field is named by its path", () => {
    const hello = LinkRequestSchema.fields.find((f) => f.name === "hello")!;
    const number = hello.message!.fields.find((f) => f.name === "hostname")!.number;
    const hostname = [(number << 3) | 2, 3, 0x61, 0xff, 0xfe]; // LinkHello.hostname ← invalid UTF-8
    const bytes = cat([(hello.number << 3) | 2, hostname.length], hostname); // LinkRequest.hello
    expect(binaryFault(LinkRequestSchema, bytes)?.field).toBe("hello.hostname");
  });

  test("JSON: a timestamp that does not decode names its field, as does a wrong type or unknown member", () => {
    const fault = (json: object) => jsonTextFault(ListAuditEventsRequestSchema, JSON.stringify(json));
    expect(fault({ startTime: "2026-01-01T00:00:00Z" })).toBeNull();
    expect(fault({ startTime: "2026-01-01T00:00:00Z", endTime: { seconds: 1 } })?.field).toBe("end_time");
    expect(fault({ startTime: "yesterday" })?.field).toBe("start_time");
    expect(fault({ pageSize: "many" })?.field).toBe("page_size");
    expect(fault({ eventTypes: ["X_BOGUS"] })?.field).toBe("event_types");
    expect(fault({ bogusFilter: 1 })).toEqual({
      field: "bogusFilter",
      reason: "is not a field of unimatrix.device.v1.ListAuditEventsRequest",
    });
    expect(jsonTextFault(ListAuditEventsRequestSchema, "{")?.field).toBe("request");
    const both = { cubeId: ID, sinceTime: "2026-01-01T00:00:00Z", sinceEntryId: ID };
    expect(jsonTextFault(DronesSinceRequestSchema, JSON.stringify(both))).toEqual({
      field: "anchor",
      reason: "is set by both since_time and since_entry_id",
    });
  });

  test("the gRPC request deserializer carries the field to INVALID_ARGUMENT", () => {
    const decode = serviceDefinition(CubeService).getCube!.requestDeserialize;
    const request = decode(Buffer.from([0x0a, 3, 0x61, 0xff, 0xfe]));
    let error: unknown;
    try {
      checkRequest(GetCubeRequestSchema, request);
    } catch (e) {
      error = e;
    }
    const answer = toStatus(error);
    expect(answer.code).toBe(status.INVALID_ARGUMENT);
    expect(answer.message).toMatch(/^cube_id: is not a valid unimatrix\.cube\.v1\.GetCubeRequest message/);
  });
});

describe("a value out of range for its column is the caller's (issue 25 item 4, second line)", () => {
  test("Postgres 22003 through Prisma's adapter, PGlite's bare SQLSTATE and P2020 are INVALID_ARGUMENT", () => {
    const adapter = Object.assign(new Error("value out of range"), {
      code: "P2010",
      meta: { driverAdapterError: { cause: { originalCode: "22003", kind: "ValueOutOfRange" } } },
    });
    for (const error of [adapter, Object.assign(new Error("x"), { code: "22003" }), { code: "P2020" }]) {
      expect(toStatus(error)).toEqual({ code: status.INVALID_ARGUMENT, message: "request: a value is out of range" });
    }
  });
});
