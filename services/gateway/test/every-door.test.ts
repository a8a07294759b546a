import { createClient as createConnectClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Metadata } from "@grpc/grpc-js";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { startCube } from "@unimatrix/cube";
import { startPresence } from "@unimatrix/presence";
import { createClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import { eventually } from "@unimatrix/service-kit/testing";
import { firstAnswer, iterate, type Opened, sseRefusal, sseStream } from "./stream-probes";
import { addGateway, call, connectJson, type System, seedTenant, startSystem } from "./system";

// Every door closes with its credential: each stream kind × each credential change, through both
// gateways (their auth caches warm) and direct gRPC to two replicas of cube and of presence (gateway
// B and the second direct doors go to the second replicas). The stream gets `access_revoked` within
// 1 s of the change, and reopening it with the old credential is refused at once on every door.

type Tenant = Awaited<ReturnType<typeof seedTenant>>;
type Holder = "client" | "drone" | "machine";

/** Opens a stream with `token`; `refused` resolves to the refusal of a fresh open (its HTTP status or gRPC code name). */
interface StreamKind {
  readonly name: string;
  /** Which credentials may open it. */
  readonly holders: readonly Holder[];
  open(token: string, cubeId: string): Opened;
  refused(token: string, cubeId: string): Promise<string>;
}

/** Direct gRPC doors: the cube replicas and presence replicas to open streams on (presence ones that resolve client tokens marked). */
interface Direct {
  readonly cubes: readonly number[];
  readonly presences: readonly { readonly port: number; readonly clients: boolean }[];
}

function kindsFor(gateways: Record<string, string>, direct: Direct): StreamKind[] {
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const kinds: StreamKind[] = [];
  for (const [gw, url] of Object.entries(gateways)) {
    const connect = () => createConnectTransport({ baseUrl: url, httpVersion: "1.1" });
    kinds.push(
      {
        name: `SSE activity via ${gw}`,
        holders: ["client", "drone"],
        open: (token, cubeId) => sseStream(`${url}/v1/cubes/${cubeId}/events`, token),
        refused: (token, cubeId) => sseRefusal(`${url}/v1/cubes/${cubeId}/events`, token),
      },
      {
        name: `SSE machines via ${gw}`,
        holders: ["client", "machine"],
        open: (token) => sseStream(`${url}/v1/machines/events`, token),
        refused: (token) => sseRefusal(`${url}/v1/machines/events`, token),
      },
      {
        name: `Connect SubscribeActivity via ${gw}`,
        holders: ["client", "drone"],
        open: (token, cubeId) => {
          const controller = new AbortController();
          const client = createConnectClient(ActivityService, connect());
          const stream = client.subscribeActivity({ cubeId }, { headers: bearer(token), signal: controller.signal });
          return iterate(stream, () => controller.abort());
        },
        refused: (token, cubeId) =>
          firstAnswer(
            createConnectClient(ActivityService, connect()).subscribeActivity({ cubeId }, { headers: bearer(token) }),
          ),
      },
      {
        name: `Connect WatchMachines via ${gw}`,
        holders: ["client", "machine"],
        open: (token) => {
          const controller = new AbortController();
          const client = createConnectClient(MachineService, connect());
          const stream = client.watchMachines({}, { headers: bearer(token), signal: controller.signal });
          return iterate(stream, () => controller.abort());
        },
        refused: (token) =>
          firstAnswer(createConnectClient(MachineService, connect()).watchMachines({}, { headers: bearer(token) })),
      },
    );
  }
  const grpcMetadata = (token: string) => {
    const metadata = new Metadata();
    metadata.set("authorization", `Bearer ${token}`);
    return metadata;
  };
  for (const [i, port] of direct.cubes.entries()) {
    const activity = createClient(ActivityService, `127.0.0.1:${port}`);
    kinds.push({
      name: `gRPC SubscribeActivity (cube replica ${i + 1})`,
      holders: ["client", "drone"],
      open: (token, cubeId) => {
        const controller = new AbortController();
        const stream = activity.subscribeActivity(
          { cubeId },
          { metadata: grpcMetadata(token), signal: controller.signal },
        );
        return iterate(stream, () => controller.abort());
      },
      refused: (token, cubeId) =>
        firstAnswer(activity.subscribeActivity({ cubeId }, { metadata: grpcMetadata(token) })),
    });
  }
  for (const [i, { port, clients }] of direct.presences.entries()) {
    const machines = createClient(MachineService, `127.0.0.1:${port}`);
    kinds.push({
      name: `gRPC WatchMachines (presence replica ${i + 1})`,
      holders: clients ? ["client", "machine"] : ["machine"],
      open: (token) => {
        const controller = new AbortController();
        const stream = machines.watchMachines({}, { metadata: grpcMetadata(token), signal: controller.signal });
        return iterate(stream, () => controller.abort());
      },
      refused: (token) => firstAnswer(machines.watchMachines({}, { metadata: grpcMetadata(token) })),
    });
  }
  return kinds;
}

/** Whose credential a case changes: a client's (and its drone's), or a machine's. */
interface Subject {
  readonly token: string;
  readonly clientId?: string;
  readonly droneId?: string;
  readonly machineId?: string;
}

/** A credential change: what it ends, done by the tenant's admin. */
interface Change {
  readonly name: string;
  readonly holders: readonly Holder[];
  /** Only the streams of one cube end (a grant), and a reopen is NOT_FOUND rather than UNAUTHENTICATED. */
  readonly cubeOnly?: boolean;
  apply(system: System, tenant: Tenant, subject: Subject): Promise<unknown>;
}

const CHANGES: readonly Change[] = [
  {
    name: "RotateClientCredential",
    holders: ["client", "drone"],
    apply: (system, tenant, { clientId }) =>
      call(system, "unimatrix.cube.v1.IdentityService/RotateClientCredential", { clientId }, tenant.user),
  },
  {
    name: "RevokeClient",
    holders: ["client", "drone"],
    apply: (system, tenant, { clientId }) =>
      call(system, "unimatrix.cube.v1.IdentityService/RevokeClient", { clientId }, tenant.user),
  },
  {
    name: "RevokeCubeGrant",
    holders: ["client"],
    cubeOnly: true,
    apply: (system, tenant, { clientId }) =>
      call(
        system,
        "unimatrix.cube.v1.IdentityService/RevokeCubeGrant",
        { clientId, cubeId: tenant.cubeId },
        tenant.user,
      ),
  },
  {
    name: "RevokeMachine",
    holders: ["machine"],
    apply: (system, tenant, { machineId }) =>
      call(system, "unimatrix.presence.v1.MachineService/RevokeMachine", { machineId }, tenant.user),
  },
  {
    name: "EvictDrone",
    holders: ["drone"],
    apply: (system, tenant, { droneId }) =>
      call(system, "unimatrix.cube.v1.CubeService/EvictDrone", { cubeId: tenant.cubeId, droneId }, tenant.user),
  },
];

describe("every door closes with its credential", () => {
  let system: System;
  let tenant: Tenant;
  let gateways: Record<string, string>;
  let second: Awaited<ReturnType<typeof addGateway>>;
  let kinds: StreamKind[];
  /** Second replicas of cube and presence on the same schemas (gateway B and the second direct doors use them). */
  let cube2: Awaited<ReturnType<typeof startCube>>;
  let presence2: Awaited<ReturnType<typeof startPresence>>;

  beforeAll(async () => {
    system = await startSystem("gw_doors");
    cube2 = await startCube({ config: system.config, port: 0, schema: system.cubeSchema, logger: silentLogger() });
    // This replica resolves client tokens through cube (direct gRPC callers with a token).
    presence2 = await startPresence({
      config: system.config,
      port: 0,
      schema: system.presenceSchema,
      logger: silentLogger(),
      presence: { cubeAddress: `127.0.0.1:${cube2.port}` },
    });
    second = await addGateway(system, {
      cubeAddress: `127.0.0.1:${cube2.port}`,
      presenceAddress: `127.0.0.1:${presence2.port}`,
    });
    gateways = { "gateway A": system.url, "gateway B": second.url };
    tenant = await seedTenant(system, "doors", 0);
    kinds = kindsFor(gateways, {
      cubes: [system.cube.port, cube2.port],
      presences: [
        { port: system.presence.port, clients: false },
        { port: presence2.port, clients: true },
      ],
    });
  }, 120_000);
  afterAll(async () => {
    await second?.stop();
    await presence2?.stop();
    await cube2?.stop();
    await system?.stop();
  });

  /** A fresh client with write access (and, for a drone, a seat it attached): its token and ids. */
  async function holder(kind: Holder): Promise<Subject> {
    if (kind === "machine") {
      const machine = await call<{ machine: { id: string }; token: string }>(
        system,
        "unimatrix.presence.v1.MachineService/RegisterMachine",
        { name: `door-${crypto.randomUUID().slice(0, 8)}` },
        tenant.user,
      );
      return { token: machine.token, machineId: machine.machine.id };
    }
    const client = await call<{ client: { id: string }; token: string }>(
      system,
      "unimatrix.cube.v1.IdentityService/IssueClient",
      { name: `door-${crypto.randomUUID().slice(0, 8)}` },
      tenant.user,
    );
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/SetCubeGrant",
      { clientId: client.client.id, cubeId: tenant.cubeId, access: "CUBE_ACCESS_WRITE" },
      tenant.user,
    );
    if (kind === "client") return { token: client.token, clientId: client.client.id };
    const seat = await call<{ sessionToken: string; drone: { id: string } }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: tenant.cubeId, roleId: tenant.roleId },
      client.token,
    );
    return { token: seat.sessionToken, clientId: client.client.id, droneId: seat.drone.id };
  }

  /** Every gateway has the token's answer in its cache: the change must reach it, not wait out the cache. */
  async function warm(token: string, who: Holder = "client"): Promise<void> {
    const [path, body] =
      who === "machine"
        ? ["unimatrix.presence.v1.MachineService/ListMachines", {}]
        : ["unimatrix.cube.v1.CubeService/GetCube", { cubeId: tenant.cubeId }];
    for (const url of Object.values(gateways)) {
      const { status: code } = await connectJson({ url }, path, body, token);
      expect(code).toBe(200);
    }
  }

  const cases = () => CHANGES.flatMap((change) => change.holders.map((who) => ({ change, who })));

  test.each(cases().map(({ change, who }) => [change.name, who, change] as const))(
    "%s ends every %s stream with access_revoked within 1 s and refuses its reopen on every door",
    async (_name, who, change) => {
      const subject = await holder(who);
      await warm(subject.token, who);
      const mine = kinds.filter(
        (kind) => kind.holders.includes(who) && (!change.cubeOnly || /activity/i.test(kind.name)),
      );
      const refusal = change.cubeOnly ? /^(404|NOT_FOUND)$/ : /^(401|UNAUTHENTICATED)$/;
      // Every door of the holder is walked: 2 gateways × its SSE and Connect kinds, plus the direct replicas.
      const doors = change.cubeOnly ? 6 : { client: 11, drone: 6, machine: 6 }[who];
      expect(mine).toHaveLength(doors);
      const streams = mine.map((kind) => ({ kind, opened: kind.open(subject.token, tenant.cubeId) }));
      try {
        for (const { kind, opened } of streams) await eventually(opened.ready, `${kind.name}: ready`, 10_000);
        await change.apply(system, tenant, subject);
        for (const { kind, opened } of streams) {
          await eventually(opened.revoked, `${kind.name}: access_revoked after ${change.name}`, 1_000);
        }
        for (const kind of mine) {
          const answer = await kind.refused(subject.token, tenant.cubeId);
          expect([kind.name, answer]).toEqual([kind.name, expect.stringMatching(refusal)]);
        }
      } finally {
        for (const { opened } of streams) opened.close();
      }
    },
    60_000,
  );

  test("with a gateway's bus down, a rotated client's streams there end within the bound (2 x GATEWAY_AUTH_CACHE_MS) and its reopen is refused", async () => {
    // This gateway never hears credential news (its Redis is unreachable); only its cache period and sweep bound trust.
    const deaf = await addGateway(system, { authCacheMs: 1_000 }, { redisUrl: "redis://127.0.0.1:1" });
    try {
      const subject = await holder("client");
      await warm(subject.token);
      expect(
        (
          await connectJson(
            { url: deaf.url },
            "unimatrix.cube.v1.CubeService/GetCube",
            { cubeId: tenant.cubeId },
            subject.token,
          )
        ).status,
      ).toBe(200);
      const deafKinds = kindsFor({ deaf: deaf.url }, { cubes: [], presences: [] }).filter((k) =>
        k.name.endsWith("via deaf"),
      );
      const streams = deafKinds
        .filter((kind) => kind.holders.includes("client"))
        .map((kind) => ({ kind, opened: kind.open(subject.token, tenant.cubeId) }));
      try {
        for (const { kind, opened } of streams) await eventually(opened.ready, `${kind.name}: ready`, 10_000);
        await CHANGES[0]!.apply(system, tenant, subject);
        // The bound: an answer is trusted for the cache period (1 s), and every stream is checked every second.
        for (const { kind, opened } of streams) await eventually(opened.revoked, `${kind.name}: access_revoked`, 3_000);
        for (const { kind } of streams)
          expect([kind.name, await kind.refused(subject.token, tenant.cubeId)]).toEqual([
            kind.name,
            expect.stringMatching(/^(401|UNAUTHENTICATED)$/),
          ]);
      } finally {
        for (const { opened } of streams) opened.close();
      }
    } finally {
      await deaf.stop();
    }
  }, 60_000);
});
