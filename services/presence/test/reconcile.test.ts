import { randomUUID } from "node:crypto";
import type { WatchMachinesResponse } from "@unimatrix/contracts/unimatrix/presence/v1/machine_service_pb";
import { TEST_DATABASE_URL } from "@unimatrix/service-kit/testing";
import pg from "pg";
import type { PresenceService } from "../src";
import { as, Collector, eventually, newTenant, openLink, describe as show, World } from "./helpers";

const world = new World("presence_reconcile");
let replica: PresenceService;
let db: pg.Client;

beforeAll(async () => {
  replica = await world.start();
  db = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${world.schema.schema}` });
  await db.connect();
});
afterAll(async () => {
  await db.end();
  await world.close();
});

async function setup(names: string[]) {
  const { user } = newTenant();
  const machines = world.machines(replica);
  const ids = new Map<string, { id: string; token: string }>();
  for (const name of names) {
    const r = await machines.registerMachine({ name }, as(user));
    ids.set(name, { id: r.machine?.id ?? "", token: r.token });
  }
  const watch = new Collector<WatchMachinesResponse>(machines.watchMachines({}, as(user)));
  await watch.count(2, "snapshot and ready");
  const transitions = () =>
    watch.items
      .map(show)
      .filter((e) => e.startsWith("+") || e.startsWith("-"))
      .map((e) => e.replace(/@\d+$/, ""));
  return { ids, transitions };
}

describe("reconcile", () => {
  test("a held link whose ownership row vanished is claimed again and linked", async () => {
    const { ids, transitions } = await setup(["held"]);
    const link = await openLink(world.links(replica), ids.get("held")?.token ?? "");
    await eventually(() => transitions().length === 1, "linked");
    const id = ids.get("held")?.id;
    await db.query("DELETE FROM link_owners WHERE machine_id = $1", [id]);
    await db.query("UPDATE presence SET linked = false WHERE machine_id = $1", [id]);
    await replica.reconcile();
    const owner = await db.query("SELECT link_id::text AS link_id FROM link_owners WHERE machine_id = $1", [id]);
    expect(owner.rows[0]?.link_id).toBe(link.linkId);
    await eventually(() => transitions().length === 2, "linked again");
    expect(transitions()).toEqual(["+held", "+held"]);
    expect(link.responses.done).toBe(false);
    link.call.end();
    await link.responses.finished;
  });

  test("presence linked without an owner is unlinked; an owner row of this replica without a held link is dropped", async () => {
    const { ids, transitions } = await setup(["ghost", "orphan"]);
    const ghost = ids.get("ghost")?.id;
    const orphan = ids.get("orphan")?.id;
    await db.query("UPDATE presence SET linked = true, changed_at = now() WHERE machine_id = $1", [ghost]);
    await db.query(
      "INSERT INTO link_owners (machine_id, tenant_id, replica_id, link_id, lease_expires_at) SELECT machine_id, tenant_id, $2, $3, now() + interval '1 hour' FROM presence WHERE machine_id = $1",
      [orphan, replica.replicaId, randomUUID()],
    );
    await db.query("UPDATE presence SET linked = true, changed_at = now() WHERE machine_id = $1", [orphan]);
    const report = await replica.reconcile();
    expect(report.repaired).toBe(1);
    await eventually(() => transitions().length === 2, "two unlinks");
    expect(transitions().sort()).toEqual(["-ghost", "-orphan"]);
    const owners = await db.query("SELECT count(*)::int AS n FROM link_owners WHERE machine_id = ANY($1::uuid[])", [
      [ghost, orphan],
    ]);
    expect(owners.rows[0]?.n).toBe(0);
    // A second pass finds nothing to do.
    expect(await replica.reconcile()).toEqual({ expired: 0, repaired: 0, prunedTenants: 0 });
  });
});
