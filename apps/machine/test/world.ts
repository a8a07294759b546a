import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { CubeAccess, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { type RunningCube, startCube } from "@unimatrix/cube";
import { type PresenceService, startPresence } from "@unimatrix/presence";
import { createClient, type TypedClient } from "@unimatrix/service-kit/grpc";
import { silentLogger } from "@unimatrix/service-kit/logger";
import {
  asBearer,
  asPrincipal,
  eventually,
  TEST_INTERNAL_KEY,
  type TestSchema,
  testBusPrefix,
  testConfig,
  testSchema,
} from "@unimatrix/service-kit/testing";
import pg from "pg";
import { type Run, runCommand } from "./run-command";

export { type Run, runCommand };

/** The `unimatrix` command as `npm install` links it (the composition's bin). */
export const UNIMATRIX = join(__dirname, "..", "..", "unimatrix", "dist", "main.js");

const OPERATOR = "umx_operator_machinedaemon_0123456789";

/** Fast presence timers (heartbeats every 200 ms) so link breaks show quickly. */
const PRESENCE = {
  linkHeartbeatMs: 200,
  linkHelloTimeoutMs: 1_000,
  watchHeartbeatMs: 60_000,
  reconcileMs: 3_600_000,
  leaseMs: 30_000,
};

/** One event line of the daemon's stdout. */
export interface DaemonEvent {
  readonly event: string;
  readonly [field: string]: unknown;
}

/** `unimatrix machine run` as a real child process; its stdout events are collected as they come. */
export class DaemonProcess {
  readonly events: DaemonEvent[] = [];
  stderr = "";
  exitCode: number | null = null;
  /** False once the process has exited (by any means, a signal included). */
  running = true;
  readonly exited: Promise<number | null>;
  readonly child: ChildProcess;

  /**
   * `channel` opens fd 3 in the daemon as a socket pair to the test (`child.stdio[3]`), for a
   * preloaded test helper to talk on.
   */
  constructor(
    args: readonly string[],
    env: NodeJS.ProcessEnv = {},
    as?: { uid: number; gid: number },
    channel = false,
  ) {
    this.child = spawn(process.execPath, [UNIMATRIX, "machine", "run", ...args], {
      env: { ...process.env, ...env },
      ...(as ?? {}),
      stdio: channel ? ["ignore", "pipe", "pipe", "pipe"] : ["ignore", "pipe", "pipe"],
    });
    let buffer = "";
    this.child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) this.events.push(JSON.parse(line) as DaemonEvent);
    });
    this.child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) =>
      this.child.once("exit", (code) => {
        this.exitCode = code;
        this.running = false;
        resolve(code);
      }),
    );
  }

  /** Events named `name` so far. */
  named(name: string): DaemonEvent[] {
    return this.events.filter((e) => e.event === name);
  }

  /** Waits until `count` events named `name` were logged. */
  async waitFor(name: string, count = 1, timeoutMs = 20_000): Promise<DaemonEvent> {
    await eventually(
      () => this.named(name).length >= count || !this.running,
      `${count} × ${name} (daemon stderr: ${this.stderr})`,
      timeoutMs,
    );
    const event = this.named(name)[count - 1];
    if (!event) throw new Error(`the daemon exited (${this.exitCode}) before ${name}: ${this.stderr}`);
    return event;
  }

  kill9(): Promise<number | null> {
    this.child.kill("SIGKILL");
    return this.exited;
  }

  terminate(): Promise<number | null> {
    if (this.running) this.child.kill("SIGTERM");
    return this.exited;
  }
}

/** The fast hook client, `unimatrix-hook` (a POSIX sh script), and its directory (what PATH needs). */
export const HOOK_BIN = join(__dirname, "..", "bin");

/** Runs the `unimatrix` command to its end with `input` on stdin. */
export function runUnimatrix(args: readonly string[], input: string, env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return runCommand(process.execPath, [UNIMATRIX, ...args], input, env);
}

