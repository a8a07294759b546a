#!/usr/bin/env node
import { commonEnv, readConfig } from "@unimatrix/service-kit/config";
import { migrateDatabase, openDatabase } from "@unimatrix/service-kit/store";
import { SERVICES } from "./services";

/** Each service's migrations: its exported migrationsDir, for the services that own a store. */
const MIGRATIONS = new Map(
  SERVICES.flatMap((s) => (s.store && s.migrationsDir ? [[s.name, s.migrationsDir] as const] : [])),
);

/**
 * `migrate [service ...]`: applies the services' SQL migrations and exits; what the Helm
 * pre-install/pre-upgrade Job runs. Services also migrate at start, so this is optional locally.
 */
async function main(): Promise<void> {
  const config = readConfig(commonEnv);
  const asked = process.argv.slice(2);
  const unknown = asked.filter((name) => !MIGRATIONS.has(name));
  if (unknown.length > 0)
    throw new Error(`unknown service ${unknown.join(", ")}; choose from ${[...MIGRATIONS.keys()].join(", ")}`);
  const services = asked.length > 0 ? asked : [...MIGRATIONS.keys()];
  // All open at once: on the embedded default they share one PGlite, opened once.
  const databases = await Promise.all(
    services.map((service) => openDatabase({ service, url: config.databaseUrl, dataDir: config.dataDir })),
  );
  try {
    for (const [i, service] of services.entries()) {
      const result = await migrateDatabase(databases[i]!, MIGRATIONS.get(service) as string);
      process.stdout.write(
        `${service}: applied ${result.applied.length}, already applied ${result.alreadyApplied.length}\n`,
      );
    }
  } finally {
    for (const database of databases) await database.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`migration failed: ${(error as Error).message}\n`);
  process.exit(1);
});
