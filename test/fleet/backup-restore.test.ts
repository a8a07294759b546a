import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import { LinkService } from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { createClient } from "@unimatrix/service-kit/grpc";
import { uniqueName } from "@unimatrix/service-kit/testing";
import { type Dump, dumpSchemas, positionOf, restoreSchemas } from "./harness/backup";
import { type ProbeAnswers, probeCursors } from "./harness/cursor-probes";
import { createDatabase, dropDatabase, Fleet } from "./harness/fleet";
import { followSse } from "./harness/gateway-clients";
import {
  type Acked,
  activityClient,
  bearer,
  cycleLinks,
  followActivity,
  followMachines,
  type LinkStats,
  ROUND_ROBIN,
} from "./harness/grpc";
import { GatewayRouter } from "./harness/http";
import { Ledger } from "./harness/ledger";
import { StatelessAgent } from "./harness/mcp-stateless";
import { poll } from "./harness/processes";
import { buildResult, type RunResult, summary } from "./harness/report";
import { Scenario } from "./harness/scenario";
import { compareSequence, StreamRecord } from "./harness/streams";
import { readLog, replayTransitions } from "./harness/truth";

/**
 * Backups (issue 29 item 6): the fleet under the usual load through every surface; mid-run, after
 * noting the acknowledged appends and the streams' cursors, the operator's `pg_dump -Fc` of the three
 * schemas (README "Back up and restore"); the load goes on, then the fleet stops. The dump is
 * restored (`pg_restore`) into a fresh database and every process starts on it with a fresh Redis
 * prefix (Redis holds nothing to restore). Then: the restored log is the original log up to the
 * dump's snapshot (every append acknowledged before the dump is there; every one acknowledged after
 * it is lost), streams resumed from pre-backup cursors on gRPC, SSE and MCP deliver exactly what
 * follows the cursor, old and new, in order; every credential issued before the dump still
 * authenticates; and a cursor handed out after the dump is refused as ahead of the log until the
 * log grows past it again, after which it is accepted and skips what was written since the restore.
 */

/** A cube entry as read back: id and cursor. */
interface Entry {
  readonly id: string;
  readonly cursor: string;
}

/** Which clients of the world hold what (as in `Scenario`): 0 gRPC writer, 2 MCP agent, 4 gRPC reader, 5 SSE reader, 6/7 watchers; 8 holds a seat. */
const WRITER = 0;
const MCP = 2;
const READER = 4;
const SSE = 5;
const WATCHER = 6;
const SEAT_HOLDER = 8;
/** Revoked after the dump. */
const REVOKED = 9;

/** A Connect JSON call through a gateway: its HTTP status and body. */
async function connect(gateway: string, path: string, body: unknown, bearerToken: string) {
  const answer = await fetch(`${gateway}/unimatrix.${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${bearerToken}` },
    body: JSON.stringify(body),
  });
  return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
}

