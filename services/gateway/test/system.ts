import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCube } from "@unimatrix/cube";
import { startDevice } from "@unimatrix/device";
import { type RunningGateway, startGateway } from "@unimatrix/gateway";
import { startPresence } from "@unimatrix/presence";
import { readConfig } from "@unimatrix/service-kit/config";
import { silentLogger } from "@unimatrix/service-kit/logger";
import type { CommonConfig, RunningService } from "@unimatrix/service-kit/service";
import {
  eventually,
  TEST_INTERNAL_KEY,
  type TestSchema,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";
import { gatewayEnv } from "../src/config";

export const OPERATOR_TOKEN = "umx_operator_gatewaytest_0123456789abcdef";

/** All four services on real Postgres (a schema each) and Redis (one prefix), gateway in front. */
export interface System {
  readonly url: string;
  /** The gateway's `/metrics`, on its own port. */
  readonly metricsUrl: string;
  readonly gateway: RunningGateway;
  readonly cube: RunningService;
  readonly device: RunningService;
  readonly presence: RunningService;
  readonly config: CommonConfig;
  /** The cube's schema (a second cube replica on it shares the cube's data). */
  readonly cubeSchema: string;
  /** Presence's schema (a second presence replica on it shares presence's data). */
  readonly presenceSchema: string;
  stop(): Promise<void>;
}

/** Options for the gateway under test. */
export type GatewayOverrides = Partial<ReturnType<typeof readConfig<typeof gatewayEnv>>>;

/** Starts the whole system for one suite. */
export async function startSystem(
  label: string,
  overrides: GatewayOverrides = {},
  store: "postgres" | "embedded" = "postgres",
  /** Cube settings for this suite (a short session TTL, say). */
  cubeSettings: Parameters<typeof startCube>[0]["cube"] = {},
): Promise<System> {
  const embedded = store === "embedded" ? mkdtempSync(join(tmpdir(), `umx-${label}-`)) : undefined;
  const config = testConfig({
    busPrefix: testBusPrefix(label),
    operatorToken: OPERATOR_TOKEN,
    // The embedded store: a PGlite directory per service under a fresh folder.
    ...(embedded ? { databaseUrl: undefined, dataDir: embedded } : {}),
  });
  const schemas: TestSchema[] = [];
  const schema = (name: string) => {
    const s = testSchema(`${label}_${name}`);
    schemas.push(s);
    return s.schema;
  };
  const logger = silentLogger();
  const cubeSchema = schema("cube");
  const presenceSchema = schema("presence");
  // Cube asks presence about machines (AttachSeat's machine_id); presence starts beside it.
  let presencePort: number | undefined;
  const presenceAddressOf = () => (presencePort === undefined ? undefined : `127.0.0.1:${presencePort}`);
  const starts = [
    () => startCube({ config, port: 0, schema: cubeSchema, logger, cube: { presenceAddressOf, ...cubeSettings } }),
    () => startDevice({ config, port: 0, schema: schema("device"), logger }),
    () => startPresence({ config, port: 0, schema: presenceSchema, logger }),
  ] as const;
  // PGlite's start-up holds the event loop (wasm): one at a time, so no bus connect times out meanwhile.
  // A failed start stops what did start, so a broken suite leaves nothing running.
  const started: RunningService[] = [];
  const start = async <S extends RunningService>(run: () => Promise<S>) => {
    const service = await run();
    started.push(service);
    return service;
  };
  let cube: Awaited<ReturnType<(typeof starts)[0]>>;
  let device: Awaited<ReturnType<(typeof starts)[1]>>;
  let presence: Awaited<ReturnType<(typeof starts)[2]>>;
  try {
    if (embedded) {
      cube = await start(starts[0]);
      device = await start(starts[1]);
      presence = await start(starts[2]);
    } else {
      [cube, device, presence] = await Promise.all([start(starts[0]), start(starts[1]), start(starts[2])]);
    }
    presencePort = presence.port;
  } catch (error) {
    await Promise.allSettled(started.map((s) => s.stop()));
    for (const s of schemas) await s.drop().catch(() => {});
    throw error;
  }
  const gateway = await startGateway({
    config,
    gateway: {
      ...readConfig(gatewayEnv, {}),
      port: 0,
      cubeAddress: `127.0.0.1:${cube.port}`,
      deviceAddress: `127.0.0.1:${device.port}`,
      presenceAddress: `127.0.0.1:${presence.port}`,
      corsOrigins: ["https://console.example.com"],
      ...overrides,
    },
    internalKey: TEST_INTERNAL_KEY,
    logger,
    metricsPort: 0,
  });
  return {
    url: `http://127.0.0.1:${gateway.port}`,
    metricsUrl: `http://127.0.0.1:${gateway.metricsPort}/metrics`,
    gateway,
    cube,
    device,
    presence,
    config,
    cubeSchema,
    presenceSchema,
    async stop() {
      await gateway.stop();
      await Promise.all([cube.stop(), device.stop(), presence.stop()]);
      for (const s of schemas) await s.drop();
      if (embedded) rmSync(embedded, { recursive: true, force: true });
    },
  };
}

/** Another gateway replica in front of the same services, sharing the system's Redis (prefix). */
export async function addGateway(
  system: System,
  overrides: GatewayOverrides = {},
  config: Partial<CommonConfig> = {},
): Promise<RunningGateway & { url: string; metricsUrl: string }> {
  const gateway = await startGateway({
    config: { ...system.config, ...config },
    gateway: {
      ...readConfig(gatewayEnv, {}),
      port: 0,
      cubeAddress: `127.0.0.1:${system.cube.port}`,
      deviceAddress: `127.0.0.1:${system.device.port}`,
      presenceAddress: `127.0.0.1:${system.presence.port}`,
      corsOrigins: ["https://console.example.com"],
      ...overrides,
    },
    internalKey: TEST_INTERNAL_KEY,
    logger: silentLogger(),
    metricsPort: 0,
  });
  return Object.assign(gateway, {
    url: `http://127.0.0.1:${gateway.port}`,
    metricsUrl: `http://127.0.0.1:${gateway.metricsPort}/metrics`,
  });
}

/** A Connect unary call with JSON, as any script would make it with fetch. */
export async function connectJson(
  system: Pick<System, "url">,
  path: string,
  body: unknown,
  token?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${system.url}/${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Calls a Connect JSON RPC and fails the test on a non-200 answer. */
export async function call<T = Record<string, unknown>>(
  system: Pick<System, "url">,
  path: string,
  body: unknown,
  token?: string,
): Promise<T> {
  const { status, body: answer } = await connectJson(system, path, body, token);
  if (status !== 200) throw new Error(`${path} answered ${status}: ${JSON.stringify(answer)}`);
  return answer as T;
}

/** A tenant with an admin user, a cube with a worker role, and `clients` clients with write access. */
export async function seedTenant(system: System, name: string, clients = 2) {
  const tenant = await call<{ tenant: { id: string }; adminUserToken: string }>(
    system,
    "unimatrix.cube.v1.IdentityService/CreateTenant",
    { name, adminDisplayName: `${name} admin` },
    OPERATOR_TOKEN,
  );
  const user = tenant.adminUserToken;
  const cube = await call<{ cube: { id: string } }>(
    system,
    "unimatrix.cube.v1.CubeService/CreateCube",
    { requestKey: crypto.randomUUID(), name: `${name} cube`, directive: "ship it" },
    user,
  );
  const role = await call<{ role: { id: string } }>(
    system,
    "unimatrix.cube.v1.CubeService/CreateRole",
    { cubeId: cube.cube.id, name: "worker", isDefault: true, canBroadcast: true },
    user,
  );
  const issued: { id: string; token: string }[] = [];
  for (let i = 0; i < clients; i++) {
    const client = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: `${name}-agent-${i}` },
      user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: client.client.id, cubeId: cube.cube.id, access: "CUBE_ACCESS_WRITE" },
      user,
    );
    issued.push({ id: client.client.id, token: client.token });
  }
  return { tenantId: tenant.tenant.id, user, cubeId: cube.cube.id, roleId: role.role.id, clients: issued };
}

/** A sample's value on a Prometheus metrics page (0 when absent); `labels` must all match. */
async function metricValue(metricsUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const sample = Object.fromEntries([...(match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => sample[key] === value)) return Number(match[3]);
  }
  return 0;
}

/** Resolves once the `log_wait` event counter of a gateway has grown past `before` (see `onWaitEvent`). */
export async function waitEventAfter(metricsUrl: string, event: string, before: number): Promise<void> {
  await eventually(
    async () => (await metricValue(metricsUrl, "unimatrix_gateway_mcp_wait_events_total", { event })) > before,
    `log_wait ${event}`,
    10_000,
  );
}

/** The `log_wait` event counter of a gateway now. */
export function waitEvents(metricsUrl: string, event: string): Promise<number> {
  return metricValue(metricsUrl, "unimatrix_gateway_mcp_wait_events_total", { event });
}

/** A port nothing listens on yet (a replica about to come up there, or a gateway whose public URL is needed before it starts). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
