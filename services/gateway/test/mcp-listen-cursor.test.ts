import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { eventually } from "@unimatrix/service-kit/testing";
import { call, type System, seedTenant, startSystem } from "./system";

/**
 * A listen's `after` that cube refuses is refused before the listen is acknowledged, naming
 * `after`: a cursor ahead of the cube's log (what every cursor handed out after a backup is once
 * the backup is restored, see test/fleet/backup-restore.test.ts) and a malformed one. Before, the
 * listen was acknowledged and ended at once as if complete, and the agent was told nothing.
 */

/** The same cursor moved `by` positions on (`a` + base64url(16-byte cube id, 8-byte position)). */
function movedOn(cursor: string, by: bigint): string {
  const bytes = Buffer.from(cursor.slice(1), "base64url");
  bytes.writeBigUInt64BE(bytes.readBigUInt64BE(16) + by, 16);
  return `a${bytes.toString("base64url")}`;
}

describe("gateway: MCP 2026-07-28 listen from a cursor cube refuses", () => {
  let system: System;
  let team: Awaited<ReturnType<typeof seedTenant>>;
  let client: Client;
  let seat = "";
  let last = "";

  beforeAll(async () => {
    system = await startSystem("gw_mcp_listen_cursor");
    team = await seedTenant(system, "cursors", 2);
    client = new Client(
      { name: "cursor-agent", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${system.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${team.clients[0]!.token}` } },
      }),
    );
    const attached = (await client.callTool({ name: "seat_attach", arguments: { cube_id: team.cubeId } })) as {
      structuredContent?: { session_token?: string };
    };
    seat = attached.structuredContent!.session_token!;
    const posted = await call<{ entry: { cursor: string } }>(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: team.cubeId, message: "the head", visibility: "VISIBILITY_BROADCAST" },
      team.clients[1]!.token,
    );
    last = posted.entry.cursor;
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await system?.stop();
  });

  const listenFrom = (after: string) =>
    client.listen({
      resourceSubscriptions: [`unimatrix://inbox?seat=${encodeURIComponent(seat)}&after=${encodeURIComponent(after)}`],
    });
  const refusal = (after: string) =>
    listenFrom(after).then(
      async (subscription) => {
        await subscription.close();
        return "acknowledged";
      },
      (error: unknown) =>
        error instanceof ProtocolError ? { code: error.code, message: error.message } : `not a ProtocolError: ${error}`,
    );

  it("refuses a cursor ahead of the cube's log with invalid params naming `after`", async () => {
    expect(await refusal(movedOn(last, 1000n))).toEqual({
      code: -32602,
      message: expect.stringContaining("after: is ahead of the cube's activity"),
    });
  });

  it("refuses a malformed cursor the same way", async () => {
    expect(await refusal("not-a-cursor")).toEqual({
      code: -32602,
      message: expect.stringContaining("after: is not a valid activity cursor"),
    });
  });

  it("still listens from a cursor at the head, and hears what comes after it", async () => {
    const heard: string[] = [];
    client.setNotificationHandler("notifications/resources/updated", (note) => {
      heard.push((note.params._meta as { line?: string }).line ?? "");
    });
    const subscription = await listenFrom(last);
    await call(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: team.cubeId, message: "after the head", visibility: "VISIBILITY_BROADCAST" },
      team.clients[1]!.token,
    );
    await eventually(() => heard.length > 0, "the entry after the head");
    await subscription.close();
    expect(heard.map((line) => line.replace(/^#\d+ \S+ → all: /, ""))).toEqual(["after the head"]);
  });
});