describe("fleet: a backup taken under load, restored into a fresh database; the fleet resumes on it", () => {
  let fleet: Fleet;
  let scenario: Scenario;
  let result: RunResult;
  let dump: Dump;
  let dumpDir = "";
  let restoredName = "";
  /** What was acknowledged when the dump started. */
  let ackedBeforeDump: Acked[] = [];
  /** The original log (after genesis) when the load stopped, and the restored one before anything new was written. */
  let original: Entry[] = [];
  let restored: Entry[] = [];
  /** Everything after the restore. */
  const after = new Ledger();
  const resumed: StreamRecord[] = [];
  const resumedPresence: StreamRecord[] = [];
  /** Each resumed stream's truth: the restored log after its cursor (ids), or the presence replay. */
  const truths = new Map<StreamRecord, string[]>();
  /** Where each resumed activity stream started. */
  const starts = new Map<StreamRecord, string>();
  /** The presence transitions a stream saw between its noted cursor and the dump (must open the replay). */
  let presenceBeforeDump: string[] = [];
  /** Answers to cursors handed out after the dump (on the restored fleet, before anything new). */
  let ahead: ProbeAnswers | undefined;
  /** The same post-dump cursor once the restored log grew past it: what ReadActivity returns from it. */
  let fromAheadLater: string[] = [];
  /** The entries written after the restore, in order, with cursors. */
  const written: Entry[] = [];
  const credentials: Record<string, string> = {};
  /** What two credentials changed after the dump answered before the fleet stopped (HTTP status). */
  const beforeRestore: Record<string, number> = {};
  /** Waits that timed out after the restore (recorded and asserted, so each check still reports what it saw). */
  const stalls: string[] = [];
  const stalled = (error: Error) => void stalls.push(error.message);

  beforeAll(async () => {
    fleet = await Fleet.start({
      label: "backup",
      targets: "balanced",
      env: {
        presence: {
          PRESENCE_LINK_HEARTBEAT_MS: "1000",
          PRESENCE_LINK_LEASE_MS: "3000",
          PRESENCE_RECONCILE_MS: "1000",
        },
      },
    });
    scenario = await Scenario.start(fleet, "sticky", REVOKED + 1);
    const { world } = scenario;
    const token = (i: number) => world.clients[i]!.token;
    // A drone credential issued before the backup: a seat taken over Connect, as any script does.
    const seat = await fetch(`${fleet.gatewayUrls()[0]}/unimatrix.cube.v1.CubeService/AttachSeat`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token(SEAT_HOLDER)}` },
      body: JSON.stringify({ cubeId: world.cubeId, hostname: "backup-host" }),
    }).then((r) => r.json() as Promise<{ sessionToken: string }>);
    await scenario.progress(80, 8, "before the dump");

    // Note what was acknowledged and where each stream is, then dump while the load goes on.
    const [grpcStream, sseStream] = [scenario.activity[0]!, scenario.activity[2]!];
    const mcpStream = scenario.stateless[0]!.record;
    const machines = scenario.presence[0]!;
    const sseMachines = scenario.presence.find((r) => r.surface === "sse")!;
    const half = (r: StreamRecord) => r.delivered[Math.floor(r.delivered.length / 2)]!.cursor;
    const noted = {
      grpcHead: grpcStream.cursor,
      grpcMid: half(grpcStream),
      sse: sseStream.cursor,
      mcp: mcpStream.cursor,
      machines: half(machines),
      sseMachines: sseMachines.cursor,
    };
    presenceBeforeDump = machines.keys().slice(Math.floor(machines.delivered.length / 2) + 1);
    ackedBeforeDump = [...scenario.acked];
    dumpDir = mkdtempSync(join(tmpdir(), "umx-fleet-backup-"));
    dump = await dumpSchemas(fleet.databaseUrl, join(dumpDir, "unimatrix.dump"));
    fleet.note(`pg_dump took ${dump.endedAt - dump.startedAt} ms; ${ackedBeforeDump.length} acknowledged before it`);
    // After the dump: one credential revoked, one issued (each checked before the fleet stops).
    const first = fleet.gatewayUrls()[0]!;
    const revoke = { clientId: world.clients[REVOKED]!.id };
    await connect(first, "cube.v1.IdentityService/RevokeClient", revoke, world.userToken);
    const issued = await connect(first, "cube.v1.IdentityService/IssueClient", { name: "after" }, world.userToken);
    const issuedAfterDump = issued.body.token as string;
    for (const [what, bearerToken] of [
      ["revoked after the dump", token(REVOKED)],
      ["issued after the dump", issuedAfterDump],
    ] as const)
      beforeRestore[what] = (await connect(first, "cube.v1.CubeService/ListCubes", {}, bearerToken)).status;
    await scenario.progress(40, 4, "after the dump");
    await scenario.stopLoad();
    result = buildResult(scenario, await scenario.settle());
    process.stdout.write(`\n${result.lines.join("\n")}\n`);
    const activity = activityClient(Fleet.target(fleet.cube));
    original = await readLog(activity, token(READER), world.cubeId, scenario.genesis);
    activity.close();
    /** A cursor every stream held when the fleet stopped: the original log's last. */
    const beyond = original.at(-1)!.cursor;
    const beyondMachines = machines.cursor;
    await scenario.close();

    // The restore: a fresh database, the dump restored into it, every process started on it with a fresh bus prefix.
    restoredName = uniqueName("fleet_restored");
    const restoredUrl = await createDatabase(restoredName);
    await restoreSchemas(restoredUrl, dump.file);
    fleet.note(`restored into ${restoredName}`);
    await fleet.moveTo(restoredUrl, restoredName.replaceAll("_", "-"));

    const client = activityClient(Fleet.target(fleet.cube));
    const watch = createClient(MachineService, Fleet.target(fleet.presence), undefined, ROUND_ROBIN);
    const link = createClient(LinkService, Fleet.target(fleet.presence), undefined, ROUND_ROBIN);
    restored = await readLog(client, token(READER), world.cubeId, scenario.genesis);

    // Cursors handed out after the dump, before anything new is written.
    const probeDeps = {
      activity: client,
      machines: watch,
      gateways: () => fleet.gatewayUrls(),
      world,
      tokens: { reader: token(READER), mcp: token(MCP), watcher: token(WATCHER) },
    };
    ahead = await probeCursors(probeDeps, beyond, beyondMachines);

    // Streams resumed from the cursors noted before the dump: gRPC, SSE (Last-Event-ID), MCP 2026 listen, presence.
    const streams = new AbortController();
    const gatewayName = (url: string) => scenario.gatewayName(url);
    const activityFrom = (name: string, cursor: string) => {
      const record = new StreamRecord(name, "grpc", "activity", cursor);
      resumed.push(record);
      starts.set(record, cursor);
      return followActivity(record, client, token(READER), world.cubeId, after, scenario.peerName, streams.signal);
    };
    const followers = [activityFrom("grpc from the noted head", noted.grpcHead)];
    followers.push(activityFrom("grpc from mid-log", noted.grpcMid));
    const sources: { close(): void }[] = [];
    for (const gateway of [0, 1]) {
      const record = new StreamRecord(`sse from its noted cursor (gateway ${gateway})`, "sse", "activity", noted.sse);
      const router = new GatewayRouter(() => fleet.gatewayUrls(), after, `sse resumed #${gateway}`, gateway);
      sources.push(followSse(record, router, `/v1/cubes/${world.cubeId}/events`, token(SSE), after, gatewayName));
      resumed.push(record);
      starts.set(record, noted.sse);
    }
    const listener = await StatelessAgent.open(
      new GatewayRouter(() => fleet.gatewayUrls(), after, "mcp-2026 listen", 1),
      new GatewayRouter(() => fleet.gatewayUrls(), after, "mcp-2026 post", 0),
      token(MCP),
      after,
      "mcp-2026 listen from its noted cursor",
      noted.mcp,
    );
    await listener.attach(world.cubeId, world.roleId);
    resumed.push(listener.record);
    starts.set(listener.record, noted.mcp);
    followers.push(listener.listenLoop(streams.signal));
    const machinesRecord = new StreamRecord("grpc machines from mid-log", "grpc", "presence", noted.machines);
    followers.push(followMachines(machinesRecord, watch, token(WATCHER), after, scenario.peerName, streams.signal));
    const sseMachinesRecord = new StreamRecord(
      "sse machines from its noted cursor",
      "sse",
      "presence",
      noted.sseMachines,
    );
    sources.push(
      followSse(
        sseMachinesRecord,
        new GatewayRouter(() => fleet.gatewayUrls(), after, "sse machines resumed", 1),
        "/v1/machines/events",
        token(WATCHER + 1),
        after,
        gatewayName,
      ),
    );
    resumedPresence.push(machinesRecord, sseMachinesRecord);
    await poll(
      () => [...resumed, ...resumedPresence].every((r) => r.readyCount > 0),
      "the resumed streams to be live",
    ).catch(stalled);

    // Every credential issued before the dump: the user's, each client's, the seat's (drone), each machine's.
    const gateway = fleet.gatewayUrls()[1]!;
    const listed = await connect(gateway, "cube.v1.CubeService/ListCubes", {}, world.userToken);
    credentials.user = `${listed.status} ${(listed.body.cubes as { id: string }[] | undefined)?.map((c) => c.id)}`;
    for (const [i, c] of world.clients.entries()) {
      const answer = await connect(gateway, "cube.v1.CubeService/ListCubes", {}, c.token);
      credentials[`client ${i}`] =
        `${answer.status} ${(answer.body.cubes as { id: string }[] | undefined)?.map((x) => x.id)}`;
    }
    // Machines linked in the dump are unlinked by presence's reconcile (their links are gone); then each links again.
    await poll(
      async () =>
        (await watch.listMachines({}, bearer(world.userToken, { deadline: Date.now() + 5_000 }))).machines.every(
          (m) => !m.linked,
        ),
      "presence to unlink the machines the dump had linked",
    ).catch(stalled);
    const linking = new AbortController();
    const stats = new Map<string, LinkStats>(world.machines.map((m) => [m.id, { links: 0, unlinks: 0, broken: 0 }]));
    const cycles = world.machines.map((m) =>
      cycleLinks(link, m, after, scenario.peerName, stats.get(m.id)!, linking.signal, 100),
    );
    await poll(
      () => [...stats.values()].every((s) => s.unlinks >= 1),
      "each machine to link and unlink once",
      15_000,
    ).catch(stalled);
    linking.abort();
    await Promise.all(cycles);
    for (const m of world.machines) {
      const s = stats.get(m.id)!;
      credentials[`machine ${m.name}`] =
        s.links >= 1 && s.unlinks >= 1 && s.broken === 0 ? "linked" : JSON.stringify(s);
    }
    credentials["issued after the dump"] = String(
      (await connect(gateway, "cube.v1.CubeService/ListCubes", {}, issuedAfterDump)).status,
    );
    const byDrone = await connect(
      gateway,
      "cube.v1.ActivityService/AppendEntry",
      { cubeId: world.cubeId, message: "from the restored seat", visibility: "VISIBILITY_BROADCAST" },
      seat.sessionToken,
    );
    credentials.drone = String(byDrone.status);
    const entryOf = (e: { id: string; cursor: string }) => ({ id: e.id, cursor: e.cursor });
    if (byDrone.status === 200) written.push(entryOf(byDrone.body.entry as Entry));

    // New appends until the post-dump cursor is no longer ahead of the log, and ten more after it.
    const append = async (n: number) => {
      const reply = await client.appendEntry(
        { cubeId: world.cubeId, message: `after restore ${n}`, visibility: Visibility.BROADCAST },
        bearer(token(WRITER), { deadline: Date.now() + 5_000 }),
      );
      written.push(entryOf(reply.entry!));
    };
    let n = 0;
    while (written.length === 0 || positionOf(written.at(-1)!.cursor) < positionOf(beyond)) await append(++n);
    for (let i = 0; i < 10; i++) await append(++n);
    fromAheadLater = (await readLog(client, token(READER), world.cubeId, beyond)).map((e) => e.id);

    // The truth read back from the restored database, and each resumed stream caught up with it.
    const all = (await readLog(client, token(READER), world.cubeId, scenario.genesis)).map((e) => e.id);
    for (const record of resumed)
      truths.set(
        record,
        (await readLog(client, token(READER), world.cubeId, starts.get(record)!)).map((e) => e.id),
      );
    await poll(
      () => resumed.every((r) => r.delivered.some((d) => d.key === all.at(-1) || d.cursor === written.at(-1)!.cursor)),
      "every resumed activity stream to deliver the last entry",
      30_000,
      100,
    ).catch(stalled);
    listener.record.rekey({
      cursor: new Map([...restored, ...written].map((e) => [e.cursor, e.id])),
      message: new Map(),
    });
    const replay = (cursor: string) =>
      replayTransitions(watch, world.userToken, cursor).catch((error: Error) => {
        stalled(error);
        return [];
      });
    truths.set(machinesRecord, await replay(noted.machines));
    truths.set(sseMachinesRecord, await replay(noted.sseMachines));
    await poll(
      () => resumedPresence.every((r) => truths.get(r)!.length === 0 || r.keys().includes(truths.get(r)!.at(-1)!)),
      "every resumed presence stream to deliver the last transition",
      30_000,
      100,
    ).catch(stalled);
    streams.abort();
    for (const source of sources) source.close();
    await listener.close();
    await Promise.allSettled(followers);
    client.close();
    watch.close();
    link.close();
    process.stdout.write(
      `[backup] dump ${dump.endedAt - dump.startedAt} ms; acknowledged before it ${ackedBeforeDump.length}, in all ${scenario.acked.length}; ` +
        `original log ${original.length}, restored ${restored.length}, written after ${written.length}; ` +
        `post-dump cursor: ${JSON.stringify(ahead)}; later it skipped ${written.length - fromAheadLater.length}\n`,
    );
  }, 240_000);

  afterAll(async () => {
    await scenario?.close();
    await fleet?.stop();
    if (restoredName) await dropDatabase(restoredName).catch(() => {});
    if (dumpDir) rmSync(dumpDir, { recursive: true, force: true });
  }, 60_000);

  it("before the restore: every acknowledged append in the log, every stream exactly once, no request failed", () => {
    expect(result.ackedMissingFromLog).toEqual([]);
    expect(summary(result.activity)).toEqual(Object.fromEntries(result.activity.map((r) => [r.name, "exact"])));
    expect(summary(result.presence)).toEqual(Object.fromEntries(result.presence.map((r) => [r.name, "exact"])));
    expect(fleet.ledger.requests.filter((r) => !r.ok)).toEqual([]);
  });

  it("the restored log is the original up to the dump: every append acknowledged before it kept, every one after it lost", () => {
    const ids = restored.map((e) => e.id);
    expect(ids).toEqual(original.slice(0, restored.length).map((e) => e.id));
    const kept = new Set(ids);
    expect(ackedBeforeDump.filter((a) => !kept.has(a.id)).map((a) => a.message)).toEqual([]);
    const afterDump = scenario.acked.filter((a) => a.at > dump.endedAt);
    expect(afterDump.length).toBeGreaterThan(0);
    expect(afterDump.filter((a) => kept.has(a.id)).map((a) => a.message)).toEqual([]);
    // What was lost is exactly the original log's tail from the snapshot on.
    expect(original.length).toBeGreaterThan(restored.length);
  });

  it("streams resumed from pre-backup cursors deliver exactly what follows them, restored and new, in order (gRPC, SSE, MCP, presence)", () => {
    expect(stalls).toEqual([]);
    const reports = [...resumed, ...resumedPresence].map((r) => compareSequence(r.name, truths.get(r)!, r.keys()));
    expect(summary(reports)).toEqual(Object.fromEntries(reports.map((r) => [r.name, "exact"])));
    // No stream was reset or told of an error on the way (a resumed watch must not start from a snapshot).
    const all = [...resumed, ...resumedPresence];
    expect(all.map((r) => [r.name, r.errorEvents])).toEqual(all.map((r) => [r.name, []]));
    // Each activity stream's truth is the restored log after its cursor, then what was written after the restore.
    const newIds = written.map((e) => e.id);
    for (const record of resumed) expect(truths.get(record)!.slice(-newIds.length)).toEqual(newIds);
    // The presence replay opens with what the stream saw between its cursor and the dump.
    expect(truths.get(resumedPresence[0]!)!.slice(0, presenceBeforeDump.length)).toEqual(presenceBeforeDump);
    expect(after.requests.filter((r) => !r.ok).map((r) => `${r.surface} ${r.outcome}`)).toEqual([]);
  });

  it("every credential issued before the dump authenticates (user, clients, seat, machines), even one revoked after it; one issued after it does not", () => {
    const cube = scenario.world.cubeId;
    expect(beforeRestore).toEqual({ "revoked after the dump": 401, "issued after the dump": 200 });
    expect(credentials).toEqual({
      "issued after the dump": "401",
      user: `200 ${cube}`,
      ...Object.fromEntries(scenario.world.clients.map((_, i) => [`client ${i}`, `200 ${cube}`])),
      ...Object.fromEntries(scenario.world.machines.map((m) => [`machine ${m.name}`, "linked"])),
      drone: "200",
    });
  });

  it("a cursor handed out after the dump is ahead of the restored log (INVALID_ARGUMENT, SSE 400, MCP invalid params, presence reset), then silently skips once the log grows past it", () => {
    expect(ahead).toEqual({
      readActivity: expect.stringMatching(/^INVALID_ARGUMENT: .*ahead of the cube's activity/),
      subscribeActivity: expect.stringMatching(/^INVALID_ARGUMENT: .*ahead of the cube's activity/),
      sse: "400 invalid_argument",
      // Refused before it is acknowledged: the SDK's listen() throws invalid params (-32602, see
      // services/gateway/test/mcp-listen-cursor.test.ts) with this message.
      mcpListen: "after: is ahead of the cube's activity; 0 delivered",
      watchMachines: "snapshot reset=true",
    });
    // Positions are reused: once the restored log passes the cursor, it resumes after that position,
    // skipping every entry written since the restore at or below it.
    const beyond = positionOf(original.at(-1)!.cursor);
    expect(fromAheadLater).toEqual(written.filter((e) => positionOf(e.cursor) > beyond).map((e) => e.id));
    expect(written.filter((e) => positionOf(e.cursor) <= beyond).length).toBeGreaterThan(0);
  });
});
