import { ActivityService } from "@unimatrix/contracts/unimatrix/cube/v1/activity_service_pb";
import { CubeService } from "@unimatrix/contracts/unimatrix/cube/v1/cube_service_pb";
import { IdentityService } from "@unimatrix/contracts/unimatrix/cube/v1/identity_service_pb";
import { CubeAccess, DeliveryChannel, Visibility } from "@unimatrix/contracts/unimatrix/cube/v1/types_pb";
import {
  type LinkNotice,
  type LinkResponse,
  LinkService,
} from "@unimatrix/contracts/unimatrix/presence/v1/link_service_pb";
import { MachineService } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { type RunningCube, startCube } from "@unimatrix/cube";
import { ManualClock } from "@unimatrix/service-kit/clock";
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
import { type PresenceService, startPresence } from "../src";
import { FAST } from "./helpers";

const OPERATOR = "umx_operator_presencenotices_0123456789";

/**
 * A machine daemon as a stock grpc-js client: links with `accepts_notices`, hands each notice id to
 * its session ONCE (dedupes by id), confirms every copy it receives (unless told to hold them), and
 * relinks to the next replica in `targets` when its link breaks or the replica goes away.
 */
class Daemon {
  /** Notices handed on to the session, first copy of each id only. */
  readonly handedOn: LinkNotice[] = [];
  /** Every notice received, copies included (ids). */
  readonly received: string[] = [];
  /** Confirmations sent (ids, copies included). */
  readonly confirmed: string[] = [];
  holdConfirms = false;
  links = 0;
  /** Server heartbeats received on every link so far. */
  heartbeats = 0;
  #call: ReturnType<TypedClient<typeof LinkService>["link"]> | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #clients = new Map<string, TypedClient<typeof LinkService>>();

  constructor(
    private readonly token: string,
    private readonly acceptsNotices: boolean,
    /** The replica to (re)link to next. */
    public target: () => string,
  ) {}

  /** Links now; resolves once `linked` arrived. Relinks by itself after a broken link. */
  async link(): Promise<void> {
    const address = this.target();
    let client = this.#clients.get(address);
    if (!client) {
      client = createClient(LinkService, address);
      this.#clients.set(address, client);
    }
    const call = client.link(asBearer(this.token));
    this.#call = call;
    call.send({
      event: { case: "hello", value: { agentVersion: "test/1", hostname: "h", acceptsNotices: this.acceptsNotices } },
    });
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => {
      if (!call.call.writableEnded) call.send({ event: { case: "heartbeat", value: {} } });
    }, 100);
    let linked!: () => void;
    const isLinked = new Promise<void>((resolve) => (linked = resolve));
    void (async () => {
      try {
        for await (const response of call as AsyncIterable<LinkResponse>) {
          const event = response.event;
          if (event.case === "linked") {
            this.links += 1;
            linked();
          } else if (event.case === "notice") this.#onNotice(event.value);
          else if (event.case === "heartbeat") this.heartbeats += 1;
          else if (event.case === "goingAway" || event.case === "closed") break;
        }
      } catch {
        // A killed replica: the stream breaks; relink below.
      }
      if (this.#call === call && !this.#stopped) void this.link().catch(() => {});
    })();
    await isLinked;
  }

