import { status } from "@grpc/grpc-js";
import type { Principal } from "@unimatrix/service-kit/auth";
import {
  actorOf,
  CALLERS,
  canSee,
  leaseHolder,
  listScope,
  ownedDevice,
  ownedPlacement,
  ownedToken,
  type Scope,
  scopeOf,
  tokenOwner,
} from "../src/rules/access";
import {
  CLIENT,
  CLIENT2,
  DEVICE,
  DEVICE2,
  deviceRow,
  OTHER_TENANT,
  placementRow,
  refusal,
  TENANT,
  tokenRow,
  USER,
} from "./rows";

const user: Principal = { kind: "user", tenantId: TENANT, subjectId: USER };
const client: Principal = { kind: "client", tenantId: TENANT, subjectId: CLIENT };
const device: Principal = { kind: "device", tenantId: TENANT, subjectId: DEVICE };
const operator: Principal = { kind: "operator", subjectId: "operator", tenantId: null };
const machine = { kind: "machine", tenantId: TENANT, subjectId: DEVICE2 } as Principal;
const drone = { kind: "drone-session", tenantId: TENANT, subjectId: DEVICE2 } as Principal;

describe("who may call what (CALLERS, scopeOf)", () => {
  it("maps each principal kind to its scope", () => {
    const all = ["tenant", "owner", "device"] as const;
    expect(scopeOf(user, all)).toEqual({ kind: "tenant", tenantId: TENANT, subjectId: USER });
    expect(scopeOf(client, all)).toEqual({ kind: "owner", tenantId: TENANT, subjectId: CLIENT });
    expect(scopeOf(device, all)).toEqual({ kind: "device", tenantId: TENANT, deviceId: DEVICE });
  });

  it("refuses the operator, machines and drone sessions everywhere with PERMISSION_DENIED", () => {
    for (const allowed of Object.values(CALLERS)) {
      for (const principal of [operator, machine, drone]) {
        expect(refusal(() => scopeOf(principal, allowed)).code).toBe(status.PERMISSION_DENIED);
      }
    }
  });

  it("lets the documented kinds call each RPC and no others", () => {
    const who = (principal: Principal) =>
      Object.entries(CALLERS)
        .filter(([, allowed]) => {
          try {
            scopeOf(principal, allowed);
            return true;
          } catch {
            return false;
          }
        })
        .map(([rpc]) => rpc)
        .sort();
    expect(who(operator)).toEqual([]);
    const tenantCallers = [
      "beginRun",
      "endRun",
      "getDevice",
      "getPlacement",
      "issueEnrollToken",
      "listAuditEvents",
      "listDevices",
      "listEnrollTokens",
      "placeSession",
      "rebindSession",
      "revokeDevice",
      "revokeEnrollToken",
    ].sort();
    expect(who(user)).toEqual(tenantCallers);
    expect(who(client)).toEqual(tenantCallers);
    expect(who(device)).toEqual(
      [
        "acquireConnection",
        "getDevice",
        "getPlacement",
        "heartbeatConnection",
        "listDevices",
        "releaseConnection",
        "revokeDevice",
      ].sort(),
    );
  });

  it("refuses the operator token issue and list (it has no tenant)", () => {
    expect(refusal(() => scopeOf(operator, CALLERS.issueEnrollToken)).code).toBe(status.PERMISSION_DENIED);
    expect(refusal(() => scopeOf(operator, CALLERS.listEnrollTokens)).code).toBe(status.PERMISSION_DENIED);
  });
});

describe("who may see a record (canSee)", () => {
  const tenantScope: Scope = { kind: "tenant", tenantId: TENANT, subjectId: USER };
  const ownerScope: Scope = { kind: "owner", tenantId: TENANT, subjectId: CLIENT };
  const deviceScope: Scope = { kind: "device", tenantId: TENANT, deviceId: DEVICE };

  it("a user sees its whole tenant and nothing of another", () => {
    expect(canSee(tenantScope, ownedDevice(deviceRow({ owner_subject_id: CLIENT2 })))).toBe(true);
    expect(canSee(tenantScope, ownedDevice(deviceRow({ tenant_id: OTHER_TENANT })))).toBe(false);
  });

  it("a client sees only what it owns", () => {
    expect(canSee(ownerScope, ownedDevice(deviceRow()))).toBe(true);
    expect(canSee(ownerScope, ownedDevice(deviceRow({ owner_subject_id: CLIENT2 })))).toBe(false);
    expect(canSee(ownerScope, ownedToken(tokenRow({ owner_subject_id: CLIENT2 })))).toBe(false);
    expect(canSee(ownerScope, ownedDevice(deviceRow({ tenant_id: OTHER_TENANT })))).toBe(false);
  });

  it("a device sees itself and the placements on it, never a token or another device", () => {
    expect(canSee(deviceScope, ownedDevice(deviceRow()))).toBe(true);
    expect(canSee(deviceScope, ownedDevice(deviceRow({ id: DEVICE2 })))).toBe(false);
    expect(canSee(deviceScope, ownedPlacement(placementRow()))).toBe(true);
    expect(canSee(deviceScope, ownedPlacement(placementRow({ device_id: DEVICE2 })))).toBe(false);
    expect(canSee(deviceScope, ownedToken(tokenRow()))).toBe(false);
  });

  it("narrows listings the same way", () => {
    expect(listScope(tenantScope)).toEqual({ tenantId: TENANT, ownerSubjectId: null, deviceId: null });
    expect(listScope(ownerScope)).toEqual({ tenantId: TENANT, ownerSubjectId: CLIENT, deviceId: null });
    expect(listScope(deviceScope)).toEqual({ tenantId: TENANT, ownerSubjectId: null, deviceId: DEVICE });
  });
});

describe("acting on a device", () => {
  it("records the actor: the device, or the subject", () => {
    expect(actorOf({ kind: "device", tenantId: TENANT, deviceId: DEVICE })).toBe(DEVICE);
    expect(actorOf({ kind: "owner", tenantId: TENANT, subjectId: CLIENT })).toBe(CLIENT);
    expect(actorOf({ kind: "tenant", tenantId: TENANT, subjectId: USER })).toBe(USER);
  });

  it("lets a device hold only its own lease (another id is NOT_FOUND)", () => {
    expect(leaseHolder({ kind: "device", tenantId: TENANT, deviceId: DEVICE }, DEVICE)).toBe(DEVICE);
    const other = refusal(() => leaseHolder({ kind: "device", tenantId: TENANT, deviceId: DEVICE }, DEVICE2));
    expect(other.code).toBe(status.NOT_FOUND);
  });

  it("issues enroll tokens for the caller, or any subject named by a user, never another by a client", () => {
    const userScope = { kind: "tenant", tenantId: TENANT, subjectId: USER } as const;
    const clientScope = { kind: "owner", tenantId: TENANT, subjectId: CLIENT } as const;
    expect(tokenOwner(userScope, null)).toBe(USER);
    expect(tokenOwner(userScope, CLIENT2)).toBe(CLIENT2);
    expect(tokenOwner(clientScope, null)).toBe(CLIENT);
    expect(tokenOwner(clientScope, CLIENT)).toBe(CLIENT);
    expect(refusal(() => tokenOwner(clientScope, CLIENT2)).code).toBe(status.NOT_FOUND);
  });
});
