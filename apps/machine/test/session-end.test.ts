import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Daemon, DoorClient, type DoorStatus, runDaemon } from "@unimatrix/machine";
import { eventually, World } from "./world";

/**
 * A TCP proxy in front of presence whose daemon-to-presence direction the test can hold: bytes
 * wait in the proxy until `release()`, so a request on the link is under way for as long as the
 * test wants. Twenty lines of `net`; a library would hide exactly what the test must control.
 */
async function holdingProxy(upstreamPort: number) {
  const links: { client: Socket; upstream: Socket }[] = [];
  let held = false;
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: "127.0.0.1", port: upstreamPort });
    for (const socket of [client, upstream]) socket.on("error", () => socket.destroy());
    upstream.pipe(client);
    if (!held) client.pipe(upstream);
    links.push({ client, upstream });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    hold() {
      held = true;
      for (const { client, upstream } of links) client.unpipe(upstream);
    },
    release() {
      held = false;
      for (const { client, upstream } of links) client.pipe(upstream);
    },
    close() {
      for (const { client, upstream } of links) for (const socket of [client, upstream]) socket.destroy();
      server.close();
    },
  };
}

describe("a session-end wins over an introduction under way", () => {
  const world = new World();
  const dir = mkdtempSync(join(tmpdir(), "umx-bye-"));
  let daemon: Daemon | undefined;
  beforeAll(async () => {
    await world.start();
    await world.startPresence();
  }, 60_000);
  afterAll(async () => {
    await daemon?.stop();
    await world.close();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("a hook's re-check that resolves after the session ended does not bring the session back", async () => {
    const t = await world.team("bye-race");
    const proxy = await holdingProxy(world.replicas[0]!.port);
    const events: string[] = [];
    daemon = await runDaemon({
      token: readFileSync(t.tokenFile, "utf8").trim(),
      presenceTarget: `127.0.0.1:${proxy.port}`,
      doorPath: join(dir, "door.sock"),
      spoolDir: join(dir, "spool"),
      hostname: "test-host",
      agentVersion: "test/1",
      // Every hook that carries the token has it checked again (through the link).
      reverifyMs: 0,
      log: (event) => events.push(event),
    });
    await eventually(() => events.includes("linked"), "linked");
    const who = { harness: "claude-code", session: "s-bye", droneToken: t.droneToken };
    const door = await DoorClient.connect(daemon.doorPath);
    const other = await DoorClient.connect(daemon.doorPath);
    try {
      expect(await door.request({ op: "hello", ...who })).toMatchObject({ ok: true, bound: true });
      expect(daemon.status().sessions).toBe(1);

      // The re-check of a PostToolUse goes out on the link and waits there.
      proxy.hold();
      const take = door.request<{ items: unknown[]; unknownSession?: boolean }>({ op: "take", ...who });
      // Meanwhile the session ends: forgotten at once (its untie also waits on the link).
      const bye = other.request({ op: "bye", harness: who.harness, session: who.session });
      await eventually(() => daemon?.status().sessions === 0, "the session forgotten");
      proxy.release();
      expect(await take).toEqual({ ok: true, items: [], unknownSession: true });
      expect(await bye).toEqual({ ok: true });
      expect(daemon.status()).toMatchObject<Partial<DoorStatus>>({ sessions: 0 });
      // The drone session is untied from the machine, not tied again by the late re-check.
      await eventually(async () => (await t.tiedTo()).session === null, "the drone session untied");
    } finally {
      door.close();
      other.close();
      proxy.close();
    }
  });
});
