import { spawnSync } from "node:child_process";
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
// The machine tests' way of running a command as an agent host does (stdin in, to its end).
import { runCommand as run } from "../../../apps/machine/test/run-command";
import { call, connectJson, type System, seedTenant, startSystem } from "./system";

/** The `unimatrix` command as `npm install` links it. */
const UNIMATRIX = join(__dirname, "..", "..", "..", "apps", "unimatrix", "dist", "main.js");

/** The fast client `unimatrix-hook` (sh + curl), which hands over to `unimatrix hook` with no daemon. */
const HOOK_BIN = join(__dirname, "..", "..", "..", "apps", "machine", "bin");

/** Runs `unimatrix hook …` with `input` on stdin, to its end. */
function hook(args: readonly string[], input: string, env: NodeJS.ProcessEnv) {
  return run(process.execPath, [UNIMATRIX, "hook", ...args], input, env);
}

/** Runs `unimatrix-hook …` as an agent host does (`sh -c`), with `input` on stdin, to its end. */
function shHook(args: readonly string[], input: string, env: NodeJS.ProcessEnv) {
  const path = `${HOOK_BIN}:${process.env.PATH ?? ""}`;
  return run("/bin/sh", ["-c", `unimatrix-hook ${args.join(" ")}`], input, { ...env, PATH: path });
}

const input = (event: string, session: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ session_id: session, transcript_path: "/tmp/t.jsonl", cwd: "/", hook_event_name: event, ...extra });

