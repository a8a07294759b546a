import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { PrincipalKind } from "@unimatrix/contracts/unimatrix/auth/v1/principal_pb";
import { asBearer, expectStatus, TEST_DATABASE_URL } from "@unimatrix/service-kit/testing";
import pg from "pg";
import { as, newTenant, World } from "./helpers";

const world = new World("presence_machines");
let client: ReturnType<World["machines"]>;

beforeAll(async () => {
  const replica = await world.start();
  client = world.machines(replica);
});
afterAll(() => world.close());

async function rowCount(table: string): Promise<number> {
  const db = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await db.connect();
  try {
    const result = await db.query(`SELECT count(*)::int AS n FROM "${world.schema.schema}"."${table}"`);
    return result.rows[0].n as number;
  } finally {
    await db.end();
  }
}

describe("machines", () => {
  test("register returns an unlinked machine and a machine token that authenticates", async () => {
    const { tenantId, user } = newTenant();
    const response = await client.registerMachine({ name: "build-01" }, as(user));
    expect(response.machine?.name).toBe("build-01");
    expect(response.machine?.tenantId).toBe(tenantId);
    expect(response.machine?.linked).toBe(false);
    expect(response.machine?.presenceChangedAt).toBeUndefined();
    expect(response.token).toMatch(/^umx_machine_[A-Za-z0-9-]+_[A-Za-z0-9-]+$/);

    const auth = await client.authenticate({ token: response.token });
    expect(auth.principal?.kind).toBe(PrincipalKind.MACHINE);
    expect(auth.principal?.subjectId).toBe(response.machine?.id);
    expect(auth.principal?.tenantId).toBe(tenantId);

    // The machine's own token works as a bearer credential for reads of its tenant.
    const got = await client.getMachine({ machineId: response.machine?.id ?? "" }, asBearer(response.token));
    expect(got.machine?.id).toBe(response.machine?.id);
  });

  test("names are unique among non-revoked machines of a tenant only", async () => {
    const a = newTenant();
    const b = newTenant();
    const first = await client.registerMachine({ name: "same" }, as(a.user));
    const dup = await expectStatus(client.registerMachine({ name: "same" }, as(a.user)), status.ALREADY_EXISTS);
    expect(dup.message).toMatch(/^name:/);
    await client.registerMachine({ name: "same" }, as(b.user));
    await client.revokeMachine({ machineId: first.machine?.id ?? "" }, as(a.user));
    const again = await client.registerMachine({ name: "same" }, as(a.user));
    expect(again.machine?.id).not.toBe(first.machine?.id);
  });

  test("list pages by name, hides revoked unless asked, and never shows another tenant", async () => {
    const { user } = newTenant();
    const other = newTenant();
    await client.registerMachine({ name: "zz-foreign" }, as(other.user));
    const names = ["m-05", "m-01", "m-04", "m-03", "m-02"];
    const ids = new Map<string, string>();
    for (const name of names) {
      const r = await client.registerMachine({ name }, as(user));
      ids.set(name, r.machine?.id ?? "");
    }
    await client.revokeMachine({ machineId: ids.get("m-03") ?? "" }, as(user));

    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await client.listMachines({ pageSize: 2, pageToken }, as(user));
      seen.push(...page.machines.map((m) => m.name));
      pageToken = page.nextPageToken;
      pages += 1;
    } while (pageToken !== "");
    expect(seen).toEqual(["m-01", "m-02", "m-04", "m-05"]);
    expect(pages).toBe(2);

    const all = await client.listMachines({ includeRevoked: true }, as(user));
    expect(all.machines.map((m) => m.name)).toEqual(["m-01", "m-02", "m-03", "m-04", "m-05"]);
    expect(all.machines.find((m) => m.name === "m-03")?.revokedAt).toBeDefined();
    expect(all.nextPageToken).toBe("");
  });

  test("revoke is idempotent, stops the token, and a revoked machine reads as unlinked", async () => {
    const { user } = newTenant();
    const r = await client.registerMachine({ name: "to-revoke" }, as(user));
    const id = r.machine?.id ?? "";
    const first = await client.revokeMachine({ machineId: id }, as(user));
    expect(first.machine?.revokedAt).toBeDefined();
    expect(first.machine?.linked).toBe(false);
    const second = await client.revokeMachine({ machineId: id }, as(user));
    expect(second.machine?.revokedAt).toEqual(first.machine?.revokedAt);
    await expectStatus(client.authenticate({ token: r.token }), status.UNAUTHENTICATED);
    await expectStatus(client.getMachine({ machineId: id }, asBearer(r.token)), status.UNAUTHENTICATED);
  });

  test("bad input is INVALID_ARGUMENT naming the field and changes nothing", async () => {
    const { user } = newTenant();
    const before = await rowCount("machines");
    const cases: [Promise<unknown>, string][] = [
      [client.registerMachine({ name: "" }, as(user)), "name"],
      [client.registerMachine({ name: "   " }, as(user)), "name"],
      [client.registerMachine({ name: "x".repeat(201) }, as(user)), "name"],
      [client.registerMachine({ name: "bad\u0007bell" }, as(user)), "name"],
      [client.getMachine({ machineId: "not-a-uuid" }, as(user)), "machine_id"],
      [client.getMachine({ machineId: "" }, as(user)), "machine_id"],
      [client.revokeMachine({ machineId: "123" }, as(user)), "machine_id"],
      [client.listMachines({ pageSize: -1 }, as(user)), "page_size"],
      [client.listMachines({ pageToken: "garbage!" }, as(user)), "page_token"],
      [client.authenticate({ token: "" }), "token"],
    ];
    for (const [call, field] of cases) {
      const { message } = await expectStatus(call, status.INVALID_ARGUMENT);
      expect(message.startsWith(`${field}:`)).toBe(true);
    }
    expect(await rowCount("machines")).toBe(before);
  });

  test("unknown and foreign ids are NOT_FOUND and change nothing", async () => {
    const a = newTenant();
    const b = newTenant();
    const r = await client.registerMachine({ name: "mine" }, as(a.user));
    const id = r.machine?.id ?? "";
    await expectStatus(client.getMachine({ machineId: randomUUID() }, as(a.user)), status.NOT_FOUND);
    await expectStatus(client.getMachine({ machineId: id }, as(b.user)), status.NOT_FOUND);
    await expectStatus(client.revokeMachine({ machineId: id }, as(b.user)), status.NOT_FOUND);
    const still = await client.getMachine({ machineId: id }, as(a.user));
    expect(still.machine?.revokedAt).toBeUndefined();
  });

  test("who may call: machines cannot register or revoke, operators have no tenant, strangers are refused", async () => {
    const { user } = newTenant();
    const r = await client.registerMachine({ name: "caller" }, as(user));
    const machine = asBearer(r.token);
    await expectStatus(client.registerMachine({ name: "x" }, machine), status.PERMISSION_DENIED);
    await expectStatus(client.revokeMachine({ machineId: r.machine?.id ?? "" }, machine), status.PERMISSION_DENIED);
    const listed = await client.listMachines({}, machine);
    expect(listed.machines.map((m) => m.name)).toEqual(["caller"]);
    const operator = as({ kind: "operator", subjectId: "operator", tenantId: null });
    await expectStatus(client.listMachines({}, operator), status.PERMISSION_DENIED);
    await expectStatus(client.listMachines({}), status.UNAUTHENTICATED);
    await expectStatus(client.listMachines({}, asBearer("umx_machine_abc_def")), status.UNAUTHENTICATED);
    await expectStatus(client.authenticate({ token: "umx_client_abc_def" }), status.UNAUTHENTICATED);
  });
});

