import { readFileSync } from "node:fs";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { asBearer, expectStatus } from "@unimatrix/service-kit/testing";
import { type Harness, newClient, newCube, newTenant, post, seat, startHarness } from "./harness";

let h: Harness;
beforeAll(async () => {
  h = await startHarness("cube_schema");
});
afterAll(async () => {
  await h.close();
});

interface Field {
  readonly column: string;
  readonly type: string;
  readonly list: boolean;
  readonly optional: boolean;
  readonly dbType?: string;
}

/** Reads models from schema.prisma: table name and each scalar field's column, type and nullability. */
function prismaModels(): Map<string, Field[]> {
  const text = readFileSync(join(__dirname, "..", "prisma", "schema.prisma"), "utf8");
  const models = new Map<string, Field[]>();
  for (const match of text.matchAll(/model\s+(\w+)\s*\{([^}]*)\}/g)) {
    const body = match[2] as string;
    const table = /@@map\("([^"]+)"\)/.exec(body)?.[1] ?? (match[1] as string);
    const fields: Field[] = [];
    for (const line of body.split("\n").map((l) => l.trim())) {
      const f = /^(\w+)\s+(\w+)(\[\])?(\?)?(.*)$/.exec(line);
      if (!f || line.startsWith("@@") || line.startsWith("//")) continue;
      fields.push({
        column: /@map\("([^"]+)"\)/.exec(f[5] as string)?.[1] ?? (f[1] as string),
        type: f[2] as string,
        list: f[3] !== undefined,
        optional: f[4] !== undefined,
        dbType: /@db\.(\w+)/.exec(f[5] as string)?.[1],
      });
    }
    models.set(table, fields);
  }
  return models;
}

const COMPATIBLE: Record<string, string[]> = {
  String: ["text", "uuid", "character varying"],
  DateTime: ["timestamp with time zone", "timestamp without time zone"],
  Int: ["integer", "smallint"],
  BigInt: ["bigint"],
  Boolean: ["boolean"],
  Bytes: ["bytea"],
};

describe("migrations match the Prisma models", () => {
  it("every model has its table and every field its column with a compatible type and nullability", async () => {
    const columns = await h.sql<{
      table_name: string;
      column_name: string;
      data_type: string;
      udt_name: string;
      is_nullable: string;
    }>(
      "SELECT table_name, column_name, data_type, udt_name, is_nullable FROM information_schema.columns WHERE table_schema = $1",
      [h.schema],
    );
    const models = prismaModels();
    expect(models.size).toBe(18);
    const problems: string[] = [];
    for (const [table, fields] of models) {
      for (const field of fields) {
        const col = columns.find((c) => c.table_name === table && c.column_name === field.column);
        if (!col) {
          problems.push(`${table}.${field.column} missing`);
          continue;
        }
        if (field.list) {
          if (col.data_type !== "ARRAY") problems.push(`${table}.${field.column} is not an array`);
        } else if (!(COMPATIBLE[field.type] ?? []).includes(col.data_type)) {
          problems.push(`${table}.${field.column}: ${field.type} vs ${col.data_type}`);
        }
        if (field.dbType === "Uuid" && col.udt_name.replace(/^_/, "") !== "uuid")
          problems.push(`${table}.${field.column} should be uuid`);
        if (!field.list && field.optional !== (col.is_nullable === "YES"))
          problems.push(`${table}.${field.column} nullability differs`);
      }
      const modelColumns = new Set(fields.map((f) => f.column));
      for (const c of columns.filter((c) => c.table_name === table)) {
        if (!modelColumns.has(c.column_name)) problems.push(`${table}.${c.column_name} not in the model`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("hot queries have indexes", async () => {
    const indexes = await h.sql<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE schemaname = $1", [
      h.schema,
    ]);
    const defs = indexes.map((i) => i.indexdef);
    for (const expected of [
      /activity_items USING btree \(cube_id, "?position"?\)/,
      /activity_items USING gin \(recipient_drone_ids\)/,
      /activity_items USING btree \(cube_id, author_drone_id, created_at\)/,
      /drones USING btree \(last_seen_at\)/,
      /drone_sessions USING btree \(drone_id\)/,
      /decisions USING btree \(cube_id, created_at\)/,
      // Retention's age rule: a cube's newest position older than the cut-off.
      /activity_items USING btree \(cube_id, created_at\)/,
    ]) {
      expect(defs.some((d) => expected.test(d))).toBe(true);
    }
  });
});

describe("storage guard", () => {
  it("a write that would pass the budget is RESOURCE_EXHAUSTED and changes nothing", async () => {
    const t = await newTenant(h, "guard");
    const client = await newClient(h, t.userToken, "agent");
    const { cubeId } = await newCube(h, client.token);
    const drone = await seat(h, client.token, cubeId);
    const [size] = await h.sql<{ bytes: string }>(
      "SELECT sum(pg_total_relation_size(c.oid))::text AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
      [h.schema],
    );
    const guarded = await h.replica({ cube: { storageBudgetBytes: Number(size?.bytes) + 8_000 } });
    const small = await post(guarded, drone.token, cubeId, "fits");
    expect(small.message).toBe("fits");
    const count = async () =>
      Number((await h.sql<{ n: string }>("SELECT count(*)::text AS n FROM activity_items"))[0]?.n);
    const before = await count();
    await expectStatus(post(guarded, drone.token, cubeId, "x".repeat(30_000)), status.RESOURCE_EXHAUSTED);
    await expectStatus(
      guarded.cube.createCube(
        { requestKey: crypto.randomUUID(), name: "big", directive: "d".repeat(50_000) },
        asBearer(client.token),
      ),
      status.RESOURCE_EXHAUSTED,
    );
    expect(await count()).toBe(before);
    expect((await h.sql("SELECT id FROM cubes WHERE name = 'big'")).length).toBe(0);
    // Reads still work.
    const read = await guarded.activity.readActivity({ cubeId }, asBearer(drone.token));
    expect(read.items.length).toBe(1);
  });
});
