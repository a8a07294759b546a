#!/usr/bin/env node
import * as cube from "@unimatrix/cube";
import * as device from "@unimatrix/device";
import * as presence from "@unimatrix/presence";
import { commonEnv, migrateDatabase, openDatabase, readConfig } from "@unimatrix/service-kit";

const SERVICES: Record<string, string> = {
  cube: cube.migrationsDir,
  device: device.migrationsDir,
  presence: presence.migrationsDir,
};

/**
 * `migrate [service ...]`: applies the services' SQL migrations and exits; what the Helm
 * pre-install/pre-upgrade Job runs. Services also migrate at start, so this is optional locally.
 */
async function main(): Promise<void> {
  const config = readConfig(commonEnv);
  const asked = process.argv.slice(2);
  const unknown = asked.filter((name) => !(name in SERVICES));
  if (unknown.length > 0)
    throw new Error(`unknown service ${unknown.join(", ")}; choose from ${Object.keys(SERVICES).join(", ")}`);
  for (const service of asked.length > 0 ? asked : Object.keys(SERVICES)) {
    const database = await openDatabase({ service, url: config.databaseUrl, dataDir: config.dataDir });
    try {
      const result = await migrateDatabase(database, SERVICES[service]!);
      process.stdout.write(
        `${service}: applied ${result.applied.length}, already applied ${result.alreadyApplied.length}\n`,
      );
    } finally {
      await database.close();
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`migration failed: ${(error as Error).message}\n`);
  process.exit(1);
});