describe("schema", () => {
  test("the migrated database has every Prisma model's table and column with a compatible type", async () => {
    const db = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await db.connect();
    try {
      const result = await db.query(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = $1",
        [world.schema.schema],
      );
      const columns = new Map(result.rows.map((r) => [`${r.table_name}.${r.column_name}`, r]));
      const compatible: Record<string, string[]> = {
        String: ["text", "uuid", "character varying"],
        Boolean: ["boolean"],
        BigInt: ["bigint"],
        Bytes: ["bytea"],
        DateTime: ["timestamp with time zone"],
        Int: ["integer"],
      };
      let checked = 0;
      for (const model of prismaModels()) {
        for (const field of model.fields) {
          const column = columns.get(`${model.table}.${field.column}`);
          expect(`${model.table}.${field.column}: ${column?.data_type ?? "missing"}`).toBe(
            `${model.table}.${field.column}: ${compatible[field.type]?.find((t) => t === column?.data_type) ?? "incompatible"}`,
          );
          expect(column?.is_nullable === "YES").toBe(field.optional);
          checked += 1;
        }
      }
      expect(checked).toBeGreaterThan(20);
    } finally {
      await db.end();
    }
  });
});

/** The scalar fields of every model in schema.prisma, with their mapped table and column names. */
function prismaModels() {
  const text = readFileSync(join(__dirname, "..", "prisma", "schema.prisma"), "utf8");
  const models: { table: string; fields: { column: string; type: string; optional: boolean }[] }[] = [];
  const scalar = new Set(["String", "Boolean", "BigInt", "Bytes", "DateTime", "Int"]);
  for (const match of text.matchAll(/model\s+(\w+)\s*\{([^}]*)\}/g)) {
    const body = match[2] ?? "";
    const table = /@@map\("([^"]+)"\)/.exec(body)?.[1] ?? match[1] ?? "";
    const fields = [];
    for (const line of body.split("\n")) {
      const field = /^\s*(\w+)\s+(\w+)(\??)(.*)$/.exec(line);
      if (!field || line.trim().startsWith("@@") || line.trim().startsWith("//")) continue;
      const [, name = "", type = "", optional, rest = ""] = field;
      if (!scalar.has(type)) continue;
      fields.push({ column: /@map\("([^"]+)"\)/.exec(rest)?.[1] ?? name, type, optional: optional === "?" });
    }
    models.push({ table, fields });
  }
  expect(models.length).toBe(5);
  return models;
}
