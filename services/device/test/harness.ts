import { randomUUID } from "node:crypto";
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import { AuditService } from "@unimatrix/contracts/unimatrix/device/v1/audit_service_pb";
import { DeviceService } from "@unimatrix/contracts/unimatrix/device/v1/device_service_pb";
import { EnrollmentService } from "@unimatrix/contracts/unimatrix/device/v1/enrollment_service_pb";
import { PlacementService } from "@unimatrix/contracts/unimatrix/device/v1/placement_service_pb";
import { DevicePlatform } from "@unimatrix/contracts/unimatrix/device/v1/types_pb";
import { type RunningDevice, startDevice } from "@unimatrix/device";
import type { Principal } from "@unimatrix/service-kit/auth";
import { type Bus, openBus } from "@unimatrix/service-kit/bus";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { createClient } from "@unimatrix/service-kit/grpc";
import type { SqlSession } from "@unimatrix/service-kit/store";
import {
  asBearer,
  asPrincipal,
  TEST_INTERNAL_KEY,
  TEST_REDIS_URL,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";

/** One device service on its own schema and bus prefix, with clients and a SQL session. */
export interface Harness {
  readonly service: RunningDevice;
  readonly clock: ManualClock;
  readonly busPrefix: string;
  readonly sql: SqlSession;
  readonly enrollment: ReturnType<typeof createClient<typeof EnrollmentService>>;
  readonly devices: ReturnType<typeof createClient<typeof DeviceService>>;
  readonly placement: ReturnType<typeof createClient<typeof PlacementService>>;
  readonly audit: ReturnType<typeof createClient<typeof AuditService>>;
  /** A second bus on the same prefix, as another service would have. */
  openBus(): Promise<Bus>;
  close(): Promise<void>;
}

/** Starts a harness. */
export async function startHarness(label: string, leaseSeconds = 30, sweepMs = 0): Promise<Harness> {
  const schema = testSchema(label);
  const busPrefix = testBusPrefix(label);
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  const service = await startDevice({
    config: testConfig({ busPrefix }),
    port: 0,
    schema: schema.schema,
    clock,
    leaseSeconds,
    sweepMs,
  });
  const address = `127.0.0.1:${service.port}`;
  const sql = await service.database.openSession();
  const buses: Bus[] = [];
  const harness: Harness = {
    service,
    clock,
    busPrefix,
    sql,
    enrollment: createClient(EnrollmentService, address),
    devices: createClient(DeviceService, address),
    placement: createClient(PlacementService, address),
    audit: createClient(AuditService, address),
    async openBus() {
      const bus = await openBus({ url: TEST_REDIS_URL, prefix: busPrefix });
      buses.push(bus);
      return bus;
    },
    async close() {
      for (const client of [harness.enrollment, harness.devices, harness.placement, harness.audit]) client.close();
      for (const bus of buses) await bus.close();
      await sql.close();
      await service.stop();
      await schema.drop();
    },
  };
  return harness;
}

/** Call options carrying a gateway-signed principal (signed with the test internal key). */
export function as(principal: Principal) {
  return asPrincipal(principal, TEST_INTERNAL_KEY);
}

/** Call options carrying a bearer token. */
export const bearer = asBearer;

/** A fresh tenant with a user and two clients. */
export function tenant() {
  const tenantId = randomUUID();
  return {
    tenantId,
    user: { kind: "user", tenantId, subjectId: randomUUID() } as Principal,
    client: { kind: "client", tenantId, subjectId: randomUUID() } as Principal,
    client2: { kind: "client", tenantId, subjectId: randomUUID() } as Principal,
  };
}

export const OPERATOR: Principal = { kind: "operator", subjectId: "operator", tenantId: null };

let keyCounter = 0;
/** A unique public key text. */
export function newPublicKey(): string {
  keyCounter += 1;
  return `${randomUUID().replaceAll("-", "")}${keyCounter.toString(16)}`;
}

/** Issues a token for `owner` and enrolls a device with it; returns the device id and credential. */
export async function enrolledDevice(h: Harness, owner: Principal, platform = DevicePlatform.LINUX) {
  const issued = await h.enrollment.issueEnrollToken({ ttlSeconds: 600 }, as(owner));
  const enrolled = await h.devices.enrollDevice({ enrollToken: issued.token, publicKey: newPublicKey(), platform });
  const device = enrolled.device;
  if (!device) throw new Error("no device");
  const principal: Principal = { kind: "device", tenantId: device.owner?.tenantId ?? "", subjectId: device.id };
  return { id: device.id, token: enrolled.deviceToken, principal, tokenId: issued.enrollToken?.id ?? "" };
}

/** Rows of a table in the harness schema. */
export async function count(h: Harness, table: string, where = "TRUE", params: unknown[] = []): Promise<number> {
  const rows = await h.sql.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table} WHERE ${where}`, params);
  return Number(rows[0]?.n ?? 0);
}

/** Milliseconds of an optional wire timestamp (NaN when absent). */
export function ms(ts: Timestamp | undefined): number {
  return ts ? timestampMs(ts) : Number.NaN;
}