  #onNotice(notice: LinkNotice): void {
    this.received.push(notice.id);
    if (!this.handedOn.some((n) => n.id === notice.id)) this.handedOn.push(notice);
    if (!this.holdConfirms) this.confirm(notice.id);
  }

  /** Confirms a notice on the current link. */
  confirm(id: string): void {
    this.confirmed.push(id);
    this.#call?.send({ event: { case: "confirm", value: { noticeId: id } } });
  }

  /** Ends the current link (the daemon stops or restarts). */
  async unlink(): Promise<void> {
    const call = this.#call;
    this.#call = undefined;
    clearInterval(this.#heartbeat);
    call?.end();
    call?.cancel();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.unlink();
    for (const client of this.#clients.values()) client.close();
  }
}

describe("notices over the machine Link: cube → presence → a stock grpc-js daemon, confirmed", () => {
  const cubeSchema: TestSchema = testSchema("pnotice_cube");
  const presenceSchema: TestSchema = testSchema("pnotice_presence");
  const busPrefix = testBusPrefix("pnotice");
  const clock = new ManualClock(Date.now());
  const daemons: Daemon[] = [];
  let cube: RunningCube;
  const replicas: PresenceService[] = [];
  let cubeSql: pg.Pool;
  let identity: TypedClient<typeof IdentityService>;
  let cubes: TypedClient<typeof CubeService>;
  let activity: TypedClient<typeof ActivityService>;

  async function startReplica(): Promise<PresenceService> {
    const replica = await startPresence({
      config: testConfig({ busPrefix }),
      port: 0,
      schema: presenceSchema.schema,
      clock,
      logger: silentLogger(),
      presence: { ...FAST, cubeAddress: `127.0.0.1:${cube.port}` },
    });
    replicas.push(replica);
    return replica;
  }

  /** A tenant with a machine, a cube, an author drone and a recipient drone whose session runs on the machine. */
  async function team(name: string) {
    const tenant = await identity.createTenant({ name, adminDisplayName: "admin" }, asBearer(OPERATOR));
    const user = asBearer(tenant.adminUserToken);
    const tenantId = tenant.tenant?.id as string;
    const machines = createClient(MachineService, `127.0.0.1:${replicas.at(-1)!.port}`);
    const registered = await machines.registerMachine(
      { name: `${name}-box` },
      asPrincipal({ kind: "user", tenantId, subjectId: tenant.adminUser?.id as string }, TEST_INTERNAL_KEY),
    );
    machines.close();
    const machineId = registered.machine?.id as string;
    const client = await identity.issueClient({ name: "agents" }, user);
    const { cube: made } = await cubes.createCube({ requestKey: crypto.randomUUID(), name, directive: "go" }, user);
    const cubeId = made?.id as string;
    const { role } = await cubes.createRole({ cubeId, name: "worker", isDefault: true, canBroadcast: true }, user);
    await identity.setCubeGrant({ clientId: client.client?.id as string, cubeId, access: CubeAccess.WRITE }, user);
    const agent = asBearer(client.token);
    const author = await cubes.attachSeat({ cubeId, roleId: role?.id as string, hostname: "a" }, agent);
    const recipient = await cubes.attachSeat({ cubeId, roleId: role?.id as string, hostname: "b", machineId }, agent);
    return {
      machineId,
      machineToken: registered.token,
      cubeId,
      recipient: recipient.drone?.id as string,
      recipientLabel: recipient.drone?.label as string,
      authorToken: author.sessionToken,
      /** Posts a DIRECT entry from the author to the recipient. */
      async direct(message: string) {
        const { entry } = await activity.appendEntry(
          { cubeId, message, visibility: Visibility.DIRECT, recipientDroneIds: [recipient.drone?.id as string] },
          asBearer(author.sessionToken),
        );
        return entry?.id as string;
      },
    };
  }

  type Team = Awaited<ReturnType<typeof team>>;

  async function noticeRows(machineId: string) {
    return (
      await cubeSql.query<{ id: string; entry_id: string; confirmed_at: Date | null }>(
        "SELECT id::text, entry_id::text, confirmed_at FROM notices WHERE machine_id = $1 ORDER BY seq",
        [machineId],
      )
    ).rows;
  }

  /** The recipient's receipt of an entry, as its author lists it (ListReceipts). */
  async function receipt(t: Team, entryId: string) {
    const { receipts } = await activity.listReceipts({ cubeId: t.cubeId, entryId }, asBearer(t.authorToken));
    return receipts.find((r) => r.droneId === t.recipient);
  }

  /** Confirmations cube answered `newly_confirmed`, summed over every replica that ever ran. */
  const newlyConfirmed = () => replicas.reduce((sum, r) => sum + (r.notices?.stats.newlyConfirmed ?? 0), 0);

  function daemon(token: string, acceptsNotices: boolean, target: () => string): Daemon {
    const d = new Daemon(token, acceptsNotices, target);
    daemons.push(d);
    return d;
  }

  beforeAll(async () => {
    const config = testConfig({ busPrefix, operatorToken: OPERATOR });
    cube = await startCube({ config, port: 0, schema: cubeSchema.schema, logger: silentLogger() });
    await startReplica();
    await startReplica();
    const address = `127.0.0.1:${cube.port}`;
    identity = createClient(IdentityService, address);
    cubes = createClient(CubeService, address);
    activity = createClient(ActivityService, address);
    cubeSql = new pg.Pool({ connectionString: cubeSchema.url, max: 2, options: `-c search_path=${cubeSchema.schema}` });
  }, 60_000);
  afterAll(async () => {
    for (const d of daemons) await d.stop();
    for (const r of replicas) await r.stop().catch(() => {});
    identity?.close();
    cubes?.close();
    activity?.close();
    await cube?.stop();
    await cubeSql?.end();
    await cubeSchema.drop();
    await presenceSchema.drop();
  });

  it("a DIRECT entry to a drone on a linked machine reaches its daemon as a LinkNotice; the confirmation is the delivered receipt (MACHINE_LINK)", async () => {
    const t = await team("acme");
    const [a] = replicas as [PresenceService];
    const d = daemon(t.machineToken, true, () => `127.0.0.1:${a.port}`);
    await d.link();
    const entryId = await t.direct("please rebase onto main");
    await eventually(() => d.handedOn.length === 1, "the notice on the link", 15_000);
    expect(d.handedOn[0]).toMatchObject({
      entryId,
      droneId: t.recipient,
      droneLabel: t.recipientLabel,
      cubeId: t.cubeId,
      text: expect.stringMatching(/^\[DIRECT\] worker-\d+: please rebase onto main$/),
    });
    await eventually(async () => (await receipt(t, entryId))?.deliveredAt !== undefined, "the receipt", 15_000);
    expect((await receipt(t, entryId))?.deliveredVia).toBe(DeliveryChannel.MACHINE_LINK);
    expect((await noticeRows(t.machineId)).map((n) => n.confirmed_at !== null)).toEqual([true]);
    await d.stop();
  });

  it("a notice for an offline machine waits, is delivered exactly once after it links, and once only across a replica kill before the confirm", async () => {
    const t = await team("globex");
    const base = newlyConfirmed();
    // Offline: nothing links the machine; the notice is pending in cube.
    const entryId = await t.direct("the build is red");
    const [pending] = await noticeRows(t.machineId);
    expect(pending).toMatchObject({ entry_id: entryId, confirmed_at: null });

    // The daemon links to replica A and gets it, but A is killed before the daemon confirms.
    let doomed = replicas[0] as PresenceService;
    const survivor = replicas[1] as PresenceService;
    let next = `127.0.0.1:${doomed.port}`;
    const d = daemon(t.machineToken, true, () => next);
    d.holdConfirms = true;
    await d.link();
    await eventually(() => d.received.length === 1, "the pending notice on A", 15_000);
    expect(d.received).toEqual([pending?.id]);
    // Received but not confirmed: not delivered yet.
    expect((await receipt(t, entryId))?.deliveredAt).toBeUndefined();
    next = `127.0.0.1:${survivor.port}`;
    await doomed.kill();

    // The daemon reconnects to B: the unconfirmed notice comes again with the same id.
    await eventually(() => d.links === 2 && d.received.length === 2, "the resend on B", 15_000);
    expect(d.received).toEqual([pending?.id, pending?.id]);
    d.holdConfirms = false;
    for (const id of d.received) d.confirm(id);
    await eventually(async () => (await noticeRows(t.machineId))[0]?.confirmed_at != null, "confirmed", 15_000);
    await eventually(() => survivor.notices!.stats.repeatConfirmed >= 1, "the second confirm answered", 15_000);
    expect(d.handedOn.map((n) => n.id)).toEqual([pending?.id]);
    expect(newlyConfirmed() - base).toBe(1);
    expect((await receipt(t, entryId))?.deliveredVia).toBe(DeliveryChannel.MACHINE_LINK);

    // A restarted replica and a relink: the confirmed notice is never sent again; the next one is.
    doomed = await startReplica();
    next = `127.0.0.1:${doomed.port}`;
    await d.unlink();
    await d.link();
    const marker = await t.direct("marker");
    await eventually(() => d.handedOn.length === 2, "the marker", 15_000);
    expect(d.handedOn.map((n) => n.entryId)).toEqual([entryId, marker]);
    expect(d.received.filter((id) => id === pending?.id)).toHaveLength(2);
    await eventually(() => newlyConfirmed() - base === 2, "the marker's confirmation", 15_000);
    expect(newlyConfirmed() - base).toBe(2);
    await d.stop();
  });

  it("a link whose hello does not accept notices gets none; they stay pending for one that does", async () => {
    const t = await team("initech");
    const live = replicas.at(-1) as PresenceService;
    const before = live.notices!.stats.watchesOpened;
    const plain = daemon(t.machineToken, false, () => `127.0.0.1:${live.port}`);
    await plain.link();
    const entryId = await t.direct("are you there?");
    // The machine stays linked (three server heartbeats after the post), yet no relay was opened for it.
    expect(await noticeRows(t.machineId)).toHaveLength(1);
    const beats = plain.heartbeats;
    await eventually(() => plain.heartbeats >= beats + 3, "three link heartbeats", 15_000);
    expect(live.notices!.stats.watchesOpened).toBe(before);
    expect(plain.received).toEqual([]);
    expect((await noticeRows(t.machineId))[0]?.confirmed_at).toBeNull();
    await plain.stop();

    const accepting = daemon(t.machineToken, true, () => `127.0.0.1:${live.port}`);
    await accepting.link();
    await eventually(() => accepting.handedOn.length === 1, "the pending notice", 15_000);
    expect(accepting.handedOn[0]?.entryId).toBe(entryId);
    expect(plain.received).toEqual([]);
    await accepting.stop();
  });
});
