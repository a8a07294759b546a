import { performance } from "node:perf_hooks";
import { ConfigError } from "@unimatrix/service-kit/config";
import { createLogger } from "@unimatrix/service-kit/logger";
import { startTracing, stopTracing } from "@unimatrix/service-kit/observe";
import { stopOnSignals } from "@unimatrix/service-kit/service";
import { EMBEDDED_STORE_DIR, formerEmbeddedStores } from "@unimatrix/service-kit/store";
import { launch } from "./launch";
import { SERVICE_NAMES } from "./services";

/** `unimatrix [service ...]`: runs the named services (all four by default) until Ctrl-C / SIGTERM (loaded by main.ts, which runs it). */
async function main(): Promise<void> {
  const logger = createLogger("unimatrix");
  const asked = process.argv.slice(2);
  const unknown = asked.filter((name) => !SERVICE_NAMES.includes(name));
  if (unknown.length > 0) {
    process.stderr.write(`unknown service ${unknown.join(", ")}; choose from ${SERVICE_NAMES.join(", ")}\n`);
    process.exit(2);
  }
  const names = asked.length > 0 ? asked : [...SERVICE_NAMES];
  // Before anything opens a store or a port; exports only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  startTracing(names.length === 1 ? `unimatrix-${names[0]}` : "unimatrix");
  const launched = await launch(names);
  const store = launched.embedded
    ? `embedded PGlite in ${launched.dataDir}/${EMBEDDED_STORE_DIR}`
    : "Postgres at DATABASE_URL";
  const lines = launched.endpoints.map(
    (e) =>
      `  ${e.name.padEnd(9)} ${e.protocol}://127.0.0.1:${e.port}` +
      (e.metricsPort === undefined ? "" : `   metrics http://127.0.0.1:${e.metricsPort}/metrics`),
  );
  // Since the process started: module loading, the store, migrations, listening.
  const seconds = (performance.now() / 1000).toFixed(1);
  process.stdout.write(`unimatrix is up in ${seconds} s (${store}); Ctrl-C stops it\n${lines.join("\n")}\n`);
  const former = launched.embedded ? formerEmbeddedStores(launched.dataDir) : [];
  if (former.length > 0)
    process.stdout.write(
      `note: ${former.join(", ")} hold data of an older version (one store per service), which is no longer ` +
        `read; this version keeps every service in ${launched.dataDir}/${EMBEDDED_STORE_DIR}. See README ` +
        `"Embedded data from an older version" to start afresh.\n`,
    );
  stopOnSignals(async () => {
    await launched.stop();
    await stopTracing();
  }, logger);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(78);
  }
  process.stderr.write(`unimatrix failed to start: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
