import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { CubeAccess, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import type { Clock } from "@unimatrix/service-kit/clock";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import { asBearer, seedTenant, testBusPrefix, testConfig, testSchema } from "@unimatrix/service-kit/testing";
import pg from "pg";
import type { CubeConfig } from "../src/config";
import { type RunningCube, startCube } from "../src/service";

export const OPERATOR_TOKEN = "umx_operator_testlookup_0123456789abcdef0123";

/** One running replica with typed clients. */
export interface Replica {
  readonly service: RunningCube;
  readonly identity: TypedClient<typeof IdentityService>;
  readonly cube: TypedClient<typeof CubeService>;
  readonly activity: TypedClient<typeof ActivityService>;
  stop(): Promise<void>;
}

/** A suite's world: its own schema and bus prefix, one or more replicas on them. */
export interface Harness extends Replica {
  readonly schema: string;
  readonly busPrefix: string;
  /** Starts another replica on the same schema and bus prefix. */
  replica(overrides?: { redisUrl?: string; cube?: Partial<CubeConfig> }): Promise<Replica>;
  /** Runs SQL against the suite's schema. */
  sql<Row = Record<string, unknown>>(text: string, params?: unknown[]): Promise<Row[]>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly clock?: Clock;
  readonly cube?: Partial<CubeConfig>;
  readonly redisUrl?: string;
}

async function startReplica(schema: string, busPrefix: string, options: HarnessOptions): Promise<Replica> {
  const service = await startCube({
    config: testConfig({
      busPrefix,
      operatorToken: OPERATOR_TOKEN,
      ...(options.redisUrl ? { redisUrl: options.redisUrl } : {}),
    }),
    port: 0,
    schema,
    clock: options.clock,
    cube: { livenessIntervalMs: 0, retentionIntervalMs: 0, ...options.cube },
  });
  const address = `127.0.0.1:${service.port}`;
  const identity = createClient(IdentityService, address);
  const cube = createClient(CubeService, address);
  const activity = createClient(ActivityService, address);
  return {
    service,
    identity,
    cube,
    activity,
    async stop() {
      identity.close();
      cube.close();
      activity.close();
      await service.stop();
    },
  };
}

/** Starts a harness for a suite. */
export async function startHarness(label: string, options: HarnessOptions = {}): Promise<Harness> {
  const schema = testSchema(label);
  const busPrefix = testBusPrefix(label);
  const first = await startReplica(schema.schema, busPrefix, options);
  const replicas: Replica[] = [first];
  const pool = new pg.Pool({ connectionString: schema.url, max: 2, options: `-c search_path=${schema.schema}` });
  return {
    ...first,
    schema: schema.schema,
    busPrefix,
    async replica(overrides = {}) {
      const r = await startReplica(schema.schema, busPrefix, { ...options, ...overrides });
      replicas.push(r);
      return r;
    },
    async sql<Row>(text: string, params: unknown[] = []) {
      return (await pool.query(text, params)).rows as Row[];
    },
    async close() {
      for (const r of replicas) await r.stop().catch(() => {});
      await pool.end();
      await schema.drop();
    },
  };
}

/** A tenant with its admin user token (the kit's seeder, the one `npm run bootstrap` uses). */
export async function newTenant(h: Replica, name: string) {
  const { tenantId, userId, userToken } = await seedTenant(
    { grpc: `127.0.0.1:${h.service.port}` },
    { operatorToken: OPERATOR_TOKEN, tenant: name },
  );
  return { tenantId, userId, userToken };
}

/** A client of the user's tenant. */
export async function newClient(h: Replica, userToken: string, name: string) {
  const res = await h.identity.issueClient({ name }, asBearer(userToken));
  return { id: res.client?.id as string, token: res.token };
}

/** A cube created by `token` with one default worker role that can broadcast. */
export async function newCube(h: Replica, token: string, name = "cube", roleOverrides: Record<string, unknown> = {}) {
  const { cube } = await h.cube.createCube(
    { requestKey: crypto.randomUUID(), name, directive: "do it" },
    asBearer(token),
  );
  const { role } = await h.cube.createRole(
    { cubeId: cube?.id as string, name: "worker", isDefault: true, canBroadcast: true, ...roleOverrides },
    asBearer(token),
  );
  return { cubeId: cube?.id as string, roleId: role?.id as string };
}

/** Attaches a new seat for a client and returns the drone id and session token. */
export async function seat(h: Replica, clientToken: string, cubeId: string, roleId = "") {
  const res = await h.cube.attachSeat({ cubeId, roleId, hostname: "host" }, asBearer(clientToken));
  return { droneId: res.drone?.id as string, token: res.sessionToken, label: res.drone?.label as string };
}

/** Grants a client access to a cube. */
export async function grant(h: Replica, userToken: string, clientId: string, cubeId: string, access: CubeAccess) {
  await h.identity.setCubeGrant({ clientId, cubeId, access }, asBearer(userToken));
}

/** Posts a broadcast. */
export async function post(h: Replica, token: string, cubeId: string, message: string, recipients: string[] = []) {
  const res = await h.activity.appendEntry(
    {
      cubeId,
      message,
      visibility: recipients.length > 0 ? Visibility.DIRECT : Visibility.BROADCAST,
      recipientDroneIds: recipients,
    },
    asBearer(token),
  );
  return res.entry as NonNullable<typeof res.entry>;
}

export { CubeAccess, Visibility };
