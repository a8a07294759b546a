import { performance } from "node:perf_hooks";
import type { PresenceService } from "@unimatrix/presence";
import { type DaemonProcess, eventually, runUnimatrix, World } from "./world";

const input = (event: string, session: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ session_id: session, transcript_path: "/tmp/t.jsonl", cwd: "/", hook_event_name: event, ...extra });

/** The lines a PostToolUse hook put in the context (none when it printed nothing). */
function contextLines(stdout: string): string[] {
  if (stdout === "") return [];
  const parsed = JSON.parse(stdout) as { hookSpecificOutput: { additionalContext: string } };
  return parsed.hookSpecificOutput.additionalContext.split("\n");
}

describe("a scripted Claude Code host over 50 tool calls, with the daemon killed mid-run; presence replicas failing under the daemon", () => {
  const world = new World();

  beforeAll(async () => {
    await world.start();
    await world.startPresence();
    await world.startPresence();
  }, 60_000);
  afterAll(() => world.close(), 60_000);

  it("every DIRECT reaches the session at its next PostToolUse once the daemon holds it, exactly once, across a kill -9 and restart of the daemon", async () => {
    const t = await world.team("umbrella");
    const port = world.replicas[0]!.port;
    const door = world.door("umbrella");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    let daemon: DaemonProcess = world.daemon(t, port, "umbrella");
    await daemon.waitFor("linked");
    await runUnimatrix(["hook", "session-start", "--door", door], input("SessionStart", "host-1"), env);

    const posted = new Map<string, { at: number; call: number }>();
    const seen: { line: string; call: number; at: number }[] = [];
    const latencies: number[] = [];
    let restarted = false;
    let downEntry = "";
    for (let call = 1; call <= 50; call += 1) {
      if (call % 7 === 3) {
        const message = `task ${call}`;
        const at = performance.now();
        const entryId = await t.direct(message);
        posted.set(message, { at, call });
        // Wait until the daemon holds it (an observable event), unless it is dead right now.
        if (daemon.running)
          await eventually(() => daemon.named("notice").some((e) => e.entryId === entryId), `${message} spooled`);
      }
      if (call === 20) {
        // The daemon dies between two tool calls; items posted meanwhile wait for it.
        await daemon.kill9();
        downEntry = await t.direct("while the daemon was down");
        posted.set("while the daemon was down", { at: performance.now(), call });
      }
      if (call === 24 && !restarted) {
        restarted = true;
        daemon = world.daemon(t, port, "umbrella");
        await daemon.waitFor("linked");
        // Presence resends what was not confirmed; wait until the spool holds the item posted while it was down.
        await eventually(() => daemon.named("notice").some((e) => e.entryId === downEntry), "the resend", 20_000);
      }
      const run = await runUnimatrix(
        ["hook", "post-tool-use", "--door", door],
        input("PostToolUse", "host-1", { tool_name: "Bash", tool_input: { command: `step ${call}` } }),
        env,
      );
      expect(run.code).toBe(0);
      const now = performance.now();
      for (const line of contextLines(run.stdout)) {
        seen.push({ line, call, at: now });
        const message = line.replace(/^\[DIRECT\] worker-\d+: /, "");
        const p = posted.get(message);
        if (p && p.call === call) latencies.push(now - p.at);
      }
    }

    // Exactly once each, in order of posting.
    const messages = seen.map((s) => s.line.replace(/^\[DIRECT\] worker-\d+: /, ""));
    expect(messages).toEqual([...posted.keys()]);
    // Each item spooled before a tool call appears at that very call; the one posted with the
    // daemon down appears at the first call after the restart.
    for (const s of seen) {
      const message = s.line.replace(/^\[DIRECT\] worker-\d+: /, "");
      const expected = message === "while the daemon was down" ? 24 : posted.get(message)!.call;
      expect({ message, call: s.call }).toEqual({ message, call: expected });
    }
    // Every entry's receipt is delivered (the daemon confirmed each after its hook printed it).
    const rows = await t.notices();
    expect(rows).toHaveLength(posted.size);
    await eventually(async () => (await t.notices()).every((r) => r.confirmed), "all confirmed", 20_000);
    // Post → in the context, a spawned hook included (the issue asks ≤ 1 s). The median is held to
    // it; single runs are only reported, since this machine's two cores are shared.
    process.stdout.write(`post → in context (ms): ${latencies.map((l) => l.toFixed(0)).join(" ")}\n`);
    const sorted = [...latencies].sort((x, y) => x - y);
    expect(sorted[Math.floor(sorted.length / 2)]).toBeLessThan(1_000);
  }, 180_000);

  it("kill -9 of the daemon's replica: relinked to the other within the lease, the machine never unlinked; SIGTERM of a replica: going_away honoured at once", async () => {
    const t = await world.team("cyberdyne");
    const [a, b] = world.replicas as [PresenceService, PresenceService];
    // One target naming both replicas (grpc-js round robin over the addresses), like a Kubernetes Service.
    const target = `ipv4:127.0.0.1:${a.port},127.0.0.1:${b.port}`;
    const daemon = world.daemon(t, 0, "cyberdyne", ["--presence", target]);
    await daemon.waitFor("linked");
    const owner = async () =>
      (
        await world.presenceSql.query<{ replica_id: string }>(
          "SELECT replica_id FROM link_owners WHERE machine_id = $1",
          [t.machineId],
        )
      ).rows[0]?.replica_id;
    const transitions = async () =>
      (
        await world.presenceSql.query<{ linked: boolean }>(
          "SELECT linked FROM presence_events WHERE machine_id = $1 ORDER BY seq",
          [t.machineId],
        )
      ).rows.map((r) => r.linked);
    await eventually(async () => (await owner()) !== undefined, "the link's owner");
    const holder = (await owner()) === a.replicaId ? a : b;
    const survivor = holder === a ? b : a;

    const killedAt = Date.now();
    await holder.kill();
    await daemon.waitFor("linked", 2);
    expect(Date.now() - killedAt).toBeLessThan(30_000); // the lease (PRESENCE.leaseMs)
    await eventually(async () => (await owner()) === survivor.replicaId, "the survivor owns the link");
    expect(daemon.named("link_broken")).toHaveLength(1);
    expect(await transitions()).toEqual([true]);

    // A replica comes back on the killed one's address; the survivor drains (SIGTERM): going_away,
    // and the daemon relinks at once (no backoff, no broken link), still without a presence flap.
    const back = await world.startPresence(holder.port);
    await survivor.stop();
    await daemon.waitFor("going_away");
    await daemon.waitFor("linked", 3);
    expect(daemon.named("link_broken")).toHaveLength(1);
    await eventually(async () => (await owner()) === back.replicaId, "the new replica owns the link");
    expect(await transitions()).toEqual([true]);
  }, 90_000);
});
