import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { type LinkRequest, LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { type Daemon, type DaemonOptions, DoorClient, runDaemon, tlsCredentials } from "@unimatrix/machine";
import { createClient, serviceDefinition } from "@unimatrix/service-kit/grpc";
import { asPrincipal, TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { DaemonProcess, eventually, World } from "./world";

/** A daemon run in-process (`runDaemon`) over real sockets, its events collected. */
class InProcess {
  readonly events: { event: string; fields: Record<string, unknown> }[] = [];
  daemon!: Daemon;

  async start(options: Omit<DaemonOptions, "log" | "hostname" | "agentVersion">): Promise<this> {
    this.daemon = await runDaemon({
      ...options,
      hostname: "test-host",
      agentVersion: "test/1",
      log: (event, fields = {}) => this.events.push({ event, fields }),
    });
    return this;
  }

  count(event: string): number {
    return this.events.filter((e) => e.event === event).length;
  }
}

/** A sleep the test resolves by hand: the link loop cannot reconnect until it is told to. */
class HeldSleeps {
  readonly asked: number[] = [];
  readonly #pending: (() => void)[] = [];
  readonly sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      this.asked.push(ms);
      this.#pending.push(resolve);
    });
  release(): void {
    for (const resolve of this.#pending.splice(0)) resolve();
  }
}

describe("the daemon's link: backoff through its seams, the ends it does not retry, TLS", () => {
  const world = new World();
  const running: InProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), "umx-link-"));
  let n = 0;
  const paths = () => {
    n += 1;
    return { doorPath: join(dir, `d${n}`, "door.sock"), spoolDir: join(dir, `d${n}`, "spool") };
  };

  beforeAll(async () => {
    await world.start();
    await world.startPresence();
  }, 60_000);
  afterAll(async () => {
    for (const r of running) await r.daemon.stop();
    await world.close();
  }, 60_000);

  it("a broken link is retried only when the backoff's sleep ends, with delays that double from the jittered base", async () => {
    const t = await world.team("wayne");
    const replica = await world.startPresence();
    const port = replica.port;
    const sleeps = new HeldSleeps();
    const d = await new InProcess().start({
      token: readFileSync(t.tokenFile, "utf8").trim(),
      presenceTarget: `127.0.0.1:${port}`,
      ...paths(),
      backoff: { baseMs: 200, maxMs: 10_000, random: () => 0 },
      sleep: sleeps.sleep,
    });
    running.push(d);
    await eventually(() => d.count("linked") === 1, "linked");

    await replica.kill();
    await eventually(() => sleeps.asked.length === 1, "the first backoff");
    expect(sleeps.asked).toEqual([100]); // half the 200 ms ceiling (random 0)
    sleeps.release(); // presence is still down: this attempt fails and backs off twice as long
    await eventually(() => sleeps.asked.length === 2, "the second backoff");
    expect(sleeps.asked).toEqual([100, 200]);
    expect(d.count("linked")).toBe(1); // held in the sleep: no attempt is under way

    await world.startPresence(port);
    sleeps.release();
    await eventually(() => d.count("linked") === 2, "relinked");
    expect(d.daemon.status()).toMatchObject({ linked: true, links: 2, machineId: t.machineId });
  });

  it("a revoked machine's link ends for good (closed REVOKED), and so does a refused token: exit code 3 from the command", async () => {
    const t = await world.team("tyrell");
    const replica = world.replicas[0]!;
    const d = await new InProcess().start({
      token: readFileSync(t.tokenFile, "utf8").trim(),
      presenceTarget: `127.0.0.1:${replica.port}`,
      ...paths(),
    });
    running.push(d);
    await eventually(() => d.count("linked") === 1, "linked");
    const tenantId = (
      await world.sql.query<{ tenant_id: string }>("SELECT tenant_id::text FROM cubes WHERE id = $1", [t.cubeId])
    ).rows[0]!.tenant_id;
    const machines = createClient(MachineService, `127.0.0.1:${replica.port}`);
    try {
      await machines.revokeMachine(
        { machineId: t.machineId },
        asPrincipal({ kind: "user", tenantId, subjectId: crypto.randomUUID() }, TEST_INTERNAL_KEY),
      );
    } finally {
      machines.close();
    }
    await expect(d.daemon.linkEnded).resolves.toBe("revoked");

    // The command: the revoked machine's token is refused at once; it exits 3 and says why.
    const cli = new DaemonProcess([
      "--presence",
      `127.0.0.1:${replica.port}`,
      "--token-file",
      t.tokenFile,
      "--door",
      paths().doorPath,
      "--spool",
      join(dir, "cli-spool"),
    ]);
    world.daemons.push(cli);
    expect(await cli.exited).toBe(3);
    expect(cli.stderr).toMatch(/presence ended the link \(unauthenticated\); not retrying/);
  });

  it("a session whose drone token dies (its client revoked) is forgotten at its next hook; its items stay in the spool", async () => {
    const t = await world.team("soylent");
    const paths1 = paths();
    const d = await new InProcess().start({
      token: readFileSync(t.tokenFile, "utf8").trim(),
      presenceTarget: `127.0.0.1:${world.replicas[0]!.port}`,
      cubeTarget: `127.0.0.1:${world.cube.port}`,
      ...paths1,
      reverifyMs: 0,
    });
    running.push(d);
    await eventually(() => d.count("linked") === 1, "linked");
    const who = { harness: "claude-code", session: "s-soylent" };
    const door = await DoorClient.connect(paths1.doorPath);
    try {
      expect(await door.request({ op: "hello", ...who, droneToken: t.droneToken })).toMatchObject({
        droneId: t.recipient,
      });
      await t.direct("are you still there?");
      await eventually(() => d.count("notice") === 1, "the notice spooled");
      await t.revokeAgents(); // the author's and the recipient's sessions die with their client
      expect(await door.request({ op: "take", ...who, droneToken: t.droneToken })).toEqual({
        ok: true,
        items: [],
        unknownSession: true,
      });
    } finally {
      door.close();
    }
    expect(d.count("session_token_dead")).toBe(1);
    expect(d.daemon.status()).toMatchObject({ sessions: 0, pending: 1 });
  });

  it("with --tls/--ca-file the link is TLS, verified against the given CA; a plaintext daemon cannot link to a TLS endpoint", async () => {
    // presence itself serves plaintext (TLS ends at the cluster's edge): a TLS LinkService stands in.
    const certDir = mkdtempSync(join(tmpdir(), "umx-tls-"));
    const key = join(certDir, "key.pem");
    const cert = join(certDir, "cert.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
      ],
      { stdio: "ignore" },
    );
    const hellos: LinkRequest[] = [];
    const server = new grpc.Server();
    server.addService(serviceDefinition(LinkService), {
      link: (call: grpc.ServerDuplexStream<LinkRequest, unknown>) => {
        call.once("data", (hello: LinkRequest) => {
          hellos.push(hello);
          call.write({
            event: {
              case: "linked",
              value: { machineId: crypto.randomUUID(), heartbeatIntervalSeconds: 15, linkId: crypto.randomUUID() },
            },
          });
        });
        call.on("error", () => {});
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        "127.0.0.1:0",
        grpc.ServerCredentials.createSsl(null, [{ private_key: readFileSync(key), cert_chain: readFileSync(cert) }]),
        (error, bound) => (error ? reject(error) : resolve(bound)),
      ),
    );
    try {
      const secure = await new InProcess().start({
        token: "umx_machine_tls_test",
        presenceTarget: `127.0.0.1:${port}`,
        credentials: tlsCredentials(readFileSync(cert)),
        ...paths(),
      });
      running.push(secure);
      await eventually(() => secure.count("linked") === 1, "linked over TLS");
      expect(hellos[0]?.event.case === "hello" && hellos[0].event.value.acceptsNotices).toBe(true);

      const plain = await new InProcess().start({
        token: "umx_machine_tls_test",
        presenceTarget: `127.0.0.1:${port}`,
        ...paths(),
        sleep: () => new Promise(() => {}),
      });
      running.push(plain);
      await eventually(() => plain.count("link_broken") === 1, "the plaintext attempt fails");
      expect(plain.count("linked")).toBe(0);
      expect(hellos).toHaveLength(1);
    } finally {
      server.forceShutdown();
    }
  });
});