/**
 * Runs a hook command line as an agent host does (`sh -c "<command>"`, Claude Code's `command`),
 * with the `unimatrix-hook` client on PATH.
 */
export function runHookCommand(command: string, input: string, env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return runCommand("/bin/sh", ["-c", command], input, {
    ...env,
    PATH: `${HOOK_BIN}:${env.PATH ?? process.env.PATH ?? ""}`,
  });
}

/** A cube, presence replicas and the clients a test needs, on their own schemas and bus prefix. */
export class World {
  readonly cubeSchema: TestSchema = testSchema("mdaemon_cube");
  readonly presenceSchema: TestSchema = testSchema("mdaemon_presence");
  readonly busPrefix = testBusPrefix("mdaemon");
  readonly dir = mkdtempSync(join(tmpdir(), "umx-machine-"));
  readonly replicas: PresenceService[] = [];
  readonly daemons: DaemonProcess[] = [];
  cube!: RunningCube;
  identity!: TypedClient<typeof IdentityService>;
  cubes!: TypedClient<typeof CubeService>;
  activity!: TypedClient<typeof ActivityService>;
  sql!: pg.Pool;
  presenceSql!: pg.Pool;

  async start(): Promise<void> {
    const config = testConfig({ busPrefix: this.busPrefix, operatorToken: OPERATOR });
    this.cube = await startCube({ config, port: 0, schema: this.cubeSchema.schema, logger: silentLogger() });
    const address = `127.0.0.1:${this.cube.port}`;
    this.identity = createClient(IdentityService, address);
    this.cubes = createClient(CubeService, address);
    this.activity = createClient(ActivityService, address);
    this.sql = new pg.Pool({
      connectionString: this.cubeSchema.url,
      max: 2,
      options: `-c search_path=${this.cubeSchema.schema}`,
    });
    this.presenceSql = new pg.Pool({
      connectionString: this.presenceSchema.url,
      max: 2,
      options: `-c search_path=${this.presenceSchema.schema}`,
    });
  }

  /** Starts a presence replica (on `port`, or any free one) that relays cube's notices. */
  async startPresence(port = 0): Promise<PresenceService> {
    const replica = await startPresence({
      config: testConfig({ busPrefix: this.busPrefix }),
      port,
      schema: this.presenceSchema.schema,
      logger: silentLogger(),
      presence: { ...PRESENCE, cubeAddress: `127.0.0.1:${this.cube.port}` },
    });
    this.replicas.push(replica);
    return replica;
  }

