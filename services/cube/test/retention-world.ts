// What the retention suites share: settings with no service-wide limits, a cube with its own
// retention, reads as the user sees them, a bulk fill, and one cube's part of a round.

import type { ManualClock } from "@unimatrix/service-kit/clock";
import { asBearer } from "@unimatrix/service-kit/testing";
import type { CubeConfig } from "../src/config";
import type { RetentionRound } from "../src/ops/retention";
import type { Harness, Replica } from "./harness";
import { newClient, newCube, newTenant } from "./harness";

export const HOUR = 3_600_000;
/** No service-wide limits: only the cubes a test sets retention on are pruned. */
export const SETTINGS: Partial<CubeConfig> = {
  retentionMaxAgeSeconds: 0,
  retentionMaxItems: 0,
  retentionBatch: 3,
  claimLeaseSeconds: 86_400,
};

/** Where a scenario runs: a replica and its clock. */
export interface Place {
  readonly r: Replica;
  readonly clock: ManualClock;
}

/** A tenant, its owner client and a cube with its own retention settings. */
export async function retainedCube(p: Place, label: string, maxAgeSeconds: number, maxItems: number) {
  const t = await newTenant(p.r, label);
  const owner = await newClient(p.r, t.userToken, "owner");
  const { cubeId, roleId } = await newCube(p.r, owner.token);
  const { cube } = await p.r.cube.updateCube({ cubeId, retention: { maxAgeSeconds, maxItems } }, asBearer(t.userToken));
  expect(cube?.retention).toMatchObject({ maxAgeSeconds, maxItems });
  return { t, owner, cubeId, roleId };
}

/** Messages of what ReadActivity answers after `cursor`, as the user sees them. */
export async function messagesAfter(p: Place, token: string, cubeId: string, cursor: string): Promise<string[]> {
  const page = await p.r.activity.readActivity({ cubeId, cursor, pageSize: 100 }, asBearer(token));
  return page.items.flatMap((i) => (i.item.case === "entry" ? [i.item.value.message] : []));
}

/** What a round did to one cube (the suite's other cubes age on the same clock). */
export function mine(round: RetentionRound, cubeId: string) {
  return round.cubes.filter((c) => c.cubeId === cubeId);
}

/** `n` broadcast entries m1…mn straight into a cube's table (and its head), created `at`. */
export async function fillCube(h: Harness, cubeId: string, n: number, at: Date): Promise<void> {
  await h.sql(
    `INSERT INTO activity_items (id, cube_id, position, item_type, created_at, message, visibility)
     SELECT gen_random_uuid(), $1::uuid, g, 'entry', $3, 'm' || g, 'broadcast' FROM generate_series(1, $2::int) g`,
    [cubeId, n, at],
  );
  await h.sql("UPDATE cubes SET head = $2 WHERE id = $1::uuid", [cubeId, n]);
}
