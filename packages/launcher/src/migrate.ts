#!/usr/bin/env node
import { join } from "node:path";
import { applyMigrations, commonEnv, openDatabase, readConfig, readMigrations } from "@unimatrix/service-kit";

/**
 * `migrate [service ...]`: applies the services' SQL migrations and exits; what the Helm
 * pre-install/pre-upgrade Job runs. Services also migrate at start, so this is optional locally.
 */
async function main(): Promise<void> {
  const config = readConfig(commonEnv);
  const asked = process.argv.slice(2);
  const services = asked.length > 0 ? asked : ["cube", "device", "presence"];
  for (const service of services) {
    const dir = join(__dirname, "..", "..", "..", "services", service, "prisma", "migrations");
    const database = await openDatabase({ service, url: config.databaseUrl, dataDir: config.dataDir });
    try {
      const session = await database.openSession();
      try {
        const result = await applyMigrations(session, database.schema, readMigrations(dir));
        process.stdout.write(
          `${service}: applied ${result.applied.length}, already applied ${result.alreadyApplied.length}\n`,
        );
      } finally {
        await session.close();
      }
    } finally {
      await database.close();
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`migration failed: ${(error as Error).message}\n`);
  process.exit(1);
});
