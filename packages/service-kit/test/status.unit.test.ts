import { Metadata, type ServiceError, status } from "@grpc/grpc-js";
import { credentialKey } from "@unimatrix/service-kit/auth";
import {
  AlreadyExistsError,
  InvalidArgumentError,
  NotFoundError,
  ShutdownReason,
  StoreAnomalyError,
  UnavailableError,
} from "@unimatrix/service-kit/errors";
import { toStatus } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";

function serviceError(code: status, details: string): ServiceError {
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata: new Metadata() });
}

describe("toStatus: the one error → status mapping", () => {
  it("domain errors keep their code and message", () => {
    expect(toStatus(new InvalidArgumentError("cube_id", "must be a UUID"))).toEqual({
      code: status.INVALID_ARGUMENT,
      message: "cube_id: must be a UUID",
    });
    expect(toStatus(new NotFoundError("cube not found"))).toEqual({
      code: status.NOT_FOUND,
      message: "cube not found",
    });
    expect(toStatus(new AlreadyExistsError("taken"))).toEqual({ code: status.ALREADY_EXISTS, message: "taken" });
  });

  it("a downstream gRPC status passes through with its details", () => {
    expect(toStatus(serviceError(status.PERMISSION_DENIED, "not yours"))).toEqual({
      code: status.PERMISSION_DENIED,
      message: "not yours",
    });
  });

  it("a Connect error passes through by shape", () => {
    const connect = Object.assign(new Error("[resource_exhausted] slow down"), {
      name: "ConnectError",
      code: status.RESOURCE_EXHAUSTED,
      rawMessage: "slow down",
    });
    expect(toStatus(connect)).toEqual({ code: status.RESOURCE_EXHAUSTED, message: "slow down" });
  });

  it("shutdown is UNAVAILABLE, an anomaly ABORTED, an uncaught unique violation ALREADY_EXISTS, a Prisma transaction timeout UNAVAILABLE", () => {
    expect(toStatus(new ShutdownReason())).toEqual({ code: status.UNAVAILABLE, message: "server shutting down" });
    expect(new ShutdownReason()).toBeInstanceOf(UnavailableError);
    expect(toStatus(new StoreAnomalyError("row vanished"), silentLogger()).code).toBe(status.ABORTED);
    expect(toStatus(Object.assign(new Error("dup"), { code: "P2002" })).code).toBe(status.ALREADY_EXISTS);
    expect(toStatus(Object.assign(new Error("dup"), { code: "23505" })).code).toBe(status.ALREADY_EXISTS);
    expect(toStatus(Object.assign(new Error("slow"), { code: "P2028" })).code).toBe(status.UNAVAILABLE);
  });

  it("anything else is INTERNAL with a generic message (the cause is not shown)", () => {
    expect(toStatus(new Error("secret detail"))).toEqual({ code: status.INTERNAL, message: "internal error" });
    expect(toStatus("a string")).toEqual({ code: status.INTERNAL, message: "internal error" });
    expect(toStatus(undefined)).toEqual({ code: status.INTERNAL, message: "internal error" });
  });
});

describe("credentialKey", () => {
  const tenantId = "t";
  it("is the token's owner; a drone session counts as its client; the operator is one credential", () => {
    expect(credentialKey({ kind: "user", subjectId: "u1", tenantId })).toBe("user:u1");
    expect(credentialKey({ kind: "client", subjectId: "c1", tenantId })).toBe("client:c1");
    expect(credentialKey({ kind: "machine", subjectId: "m1", tenantId })).toBe("machine:m1");
    expect(
      credentialKey({ kind: "drone-session", subjectId: "s1", tenantId, clientId: "c1", cubeId: "x", droneId: "d" }),
    ).toBe("client:c1");
    expect(credentialKey({ kind: "operator", subjectId: "operator", tenantId: null })).toBe("operator");
  });
});
