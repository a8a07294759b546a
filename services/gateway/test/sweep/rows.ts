import type { RunningService } from "@unimatrix/service-kit/service";

/** Row counts of every table of every service's schema. */
export async function rowCounts(services: readonly RunningService[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const service of services) {
    const sql = await service.database.openSession();
    try {
      const schema = service.database.schema;
      const tables = await sql.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
        [schema],
      );
      for (const { table_name } of tables) {
        const [row] = await sql.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}"."${table_name}"`);
        counts[`${service.name}.${table_name}`] = Number(row?.n ?? -1);
      }
    } finally {
      await sql.close();
    }
  }
  return counts;
}

/**
 * A row counter for many snapshots: one session per service kept open, one statement per service
 * counting every table (what a sweep that counts around every call needs to stay fast).
 */
export async function rowCounter(services: readonly RunningService[]) {
  const counters = await Promise.all(
    services.map(async (service) => {
      const sql = await service.database.openSession();
      const schema = service.database.schema;
      const tables = await sql.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name",
        [schema],
      );
      const columns = tables.map(
        ({ table_name }, i) => `(SELECT count(*) FROM "${schema}"."${table_name}")::text AS c${i}`,
      );
      const statement = `SELECT ${columns.join(", ")}`;
      return { service, sql, tables: tables.map((t) => t.table_name), statement };
    }),
  );
  return {
    async counts(): Promise<Record<string, number>> {
      const out: Record<string, number> = {};
      for (const { service, sql, tables, statement } of counters) {
        const [row] = await sql.query<Record<string, string>>(statement, []);
        tables.forEach((table, i) => {
          out[`${service.name}.${table}`] = Number(row?.[`c${i}`] ?? -1);
        });
      }
      return out;
    },
    async close() {
      await Promise.all(counters.map(({ sql }) => sql.close()));
    },
  };
}
