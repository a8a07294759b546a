import * as grpc from "@grpc/grpc-js";
import { NoticeService } from "@unimatrix/contracts/unimatrix/cube/v1/notice_service_pb";
import { DoorClient } from "@unimatrix/machine";
import { createClient } from "@unimatrix/service-kit/grpc";
import { asBearer, asPrincipal, TEST_INTERNAL_KEY } from "@unimatrix/service-kit/testing";
import { eventually, runUnimatrix, World } from "./world";

const input = (event: string, session: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ session_id: session, transcript_path: "/tmp/t.jsonl", cwd: "/", hook_event_name: event, ...extra });

/** The additionalContext a PostToolUse hook printed ("" when it printed nothing). */
function context(stdout: string): string {
  if (stdout === "") return "";
  return (JSON.parse(stdout) as { hookSpecificOutput: { additionalContext: string } }).hookSpecificOutput
    .additionalContext;
}

async function sessions(door: string): Promise<number> {
  const client = await DoorClient.connect(door);
  try {
    return (await client.request<{ sessions: number }>({ op: "status" })).sessions;
  } finally {
    client.close();
  }
}

describe("sessions at the door tie their drone to the machine (the Link's session → cube's BindSession)", () => {
  const world = new World();

  beforeAll(async () => {
    await world.start();
    await world.startPresence();
  }, 60_000);
  afterAll(() => world.close(), 60_000);

  it("with no --cube and a seat attached without machine_id: session-start ties it, a DIRECT reaches the hook, session-end unties it (no notice for the machine after)", async () => {
    const t = await world.team("wayne", { attachMachine: false });
    expect(await t.tiedTo()).toEqual({ session: null, drone: null });
    const daemon = world.daemon(t, world.replicas[0]!.port, "wayne", [], false);
    const door = world.door("wayne");
    await daemon.waitFor("linked");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };

    const start = await runUnimatrix(["hook", "session-start", "--door", door], input("SessionStart", "w-1"), env);
    expect(start).toMatchObject({ code: 0, stdout: "", stderr: "" });
    expect(await daemon.waitFor("session")).toMatchObject({ session: "w-1", droneId: t.recipient, bound: true });
    expect(await t.tiedTo()).toEqual({ session: t.machineId, drone: t.machineId });

    const entryId = await t.direct("tied at the door");
    await daemon.waitFor("notice");
    const run = await runUnimatrix(["hook", "post-tool-use", "--door", door], input("PostToolUse", "w-1"), env);
    expect(context(run.stdout)).toMatch(/^\[DIRECT\] worker-\d+: tied at the door$/);
    await eventually(async () => (await t.receipt(entryId))?.deliveredAt !== undefined, "delivered", 20_000);

    const end = await runUnimatrix(["hook", "session-end", "--door", door], input("SessionEnd", "w-1"), env);
    expect(end).toMatchObject({ code: 0, stdout: "", stderr: "" });
    expect(await daemon.waitFor("session_end")).toMatchObject({ session: "w-1" });
    // Untied at once (or, had the link been down just then, at the next link).
    await eventually(async () => (await t.tiedTo()).session === null, "the drone session untied");
    expect(await t.tiedTo()).toEqual({ session: null, drone: null });
    expect(await sessions(door)).toBe(0);
    // Untied: a DIRECT now queues no notice for the machine (its receipt waits for another channel).
    const later = await t.direct("after the session ended");
    expect((await t.notices()).map((n) => n.entry_id)).toEqual([entryId]);
    expect((await t.receipt(later))?.deliveredAt).toBeUndefined();
  });

  it("a relinked daemon ties its sessions again; a token that died is forgotten then", async () => {
    const t = await world.team("tyrell", { attachMachine: false });
    const replica = world.replicas[0]!;
    const daemon = world.daemon(t, replica.port, "tyrell", [], false);
    const door = world.door("tyrell");
    await daemon.waitFor("linked");
    const env = { UNIMATRIX_DRONE_TOKEN: t.droneToken };
    await runUnimatrix(["hook", "session-start", "--door", door], input("SessionStart", "ty-1"), env);
    expect(await daemon.waitFor("session")).toMatchObject({ bound: true });

    // cube forgets the tie behind the daemon's back; the next link ties the session again.
    await world.sql.query("UPDATE drone_sessions SET machine_id = NULL WHERE drone_id = $1", [t.recipient]);
    await replica.stop();
    await daemon.waitFor("going_away");
    const back = await world.startPresence(replica.port);
    await daemon.waitFor("linked", 2);
    expect(await daemon.waitFor("session", 2)).toMatchObject({ session: "ty-1", bound: true });
    expect((await t.tiedTo()).session).toBe(t.machineId);

    // The agents' client is revoked (its sessions die); at the next link the session is forgotten.
    await t.revokeAgents();
    await back.stop();
    await daemon.waitFor("going_away", 2);
    await world.startPresence(replica.port);
    await daemon.waitFor("linked", 3);
    expect(await daemon.waitFor("session_token_dead")).toMatchObject({ session: "ty-1" });
    expect(await sessions(door)).toBe(0);
  }, 90_000);

  it("BindSession itself: only machines; a token that is no drone's is INVALID_ARGUMENT naming session_token; a dead or foreign one NOT_FOUND; unbinding another machine's tie changes nothing", async () => {
    const t = await world.team("cyberia");
    const other = await world.team("soylent");
    const notices = createClient(NoticeService, `127.0.0.1:${world.cube.port}`);
    const as = (tenantId: string, machineId: string) =>
      asPrincipal({ kind: "machine", tenantId, subjectId: machineId }, TEST_INTERNAL_KEY);
    const code = (promise: Promise<unknown>) =>
      promise.then(
        () => "OK",
        (error: grpc.ServiceError) => `${grpc.status[error.code]} ${error.details}`,
      );
    try {
      expect(await code(notices.bindSession({ sessionToken: t.droneToken }, asBearer(t.droneToken)))).toMatch(
        /^PERMISSION_DENIED/,
      );
      expect(await code(notices.bindSession({ sessionToken: "umx_client_x_y" }, as(t.tenantId, t.machineId)))).toMatch(
        /^INVALID_ARGUMENT .*session_token/,
      );
      // Another tenant's machine holding this tenant's token: as if no such session.
      expect(
        await code(notices.bindSession({ sessionToken: t.droneToken }, as(other.tenantId, other.machineId))),
      ).toMatch(/^NOT_FOUND/);
      // Already tied (attached with machine_id): nothing changes.
      const again = await notices.bindSession({ sessionToken: t.droneToken }, as(t.tenantId, t.machineId));
      expect(again).toMatchObject({ droneId: t.recipient, changed: false });
      // Untying from a machine it is not tied to changes nothing.
      const stranger = crypto.randomUUID();
      const foreign = await notices.bindSession({ sessionToken: t.droneToken, unbind: true }, as(t.tenantId, stranger));
      expect(foreign.changed).toBe(false);
      expect((await t.tiedTo()).session).toBe(t.machineId);
      await t.revokeAgents();
      expect(await code(notices.bindSession({ sessionToken: t.droneToken }, as(t.tenantId, t.machineId)))).toMatch(
        /^NOT_FOUND/,
      );
    } finally {
      notices.close();
    }
  });
});
