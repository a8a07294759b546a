import { lstatSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { DeliveryChannel } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { DoorClient, type DoorStatus } from "@unimatrix/machine";
import { eventually, runUnimatrix, World } from "./world";

/** Claude Code's hook input for `event` in session `session` (the fields its documented contract sends). */
function hookInput(event: string, session: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    session_id: session,
    transcript_path: `/tmp/${session}.jsonl`,
    cwd: "/work",
    hook_event_name: event,
    ...extra,
  });
}

async function status(door: string): Promise<DoorStatus> {
  const client = await DoorClient.connect(door);
  try {
    return await client.request<DoorStatus>({ op: "status" });
  } finally {
    client.close();
  }
}

/** The additionalContext a PostToolUse hook printed ("" when it printed nothing). */
function postToolUseContext(stdout: string): string {
  if (stdout === "") return "";
  const parsed = JSON.parse(stdout) as { hookSpecificOutput: { hookEventName: string; additionalContext: string } };
  expect(parsed.hookSpecificOutput.hookEventName).toBe("PostToolUse");
  return parsed.hookSpecificOutput.additionalContext;
}

describe("unimatrix machine run + unimatrix hook: notices from presence into a Claude Code session, exactly once", () => {
  const world = new World();

  beforeAll(async () => {
    await world.start();
    await world.startPresence();
  }, 60_000);
  afterAll(() => world.close(), 60_000);

  it("a DIRECT reaches the spool; post-tool-use prints it once; only then the receipt turns delivered (MACHINE_LINK); the next run prints nothing", async () => {
    const t = await world.team("acme");
    const replica = world.replicas[0]!;
    const daemon = world.daemon(t, replica.port, "acme");
    const door = world.door("acme");
    const linked = await daemon.waitFor("linked");
    expect(linked.machineId).toBe(t.machineId);
    // The door is owner-only, in an owner-only directory.
    expect(lstatSync(door).isSocket()).toBe(true);
    expect(statSync(door).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(door)).mode & 0o777).toBe(0o700);

    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    const start = await runUnimatrix(
      ["hook", "session-start", "--door", door],
      hookInput("SessionStart", "s-acme", { source: "startup" }),
      env,
    );
    expect(start).toMatchObject({ code: 0, stdout: "", stderr: "" });
    expect(await daemon.waitFor("session")).toMatchObject({ session: "s-acme", droneId: t.recipient });

    const entryId = await t.direct("please rebase onto main");
    const spooled = await daemon.waitFor("notice");
    expect(spooled).toMatchObject({ droneId: t.recipient, outcome: "new" });
    // In the spool, not yet in front of the model: the daemon has not confirmed it.
    expect((await status(door)).pending).toBe(1);
    expect(await t.notices()).toEqual([{ id: spooled.id, entry_id: entryId, confirmed: false }]);

    const first = await runUnimatrix(
      ["hook", "post-tool-use", "--door", door],
      hookInput("PostToolUse", "s-acme", { tool_name: "Bash", tool_input: { command: "ls" }, tool_response: {} }),
      env,
    );
    expect(first.code).toBe(0);
    expect(first.stderr).toBe("");
    expect(postToolUseContext(first.stdout)).toMatch(/^\[DIRECT\] worker-\d+: please rebase onto main$/);

    await daemon.waitFor("handed");
    await eventually(
      async () => (await t.receipt(entryId))?.deliveredAt !== undefined,
      "the delivered receipt",
      20_000,
    );
    expect((await t.receipt(entryId))?.deliveredVia).toBe(DeliveryChannel.MACHINE_LINK);
    expect(await t.notices()).toEqual([{ id: spooled.id, entry_id: entryId, confirmed: true }]);

    const second = await runUnimatrix(
      ["hook", "post-tool-use", "--door", door],
      hookInput("PostToolUse", "s-acme", { tool_name: "Read" }),
      env,
    );
    expect(second).toMatchObject({ code: 0, stdout: "", stderr: "" });
    // A session that never introduced itself and holds no token gets nothing, even with items waiting.
    const stranger = await runUnimatrix(["hook", "post-tool-use", "--door", door], hookInput("PostToolUse", "other"));
    expect(stranger).toMatchObject({ code: 0, stdout: "" });
    expect(await status(door)).toMatchObject({ linked: true, pending: 0, handed: 1, sessions: 1 });

    // An item reaches the spool; then SessionEnd: the daemon forgets the session and unties its
    // drone session from the machine; the item stays in the spool.
    const later = await t.direct("welcome back: the deploy is yours");
    await eventually(async () => (await status(door)).pending === 1, "the item waiting");
    const end = await runUnimatrix(["hook", "session-end", "--door", door], hookInput("SessionEnd", "s-acme"), env);
    expect(end).toMatchObject({ code: 0, stdout: "", stderr: "" });
    expect(await status(door)).toMatchObject({ sessions: 0, pending: 1 });
    expect(await daemon.waitFor("session_end")).toMatchObject({ session: "s-acme" });
    // Untied at once, or at the next link if the link was down at that moment.
    await eventually(async () => (await t.tiedTo()).session === null, "the drone session untied");

    // A new session of the same drone starts while the item waits: SessionStart ties the drone
    // again, and its stdout (plain lines, which Claude Code adds to the context) carries it, once.
    const next = await runUnimatrix(
      ["hook", "session-start", "--door", door],
      hookInput("SessionStart", "s-acme-2", { source: "resume" }),
      env,
    );
    expect(next.code).toBe(0);
    expect(next.stdout).toMatch(/^\[DIRECT\] worker-\d+: welcome back: the deploy is yours\n$/);
    await eventually(async () => (await t.receipt(later))?.deliveredAt !== undefined, "delivered", 20_000);
    const quiet = await runUnimatrix(
      ["hook", "user-prompt-submit", "--door", door],
      hookInput("UserPromptSubmit", "s-acme-2", { prompt: "hi" }),
      env,
    );
    expect(quiet).toMatchObject({ code: 0, stdout: "" });
  });

  it("Stop blocks once for a pending direct (never while stop_hook_active), and the item is not shown again", async () => {
    const t = await world.team("hooli");
    const daemon = world.daemon(t, world.replicas[0]!.port, "hooli");
    const door = world.door("hooli");
    await daemon.waitFor("linked");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    await runUnimatrix(["hook", "session-start", "--door", door], hookInput("SessionStart", "s-hooli"), env);
    const entryId = await t.direct("stop: the release is blocked on you");
    await daemon.waitFor("notice");

    // Already continuing from a Stop hook: never block again (no loop), and take nothing.
    const looping = await runUnimatrix(
      ["hook", "stop", "--door", door],
      hookInput("Stop", "s-hooli", { stop_hook_active: true }),
      env,
    );
    expect(looping).toMatchObject({ code: 0, stdout: "" });
    expect((await status(door)).pending).toBe(1);

    const stop = await runUnimatrix(
      ["hook", "stop", "--door", door],
      hookInput("Stop", "s-hooli", { stop_hook_active: false }),
      env,
    );
    const decision = JSON.parse(stop.stdout) as { decision: string; reason: string };
    expect(decision.decision).toBe("block");
    expect(decision.reason).toMatch(/\[DIRECT\] worker-\d+: stop: the release is blocked on you/);
    await eventually(async () => (await t.receipt(entryId))?.deliveredAt !== undefined, "delivered", 20_000);

    const again = await runUnimatrix(
      ["hook", "stop", "--door", door],
      hookInput("Stop", "s-hooli", { stop_hook_active: false }),
      env,
    );
    expect(again).toMatchObject({ code: 0, stdout: "" });
    const prompt = await runUnimatrix(
      ["hook", "user-prompt-submit", "--door", door],
      hookInput("UserPromptSubmit", "s-hooli", { prompt: "go on" }),
      env,
    );
    expect(prompt).toMatchObject({ code: 0, stdout: "" });
  });

  it("parallel tool calls: five PostToolUse hooks at once with three items waiting; each item is printed by exactly one", async () => {
    const t = await world.team("stark");
    const daemon = world.daemon(t, world.replicas[0]!.port, "stark");
    const door = world.door("stark");
    await daemon.waitFor("linked");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    await runUnimatrix(["hook", "session-start", "--door", door], hookInput("SessionStart", "s-stark"), env);
    for (const m of ["one", "two", "three"]) await t.direct(m);
    await eventually(async () => (await status(door)).pending === 3, "three items waiting");
    const runs = await Promise.all(
      [1, 2, 3, 4, 5].map((i) =>
        runUnimatrix(
          ["hook", "post-tool-use", "--door", door],
          hookInput("PostToolUse", "s-stark", { tool_name: "Read", tool_use_id: `t${i}` }),
          env,
        ),
      ),
    );
    const lines = runs.flatMap((r) => postToolUseContext(r.stdout).split("\n").filter(Boolean));
    expect(lines.map((l) => l.replace(/^\[DIRECT\] worker-\d+: /, "")).sort()).toEqual(["one", "three", "two"]);
    expect(await status(door)).toMatchObject({ pending: 0, handed: 3 });
  });

  it("kill -9 of the daemon with a notice spooled while presence is away: the restarted daemon clears the stale door, hands the notice from its spool once, and confirms it when presence is back", async () => {
    const t = await world.team("globex");
    let replica = world.replicas[0]!;
    const port = replica.port;
    const door = world.door("globex");
    const first = world.daemon(t, port, "globex");
    await first.waitFor("linked");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    await runUnimatrix(["hook", "session-start", "--door", door], hookInput("SessionStart", "s-globex"), env);
    const entryId = await t.direct("the build is red");
    const spooled = await first.waitFor("notice");

    // Presence drains: the daemon hears going_away and keeps trying; then the daemon is killed.
    await replica.stop();
    await first.waitFor("going_away");
    await first.kill9();
    expect(lstatSync(door).isSocket()).toBe(true); // the killed daemon left its door behind

    // Restarted while presence is still away: only the spool knows the notice.
    const second = world.daemon(t, port, "globex");
    await second.waitFor("door_open");
    expect(await status(door)).toMatchObject({ linked: false, pending: 1, sessions: 1 });
    const shown = await runUnimatrix(
      ["hook", "post-tool-use", "--door", door],
      hookInput("PostToolUse", "s-globex", { tool_name: "Bash" }),
      env,
    );
    expect(postToolUseContext(shown.stdout)).toMatch(/^\[DIRECT\] worker-\d+: the build is red$/);
    expect((await t.receipt(entryId))?.deliveredAt).toBeUndefined();

    // Presence is back on the same address: the daemon relinks, presence resends the unconfirmed
    // notice (same id), the daemon confirms it without showing it again.
    replica = await world.startPresence(port);
    await second.waitFor("linked");
    await eventually(async () => (await t.receipt(entryId))?.deliveredAt !== undefined, "delivered", 30_000);
    expect(second.named("notice").map((e) => [e.id, e.outcome])).toEqual([[spooled.id, "handed"]]);
    expect(await t.notices()).toEqual([{ id: spooled.id, entry_id: entryId, confirmed: true }]);
    const after = await runUnimatrix(
      ["hook", "post-tool-use", "--door", door],
      hookInput("PostToolUse", "s-globex", { tool_name: "Read" }),
      env,
    );
    expect(after).toMatchObject({ code: 0, stdout: "" });
  }, 90_000);

  it("a second daemon on a live door is refused with an EADDRINUSE message and leaves the door alone", async () => {
    const t = await world.team("initech");
    const daemon = world.daemon(t, world.replicas.at(-1)!.port, "initech");
    const door = world.door("initech");
    await daemon.waitFor("door_open");
    const inode = statSync(door).ino;
    const rival = world.daemon(t, world.replicas.at(-1)!.port, "initech");
    expect(await rival.exited).toBe(1);
    expect(rival.stderr).toMatch(/EADDRINUSE: a unimatrix machine daemon is already serving .*machine\.sock/);
    expect(statSync(door).ino).toBe(inode);
    expect((await status(door)).ok).toBe(true);
  });
});
