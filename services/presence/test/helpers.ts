import { randomUUID } from "node:crypto";
import type * as grpc from "@grpc/grpc-js";
import { type LinkResponse, LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import {
  MachineService,
  type WatchMachinesResponse,
} from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import type { Principal } from "@unimatrix/service-kit/auth";
import { ManualClock } from "@unimatrix/service-kit/clock";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import {
  type AsCaller,
  asBearer,
  asPrincipal,
  eventually,
  TEST_INTERNAL_KEY,
  type TestSchema,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";
import { type PresenceService, type PresenceServiceOptions, startPresence } from "../src";

/** Fast timers for tests; time rules that matter (leases, retention) use the manual clock. */
export const FAST = {
  linkHeartbeatMs: 200,
  linkHelloTimeoutMs: 300,
  watchHeartbeatMs: 60_000,
  reconcileMs: 3_600_000,
  leaseMs: 30_000,
};

/** One suite's isolated world: its own schema, bus prefix and clock. */
export class World {
  readonly schema: TestSchema;
  readonly busPrefix: string;
  readonly clock = new ManualClock(Date.UTC(2026, 10, 1));
  readonly replicas: PresenceService[] = [];
  readonly clients: { close(): void }[] = [];

  constructor(label: string) {
    this.schema = testSchema(label);
    this.busPrefix = testBusPrefix(label);
  }

  /** Starts a replica on the shared schema and bus prefix. */
  async start(overrides: Partial<PresenceServiceOptions["presence"]> = {}): Promise<PresenceService> {
    const replica = await startPresence({
      config: testConfig({ busPrefix: this.busPrefix }),
      port: 0,
      schema: this.schema.schema,
      clock: this.clock,
      presence: { ...FAST, ...overrides },
    });
    this.replicas.push(replica);
    return replica;
  }

  machines(replica: PresenceService, channelOptions: grpc.ChannelOptions = {}): TypedClient<typeof MachineService> {
    const client = createClient(MachineService, `127.0.0.1:${replica.port}`, undefined, channelOptions);
    this.clients.push(client);
    return client;
  }

  links(replica: PresenceService): TypedClient<typeof LinkService> {
    const client = createClient(LinkService, `127.0.0.1:${replica.port}`);
    this.clients.push(client);
    return client;
  }

  async close(): Promise<void> {
    for (const client of this.clients) client.close();
    for (const replica of this.replicas) await replica.stop();
    await this.schema.drop();
  }
}

/** Call options carrying a gateway-signed principal (the kit's asPrincipal with the test key). */
export function as(principal: Principal): AsCaller {
  return asPrincipal(principal, TEST_INTERNAL_KEY);
}

/** A fresh tenant with a user in it. */
export function newTenant(): { tenantId: string; user: Principal } {
  const tenantId = randomUUID();
  return { tenantId, user: { kind: "user", subjectId: randomUUID(), tenantId } };
}

/** Collects a stream's messages in the background, and its final status. */
export class Collector<T> {
  readonly items: T[] = [];
  error: grpc.ServiceError | null = null;
  done = false;
  readonly finished: Promise<void>;

  constructor(stream: AsyncIterable<T>) {
    this.finished = (async () => {
      try {
        for await (const item of stream) this.items.push(item);
      } catch (error) {
        this.error = error as grpc.ServiceError;
      } finally {
        this.done = true;
      }
    })();
  }

  async count(n: number, what = `${n} messages`, timeoutMs = 10_000): Promise<T[]> {
    await eventually(() => this.items.length >= n || this.done, what, timeoutMs);
    if (this.items.length < n) {
      throw new Error(`stream ended after ${this.items.length} messages (${this.error?.details ?? "ok"})`);
    }
    return this.items.slice(0, n);
  }

  async ended(timeoutMs = 10_000): Promise<void> {
    await eventually(() => this.done, "stream end", timeoutMs);
  }
}

/** An open machine link. */
export interface OpenLink {
  readonly call: ReturnType<TypedClient<typeof LinkService>["link"]>;
  readonly responses: Collector<LinkResponse>;
  readonly linkId: string;
}

/**
 * Opens a link with a machine token and waits for `linked`. Like a daemon, it sends a heartbeat
 * every 100 ms until the link ends, unless `heartbeats` is false.
 */
export async function openLink(
  client: TypedClient<typeof LinkService>,
  token: string,
  options: { heartbeats?: boolean } = {},
): Promise<OpenLink> {
  const call = client.link(asBearer(token));
  call.send({ event: { case: "hello", value: { agentVersion: "test/1", hostname: "host" } } });
  const responses = new Collector<LinkResponse>(call);
  if (options.heartbeats !== false) {
    const timer = setInterval(() => {
      if (responses.done || call.call.writableEnded) clearInterval(timer);
      else call.send({ event: { case: "heartbeat", value: {} } });
    }, 100);
    void responses.finished.then(() => clearInterval(timer));
  }
  const [first] = await responses.count(1, "linked");
  if (first?.event.case !== "linked") throw new Error(`expected linked, got ${first?.event.case}`);
  return { call, responses, linkId: first.event.value.linkId };
}

/** A compact view of watch events: "snapshot:<cursor>:<reset>", "+name@cursor", "-name@cursor", "ready:<cursor>". */
export function describe(event: WatchMachinesResponse): string {
  switch (event.event.case) {
    case "machineSnapshot":
      return `snapshot:${event.event.value.cursor}:${event.event.value.reset}`;
    case "machineLinked":
      return `+${event.event.value.name}@${event.event.value.cursor}`;
    case "machineUnlinked":
      return `-${event.event.value.name}@${event.event.value.cursor}`;
    case "machineReady":
      return `ready:${event.event.value.cursor}`;
    case "heartbeat":
      return "heartbeat";
    case "accessRevoked":
      return "access_revoked";
    default:
      return "?";
  }
}

export { eventually };
