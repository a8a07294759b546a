import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PrismaClient } from "../generated/prisma/client";
import { type Harness, startHarness } from "./harness";

/** Models, their tables and fields as schema.prisma declares them. */
function prismaModels() {
  const text = readFileSync(join(__dirname, "..", "prisma", "schema.prisma"), "utf8");
  const models: {
    name: string;
    table: string;
    fields: { column: string; type: string; optional: boolean; db?: string }[];
  }[] = [];
  for (const match of text.matchAll(/model (\w+) \{([\s\S]*?)\n\}/g)) {
    const [, name, body] = match as unknown as [string, string, string];
    const table = /@@map\("(\w+)"\)/.exec(body)?.[1] ?? name;
    const fields = [];
    for (const line of body.split("\n")) {
      const field = /^\s+(\w+)\s+(\w+)(\?)?(.*)$/.exec(line);
      if (!field || line.trim().startsWith("@@") || line.trim().startsWith("//")) continue;
      const [, fieldName, type, optional, rest] = field as unknown as [
        string,
        string,
        string,
        string | undefined,
        string,
      ];
      fields.push({
        column: /@map\("(\w+)"\)/.exec(rest)?.[1] ?? fieldName,
        type,
        optional: optional === "?",
        db: /@db\.(\w+)/.exec(rest)?.[1],
      });
    }
    models.push({ name, table, fields });
  }
  return models;
}

const COMPATIBLE: Record<string, string> = {
  String: "text",
  Uuid: "uuid",
  Bytes: "bytea",
  DateTime: "timestamp with time zone",
  BigInt: "bigint",
  Boolean: "boolean",
  Json: "jsonb",
};

describe("migrations match the Prisma models", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("device_schema");
  });
  afterAll(async () => h.close());

  it("has every model's table and every field's column with a compatible type and nullability", async () => {
    const models = prismaModels();
    expect(models.map((m) => m.name).sort()).toEqual(["AuditEvent", "Device", "EnrollToken", "Placement", "RunClaim"]);
    const columns = await h.sql.query<{
      table_name: string;
      column_name: string;
      data_type: string;
      is_nullable: string;
    }>(
      "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = current_schema()",
    );
    for (const model of models) {
      for (const field of model.fields) {
        const column = columns.find((c) => c.table_name === model.table && c.column_name === field.column);
        expect({ model: model.name, column: field.column, found: column !== undefined }).toEqual({
          model: model.name,
          column: field.column,
          found: true,
        });
        const want = COMPATIBLE[field.db === "Uuid" ? "Uuid" : field.type];
        expect(`${model.table}.${field.column}:${column?.data_type}`).toBe(`${model.table}.${field.column}:${want}`);
        expect(`${model.table}.${field.column}:${column?.is_nullable}`).toBe(
          `${model.table}.${field.column}:${field.optional ? "YES" : "NO"}`,
        );
      }
      const modelColumns = columns.filter((c) => c.table_name === model.table).map((c) => c.column_name);
      expect(modelColumns.sort()).toEqual(model.fields.map((f) => f.column).sort());
    }
  });

  it("answers typed Prisma queries on every model", async () => {
    const prisma = new PrismaClient({ adapter: h.service.database.adapter });
    try {
      expect(await prisma.enrollToken.count()).toBe(0);
      expect(await prisma.device.count()).toBe(0);
      expect(await prisma.placement.count()).toBe(0);
      expect(await prisma.runClaim.count()).toBe(0);
      expect(await prisma.auditEvent.count()).toBe(0);
    } finally {
      await prisma.$disconnect();
    }
  });

  it("has an index for every @@index of the Prisma models", async () => {
    const text = readFileSync(join(__dirname, "..", "prisma", "schema.prisma"), "utf8");
    const declared = [...text.matchAll(/@@index\(\[([^\]]+)\]\)/g)].length;
    const indexes = await h.sql.query<{ indexname: string }>(
      "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE '%\\_idx'",
    );
    expect(indexes.map((i) => i.indexname)).toContain("audit_events_tenant_id_at_idx");
    expect(indexes.length).toBeGreaterThanOrEqual(declared);
  });

  it("keeps audit_events append-only", async () => {
    await expect(h.sql.query("UPDATE audit_events SET actor_id = 'x'")).resolves.toEqual([]);
    await h.sql.query(
      "INSERT INTO audit_events (id, tenant_id, owner_subject_id, event_type, at) VALUES (gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'device_enrolled', now())",
    );
    await expect(h.sql.query("UPDATE audit_events SET actor_id = 'x'")).rejects.toThrow(/append-only/);
    await expect(h.sql.query("DELETE FROM audit_events")).rejects.toThrow(/append-only/);
    await expect(
      h.sql.query(
        "INSERT INTO audit_events (id, tenant_id, owner_subject_id, event_type, at) VALUES (gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'something_else', now())",
      ),
    ).rejects.toThrow(/check constraint/);
  });
});