  /**
   * A tenant with a registered machine, a cube, an author drone and a recipient drone running on
   * the machine (its seat attached with the machine's id, unless `attachMachine` is false: then
   * only a session at the daemon's door ties it).
   */
  async team(name: string, { attachMachine = true } = {}) {
    const tenant = await this.identity.createTenant({ name, adminDisplayName: "admin" }, asBearer(OPERATOR));
    const user = asBearer(tenant.adminUserToken);
    const tenantId = tenant.tenant?.id as string;
    const machines = createClient(MachineService, `127.0.0.1:${this.replicas.at(-1)!.port}`);
    const registered = await machines.registerMachine(
      { name: `${name}-box` },
      asPrincipal({ kind: "user", tenantId, subjectId: tenant.adminUser?.id as string }, TEST_INTERNAL_KEY),
    );
    machines.close();
    const machineId = registered.machine?.id as string;
    const client = await this.identity.issueClient({ name: "agents" }, user);
    const { cube } = await this.cubes.createCube({ requestKey: crypto.randomUUID(), name, directive: "go" }, user);
    const cubeId = cube?.id as string;
    const { role } = await this.cubes.createRole({ cubeId, name: "worker", isDefault: true, canBroadcast: true }, user);
    await this.identity.setCubeGrant({ clientId: client.client?.id as string, cubeId, access: CubeAccess.WRITE }, user);
    const agent = asBearer(client.token);
    const author = await this.cubes.attachSeat({ cubeId, roleId: role?.id as string, hostname: "a" }, agent);
    const recipient = await this.cubes.attachSeat(
      { cubeId, roleId: role?.id as string, hostname: "b", ...(attachMachine ? { machineId } : {}) },
      agent,
    );
    const tokenFile = join(this.dir, `${name}.token`);
    writeFileSync(tokenFile, `${registered.token}\n`, { mode: 0o600 });
    const activity = this.activity;
    const identity = this.identity;
    const sql = this.sql;
    return {
      tenantId,
      machineId,
      tokenFile,
      cubeId,
      recipient: recipient.drone?.id as string,
      /** The recipient's drone session token (what its host has in UNIMATRIX_DRONE_TOKEN). */
      droneToken: recipient.sessionToken,
      /** Revokes the agents' client: every drone session it opened dies with it. */
      async revokeAgents(): Promise<void> {
        await identity.revokeClient({ clientId: client.client?.id as string }, user);
      },
      /** Posts a DIRECT entry from the author to the recipient; returns the entry id. */
      async direct(message: string): Promise<string> {
        const { entry } = await activity.appendEntry(
          { cubeId, message, visibility: Visibility.DIRECT, recipientDroneIds: [recipient.drone?.id as string] },
          asBearer(author.sessionToken),
        );
        return entry?.id as string;
      },
      /** The recipient's receipt of an entry, as its author lists it. */
      async receipt(entryId: string) {
        const { receipts } = await activity.listReceipts({ cubeId, entryId }, asBearer(author.sessionToken));
        return receipts.find((r) => r.droneId === recipient.drone?.id);
      },
      /** The machine the recipient's drone session and its drone are tied to (null: none). */
      async tiedTo() {
        const session = await sql.query<{ machine_id: string | null }>(
          "SELECT machine_id::text FROM drone_sessions WHERE drone_id = $1",
          [recipient.drone?.id],
        );
        const drone = await sql.query<{ machine_id: string | null }>(
          "SELECT machine_id::text FROM drones WHERE id = $1",
          [recipient.drone?.id],
        );
        return { session: session.rows[0]?.machine_id ?? null, drone: drone.rows[0]?.machine_id ?? null };
      },
      /** cube's notice rows for the machine: id and whether confirmed. */
      async notices() {
        return (
          await sql.query<{ id: string; entry_id: string; confirmed: boolean }>(
            "SELECT id::text, entry_id::text, confirmed_at IS NOT NULL AS confirmed FROM notices WHERE machine_id = $1 ORDER BY seq",
            [machineId],
          )
        ).rows;
      },
    };
  }

  /**
   * Starts `unimatrix machine run` for a team against `replica`, with its door and spool under
   * `name`; `withCube` false leaves out `--cube` (sessions are then checked through the link only).
   */
  daemon(
    t: { tokenFile: string },
    replicaPort: number,
    name: string,
    extra: readonly string[] = [],
    withCube = true,
  ): DaemonProcess {
    const d = new DaemonProcess([
      "--presence",
      `127.0.0.1:${replicaPort}`,
      ...(withCube ? ["--cube", `127.0.0.1:${this.cube.port}`] : []),
      "--token-file",
      t.tokenFile,
      "--door",
      this.door(name),
      "--spool",
      join(this.dir, name, "spool"),
      ...extra,
    ]);
    this.daemons.push(d);
    return d;
  }

  door(name: string): string {
    return join(this.dir, name, "run", "machine.sock");
  }

  async close(): Promise<void> {
    for (const d of this.daemons) await d.terminate();
    for (const r of this.replicas) await r.stop().catch(() => {});
    this.identity?.close();
    this.cubes?.close();
    this.activity?.close();
    await this.cube?.stop();
    await this.sql?.end();
    await this.presenceSql?.end();
    await this.cubeSchema.drop();
    await this.presenceSchema.drop();
  }
}

export { eventually };