describe("GET /v1/inbox: a hook with no machine daemon reads its drone's inbox at the gateway in one call", () => {
  let system: System;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;
  let author: string;
  let recipientToken: string;
  let recipientId: string;
  const get = async (token: string | undefined, etag?: string) => {
    const response = await fetch(`${system.url}/v1/inbox`, {
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(etag !== undefined ? { "if-none-match": etag } : {}),
      },
    });
    const text = await response.text();
    return {
      status: response.status,
      etag: response.headers.get("etag") ?? "",
      body: text ? (JSON.parse(text) as { lines?: string[]; urgent?: boolean; code?: string; message?: string }) : {},
    };
  };
  const direct = async (message: string) =>
    (
      await call<{ entry: { id: string } }>(
        system,
        "unimatrix.cube.v1.ActivityService/AppendEntry",
        { cubeId: tenant.cubeId, message, visibility: "VISIBILITY_DIRECT", recipientDroneIds: [recipientId] },
        author,
      )
    ).entry.id;
  const receipt = async (entryId: string) =>
    (
      await call<{ receipts: { droneId: string; deliveredVia?: string; deliveredAt?: string; readAt?: string }[] }>(
        system,
        "unimatrix.cube.v1.ActivityService/ListReceipts",
        { cubeId: tenant.cubeId, entryId },
        author,
      )
    ).receipts.find((r) => r.droneId === recipientId);

  beforeAll(async () => {
    system = await startSystem("gw_inbox");
    tenant = await seedTenant(system, "inbox", 2);
    const seat = (token: string) =>
      call<{ sessionToken: string; drone: { id: string } }>(
        system,
        "unimatrix.cube.v1.CubeService/AttachSeat",
        { cubeId: tenant.cubeId, roleId: tenant.roleId, hostname: "laptop" },
        token,
      );
    author = (await seat(tenant.clients[0]!.token)).sessionToken;
    const recipient = await seat(tenant.clients[1]!.token);
    recipientToken = recipient.sessionToken;
    recipientId = recipient.drone.id;
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("204 then 304 when nothing is new; a DIRECT comes once it is posted and again until its cursor is sent back; then it is delivered (HOOK) and read, and the answer is 304", async () => {
    const empty = await get(recipientToken);
    expect(empty.status).toBe(204);
    expect(empty.etag).toMatch(/^"a[\w-]+"$/);
    expect((await get(recipientToken, empty.etag)).status).toBe(304);

    const entryId = await direct("please rebase onto main");
    const first = await get(recipientToken, empty.etag);
    expect(first.status).toBe(200);
    expect(first.body.lines).toEqual([expect.stringMatching(/^#\d+ \S+ → you: please rebase onto main$/)]);
    expect(first.body.urgent).toBe(true);
    expect(first.etag).not.toBe(empty.etag);
    // Shown but not yet confirmed: not delivered; a hook that died before saving the cursor sees it again.
    expect((await receipt(entryId))?.deliveredAt).toBeUndefined();
    const again = await get(recipientToken, empty.etag);
    expect(again.body.lines).toEqual(first.body.lines);

    // The cursor sent back confirms it: delivered via HOOK, read, and nothing new.
    const confirmed = await get(recipientToken, first.etag);
    expect(confirmed.status).toBe(304);
    expect(await receipt(entryId)).toMatchObject({ deliveredVia: "DELIVERY_CHANNEL_HOOK", readAt: expect.any(String) });
    expect((await get(recipientToken, confirmed.etag)).status).toBe(304);
    // The author's own post is never listed back to it.
    expect((await get(author)).status).toBe(204);
  });

  it("refusals use the status table: no token 401; a client token (no inbox) 400 failed_precondition; a malformed or foreign cursor 400 naming confirm_through", async () => {
    expect(await get(undefined)).toMatchObject({ status: 401, body: { code: "unauthenticated" } });
    expect(await get(tenant.clients[0]!.token)).toMatchObject({ status: 400, body: { code: "failed_precondition" } });
    const garbage = await get(recipientToken, '"not-a-cursor"');
    expect(garbage).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(garbage.body.message).toMatch(/confirm_through/);
    const other = await seedTenant(system, "inbox-other", 1);
    const stranger = await call<{ sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: other.cubeId, roleId: other.roleId, hostname: "x" },
      other.clients[0]!.token,
    );
    const theirs = await get(stranger.sessionToken);
    const foreign = await get(recipientToken, theirs.etag);
    expect(foreign).toMatchObject({ status: 400, body: { code: "invalid_argument" } });
    expect(foreign.body.message).toMatch(/confirm_through.*another cube/);
    const unknownRoute = await connectJson(system, "v1/inbox", {}, recipientToken);
    expect(unknownRoute.status).toBe(404); // POST is not served
  });

  it("unimatrix hook with no daemon at the door and --gateway: PostToolUse shows a DIRECT once, Stop blocks once, the receipt turns delivered (HOOK)", async () => {
    const state = mkdtempSync(join(tmpdir(), "umx-hook-state-"));
    const env = {
      UNIMATRIX_DRONE_TOKEN: recipientToken,
      UNIMATRIX_GATEWAY: system.url,
      UNIMATRIX_HOOK_STATE: state,
      UNIMATRIX_DOOR: join(state, "no-daemon.sock"),
    };
    const quiet = await hook(["post-tool-use"], input("PostToolUse", "laptop-1", { tool_name: "Bash" }), env);
    expect(quiet).toEqual({ code: 0, stdout: "", stderr: "" });
    const entryId = await direct("the build is red");
    const shown = await hook(["post-tool-use"], input("PostToolUse", "laptop-1", { tool_name: "Read" }), env);
    expect(shown.stderr).toBe("");
    const context = (JSON.parse(shown.stdout) as { hookSpecificOutput: { additionalContext: string } })
      .hookSpecificOutput.additionalContext;
    expect(context).toMatch(/^#\d+ \S+ → you: the build is red$/);
    // The next call sends the cursor back: delivered, and nothing to show.
    const next = await hook(["post-tool-use"], input("PostToolUse", "laptop-1", { tool_name: "Read" }), env);
    expect(next).toEqual({ code: 0, stdout: "", stderr: "" });
    expect((await receipt(entryId))?.deliveredVia).toBe("DELIVERY_CHANNEL_HOOK");

    // Stop: blocks once for a waiting DIRECT, never while stop_hook_active, and not twice.
    await direct("stop: the release waits on you");
    const looping = await hook(["stop"], input("Stop", "laptop-1", { stop_hook_active: true }), env);
    expect(looping.stdout).toBe("");
    const stop = await hook(["stop"], input("Stop", "laptop-1", { stop_hook_active: false }), env);
    expect(JSON.parse(stop.stdout)).toMatchObject({
      decision: "block",
      reason: expect.stringMatching(/the release waits on you/),
    });
    const again = await hook(["stop"], input("Stop", "laptop-1", { stop_hook_active: false }), env);
    expect(again).toEqual({ code: 0, stdout: "", stderr: "" });
  });

  it("unimatrix-hook (the sh client) with no daemon hands over to the Node hook, which reads the gateway: no door at all, and a stale door (its input kept for the hand-over)", async () => {
    const state = mkdtempSync(join(tmpdir(), "umx-hook-sh-"));
    const door = join(state, "machine.sock");
    const env = { UNIMATRIX_DRONE_TOKEN: recipientToken, UNIMATRIX_GATEWAY: system.url, UNIMATRIX_HOOK_STATE: state };
    const context = (stdout: string) =>
      (JSON.parse(stdout) as { hookSpecificOutput: { additionalContext: string } }).hookSpecificOutput
        .additionalContext;

    const first = await direct("no door here");
    const absent = await shHook(["post-tool-use", "--door", door], input("PostToolUse", "laptop-sh"), env);
    expect({ code: absent.code, stderr: absent.stderr }).toEqual({ code: 0, stderr: "" });
    expect(context(absent.stdout)).toMatch(/(^|\n)#\d+ \S+ → you: no door here$/);

    // A socket file nobody listens on (a daemon killed -9): curl is refused, the Node hook answers.
    spawnSync(process.execPath, [
      "-e",
      `require("node:net").createServer().listen(${JSON.stringify(door)},()=>process.kill(process.pid,"SIGKILL"))`,
    ]);
    expect(statSync(door).isSocket()).toBe(true);
    await direct("a stale door");
    const stale = await shHook(["post-tool-use", "--door", door], input("PostToolUse", "laptop-sh"), env);
    expect({ code: stale.code, stderr: stale.stderr }).toEqual({ code: 0, stderr: "" });
    expect(context(stale.stdout)).toMatch(/^#\d+ \S+ → you: a stale door$/);
    expect((await receipt(first))?.deliveredVia).toBe("DELIVERY_CHANNEL_HOOK");
  });
});
