import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DaemonProcess, eventually, HOOK_BIN, runCommand, runHookCommand, runUnimatrix, World } from "./world";

const input = (event: string, session: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ session_id: session, transcript_path: "/tmp/t.jsonl", cwd: "/", hook_event_name: event, ...extra });

/** The lines a PostToolUse hook put in the context (none when it printed nothing). */
function contextLines(stdout: string): string[] {
  if (stdout === "") return [];
  const parsed = JSON.parse(stdout) as { hookSpecificOutput: { additionalContext: string } };
  return parsed.hookSpecificOutput.additionalContext.split("\n");
}

const message = (line: string) => line.replace(/^\[DIRECT\] worker-\d+: /, "");

/** The native client the build compiles where a C compiler is (it is here: the tests use it). */
const NATIVE = join(HOOK_BIN, "..", "dist", "unimatrix-hook-native");
const hasCompiler = spawnSync("cc", ["--version"], { stdio: "ignore" }).status === 0;

describe("the unimatrix-hook sh client (native or curl, to the door's HTTP face), as a Claude Code settings snippet runs it", () => {
  const world = new World();
  let port = 0;

  beforeAll(async () => {
    await world.start();
    port = (await world.startPresence()).port;
  }, 60_000);
  afterAll(() => world.close(), 60_000);

  it("50 tool calls with the daemon killed -9 and restarted mid-run: every DIRECT exactly once, at its next PostToolUse, each receipt delivered", async () => {
    const t = await world.team("sh-umbrella");
    const door = world.door("sh-umbrella");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken, UNIMATRIX_DOOR: door };
    let daemon: DaemonProcess = world.daemon(t, port, "sh-umbrella");
    await daemon.waitFor("linked");
    const start = await runHookCommand("unimatrix-hook session-start", input("SessionStart", "host-1"), env);
    expect(start).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(daemon.named("session")).toHaveLength(1);

    const posted = new Map<string, { call: number; entryId: string }>();
    const seen: { line: string; call: number }[] = [];
    let downEntry = "";
    for (let call = 1; call <= 50; call += 1) {
      if (call % 7 === 3) {
        const text = `task ${call}`;
        const entryId = await t.direct(text);
        posted.set(text, { call, entryId });
        if (daemon.running)
          await eventually(() => daemon.named("notice").some((e) => e.entryId === entryId), `${text} spooled`);
      }
      if (call === 20) {
        await daemon.kill9();
        downEntry = await t.direct("while the daemon was down");
        posted.set("while the daemon was down", { call, entryId: downEntry });
      }
      if (call === 24) {
        daemon = world.daemon(t, port, "sh-umbrella");
        await daemon.waitFor("linked");
        await eventually(() => daemon.named("notice").some((e) => e.entryId === downEntry), "the resend", 20_000);
      }
      const run = await runHookCommand(
        "unimatrix-hook post-tool-use",
        input("PostToolUse", "host-1", { tool_name: "Bash", tool_input: { command: `step ${call}` } }),
        env,
      );
      expect(run.code).toBe(0);
      // While the daemon is dead its socket stays behind: curl is refused and the Node hook answers
      // (no gateway configured: a line on stderr, nothing on stdout), as `unimatrix hook` would.
      if (call >= 20 && call < 24)
        expect(run).toEqual({
          code: 0,
          stdout: "",
          stderr: expect.stringMatching(/^unimatrix hook post-tool-use: connect ECONNREFUSED /),
        });
      else expect(run.stderr).toBe("");
      for (const line of contextLines(run.stdout)) seen.push({ line, call });
    }

    // Exactly once each, in order of posting, each at the call expected.
    expect(seen.map((s) => message(s.line))).toEqual([...posted.keys()]);
    for (const s of seen) {
      const text = message(s.line);
      const expected = text === "while the daemon was down" ? 24 : posted.get(text)?.call;
      expect({ text, call: s.call }).toEqual({ text, call: expected });
    }
    // Delivered receipts: the daemon confirmed each after the client printed it.
    for (const { entryId } of posted.values())
      await eventually(
        async () => (await t.receipt(entryId))?.deliveredAt !== undefined,
        `${entryId} delivered`,
        20_000,
      );
    expect(await t.notices()).toHaveLength(posted.size);
  }, 180_000);

  it("Stop blocks once for a waiting DIRECT, never with stop_hook_active, and not again; the receipt turns delivered", async () => {
    const t = await world.team("sh-stop");
    const door = world.door("sh-stop");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    const daemon = world.daemon(t, port, "sh-stop");
    await daemon.waitFor("linked");
    const entryId = await t.direct("stop and look");
    await eventually(() => daemon.named("notice").some((e) => e.entryId === entryId), "spooled");

    const active = await runHookCommand(
      `unimatrix-hook stop --door '${door}'`,
      input("Stop", "host-s", { stop_hook_active: true }),
      env,
    );
    expect(active).toEqual({ code: 0, stdout: "", stderr: "" });
    const first = await runHookCommand(`unimatrix-hook stop --door '${door}'`, input("Stop", "host-s"), env);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({
      decision: "block",
      reason: expect.stringMatching(/^New messages from your team:\n\[DIRECT\] worker-\d+: stop and look$/),
    });
    await eventually(async () => (await t.receipt(entryId))?.deliveredAt !== undefined, "delivered", 20_000);
    const second = await runHookCommand(`unimatrix-hook stop --door '${door}'`, input("Stop", "host-s"), env);
    expect(second).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(daemon.named("handed")).toHaveLength(1);
  }, 60_000);

  it("prints exactly what the Node hook prints, through the native client and through curl, for each event and format (a ~/.curlrc changes nothing)", async () => {
    expect(existsSync(NATIVE)).toBe(hasCompiler);
    const t = await world.team("sh-parity");
    const door = world.door("sh-parity");
    // A user's curlrc asking for verbose output and a file: the client must ignore it (curl -q).
    const home = mkdtempSync(join(tmpdir(), "umx-home-"));
    writeFileSync(join(home, ".curlrc"), `verbose\noutput = "${join(home, "out")}"\n`);
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken, HOME: home };
    const daemon = world.daemon(t, port, "sh-parity");
    await daemon.waitFor("linked");
    const cases: [string, string, string[]][] = [
      ["session-start", "SessionStart", []],
      ["post-tool-use", "PostToolUse", []],
      ["post-tool-use", "PostToolUse", ["--format", "text"]],
      ["user-prompt-submit", "UserPromptSubmit", []],
      ["user-prompt-submit", "UserPromptSubmit", ["--format=text", "--harness", "my-host"]],
      ["stop", "Stop", []],
    ];
    let spooled = 0;
    for (const [event, name, options] of cases) {
      const outputs: string[] = [];
      for (const client of ["node", "native", "curl"]) {
        // The same text twice: the two clients must print the same bytes for it.
        const entryId = await t.direct(`same "text" ünïcode\\ ${event}`);
        spooled += 1;
        await eventually(() => daemon.named("notice").some((e) => e.entryId === entryId), "spooled");
        // A large input, as a PostToolUse with a big tool response is.
        const data = input(name, `host-${options.join("")}`, { tool_response: "x".repeat(200_000) });
        const run =
          client === "node"
            ? await runUnimatrix(["hook", event, "--door", door, ...options], data, env)
            : await runHookCommand(`unimatrix-hook ${event} --door '${door}' ${options.join(" ")}`, data, {
                ...env,
                UNIMATRIX_HOOK_NATIVE: client === "native" ? "1" : "0",
              });
        expect({ client, event, code: run.code, stderr: run.stderr }).toEqual({ client, event, code: 0, stderr: "" });
        outputs.push(run.stdout);
      }
      expect(outputs[0]).not.toBe("");
      expect({ event, options, native: outputs[1], curl: outputs[2] }).toEqual({
        event,
        options,
        native: outputs[0],
        curl: outputs[0],
      });
    }
    await eventually(() => daemon.named("handed").length === spooled, "all handed");
  }, 90_000);

  it("falls back to the Node hook: no door (ENOENT), --help, a bad event or format, no curl on PATH (the item still arrives, through the JSON-lines door)", async () => {
    const t = await world.team("sh-fallback");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    const absent = join(mkdtempSync(join(tmpdir(), "umx-nodoor-")), "machine.sock");
    const none = await runHookCommand(
      `unimatrix-hook post-tool-use --door '${absent}'`,
      input("PostToolUse", "f"),
      env,
    );
    // Only the Node hook writes this line (the sh client never reached curl).
    expect(none.code).toBe(0);
    expect(none.stdout).toBe("");
    expect(none.stderr).toMatch(/^unimatrix hook post-tool-use: connect ENOENT /);
    // --help and a bad event are the Node hook's too (its usage text, its exit code).
    const help = await runHookCommand("unimatrix-hook --help", "", env);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: unimatrix hook <event>/);
    expect((await runHookCommand("unimatrix-hook no-such-event", "", env)).code).toBe(2);
    expect((await runHookCommand(`unimatrix-hook stop --door '${absent}' --format yaml`, "", env)).code).toBe(2);

    const door = world.door("sh-fallback");
    const daemon = world.daemon(t, port, "sh-fallback");
    await daemon.waitFor("linked");
    const entryId = await t.direct("through node");
    await eventually(() => daemon.named("notice").some((e) => e.entryId === entryId), "spooled");
    // A PATH with node and sh but no curl: the client cannot take the fast path.
    const bin = mkdtempSync(join(tmpdir(), "umx-nocurl-"));
    mkdirSync(join(bin, "p"));
    symlinkSync(process.execPath, join(bin, "p", "node"));
    symlinkSync(join(HOOK_BIN, "unimatrix-hook"), join(bin, "p", "unimatrix-hook"));
    expect(spawnSync("/bin/sh", ["-c", "command -v curl"], { env: { PATH: join(bin, "p") } }).status).not.toBe(0);
    // …reached through a symlink, as node_modules/.bin links it (the script finds hook.cjs by its target).
    symlinkSync("/usr/bin/readlink", join(bin, "p", "readlink"));
    const run = await runCommand(
      "/bin/sh",
      ["-c", `unimatrix-hook post-tool-use --door '${door}'`],
      input("PostToolUse", "f"),
      // Without the native client too: it needs no curl, so it would take the fast path.
      { ...env, PATH: join(bin, "p"), UNIMATRIX_HOOK_NATIVE: "0" },
    );
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
    expect(run.stdout).toMatch(
      /^\{"hookSpecificOutput":\{"hookEventName":"PostToolUse","additionalContext":"\[DIRECT\] worker-\d+: through node"\}\}\n$/,
    );
    await eventually(async () => (await t.receipt(entryId))?.deliveredAt !== undefined, "delivered", 20_000);
    expect(statSync(door).mode & 0o777).toBe(0o600);
  }, 60_000);

  (hasCompiler ? it : it.skip)(
    "reached through npm's node_modules/.bin link, it finds the native client without starting readlink (nor curl, nor node)",
    async () => {
      const t = await world.team("sh-npm-bin");
      const door = world.door("sh-npm-bin");
      const daemon = world.daemon(t, port, "sh-npm-bin");
      await daemon.waitFor("linked");
      const entryId = await t.direct("through the bin link");
      await eventually(() => daemon.named("notice").some((e) => e.entryId === entryId), "spooled");
      // npm's layout: node_modules/.bin/unimatrix-hook → ../@unimatrix/machine/bin/unimatrix-hook.
      const root = mkdtempSync(join(tmpdir(), "umx-npmbin-"));
      mkdirSync(join(root, "node_modules", ".bin"), { recursive: true });
      mkdirSync(join(root, "node_modules", "@unimatrix"));
      symlinkSync(join(HOOK_BIN, ".."), join(root, "node_modules", "@unimatrix", "machine"));
      const link = join(root, "node_modules", ".bin", "unimatrix-hook");
      symlinkSync("../@unimatrix/machine/bin/unimatrix-hook", link);
      // The PATH holds only the link: readlink, curl and node cannot start.
      const run = await runCommand(link, ["post-tool-use", "--door", door], input("PostToolUse", "bin"), {
        UNIMATRIX_DRONE_TOKEN: t.droneToken,
        PATH: join(root, "node_modules", ".bin"),
      });
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
      expect(contextLines(run.stdout).map(message)).toEqual(["through the bin link"]);
      await eventually(async () => (await t.receipt(entryId))?.deliveredAt !== undefined, "delivered", 20_000);
    },
    60_000,
  );
});
