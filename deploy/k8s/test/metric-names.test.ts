// Every metric the chart's dashboard and alerts read is one the services really export: the whole
// system is started as `npm start` starts it (four services, each with its own metrics port) on
// Postgres and Redis, each /metrics is scraped, and every series selector of every panel and alert
// must name a metric found there, with label names that metric has (or Prometheus adds).
import { once } from "node:events";
import { join } from "node:path";
import {
  type SpawnedSystem,
  spawnSystem,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  testBusPrefix,
  uniqueName,
} from "@unimatrix/service-kit/testing";
import pg from "pg";
import { root } from "./chart";
import { alertRules, dashboard, dashboardQueries, readPromql, withoutGrafanaVariables } from "./promql";

const SERVICES = ["cube", "device", "presence", "gateway"];
const main = join(root, "apps", "unimatrix", "dist", "main.js");

/** Labels Prometheus puts on every scraped series (the target's), beside the metric's own. */
const TARGET_LABELS = ["namespace", "job", "pod", "instance", "container", "endpoint", "service"];

/**
 * Metrics that come from elsewhere, each with its source: Prometheus's own `up`, and
 * kube-state-metrics' view of the migration Job.
 */
const EXTERNAL: Record<string, readonly string[]> = {
  up: TARGET_LABELS,
  kube_job_status_failed: ["namespace", "job_name", "job"],
};

/** What one /metrics text exports: metric names (histograms with their series) and label names seen. */
function exported(text: string, into: Map<string, Set<string>>): void {
  const add = (name: string, labels: readonly string[] = []) => {
    const set = into.get(name) ?? new Set<string>();
    for (const label of labels) set.add(label);
    into.set(name, set);
  };
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\w+)$/.exec(line);
    if (type) {
      const [, name, kind] = type as unknown as [string, string, string];
      add(name);
      if (kind === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) add(`${name}${suffix}`);
      if (kind === "summary") for (const suffix of ["_sum", "_count"]) add(`${name}${suffix}`);
      continue;
    }
    const sample = /^([a-zA-Z_:][\w:]*)\{([^}]*)\}/.exec(line);
    if (sample)
      add(
        sample[1]!,
        [...sample[2]!.matchAll(/(\w+)="/g)].map((m) => m[1]!),
      );
  }
}

/** Every series selector of the shipped dashboard and alerts, with where it is. */
function readers(): { where: string; metric: string; labels: readonly string[] }[] {
  const queries = [
    ...dashboardQueries(dashboard()).map(({ where, expr }) => ({ where: `dashboard ${where}`, expr })),
    ...alertRules().map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr })),
  ];
  return queries.flatMap(({ where, expr }) => {
    const reading = readPromql(withoutGrafanaVariables(expr));
    if (reading.errors.length > 0) throw new Error(`${where}: ${reading.errors.join("; ")}`);
    return reading.selectors.map((selector) => ({ where, ...selector }));
  });
}

describe("the metrics the dashboard and the alerts read", () => {
  const database = uniqueName("umx_metric_names");
  let admin: pg.Client;
  let system: SpawnedSystem;
  const metrics = new Map<string, Set<string>>();

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = `/${database}`;
    system = await spawnSystem({
      entry: main,
      cwd: root,
      services: SERVICES,
      env: {
        DATABASE_URL: url.toString(),
        REDIS_URL: TEST_REDIS_URL,
        UMX_BUS_PREFIX: testBusPrefix("metric-names"),
        UMX_INTERNAL_KEY: "metric-names-test-internal-key-0123456789",
      },
    });
    // One readiness check (the gateway asks each service's health) and one refused Connect call
    // give the labelled series their first samples.
    const gateway = `http://127.0.0.1:${system.ports.gateway}`;
    await fetch(`${gateway}/readyz`);
    await fetch(`${gateway}/unimatrix.cube.v1.CubeService/ListCubes`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    for (const service of SERVICES) {
      const port = system.metricsPorts[service];
      if (port === undefined) throw new Error(`${service} printed no metrics port:\n${system.output()}`);
      exported(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), metrics);
    }
  }, 120_000);

  afterAll(async () => {
    if (system) {
      const exited = once(system.child, "exit");
      system.child.kill("SIGTERM");
      await exited;
    }
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  test("the scrape found each kind of series (so the check below compares with something)", () => {
    for (const name of [
      "grpc_server_handled_total",
      "grpc_server_handling_seconds_bucket",
      "unimatrix_db_up",
      "unimatrix_bus_up",
      "unimatrix_feed_backlog_items",
      "unimatrix_gateway_requests_total",
      "unimatrix_gateway_response_start_seconds_bucket",
      "process_resident_memory_bytes",
    ])
      expect(metrics.has(name)).toBe(true);
    expect(metrics.get("grpc_server_handled_total")).toEqual(
      new Set(["grpc_service", "grpc_method", "grpc_type", "grpc_code", "service"]),
    );
    // Not every metric a selector could name: a made-up one is not there.
    expect(metrics.has("unimatrix_gateway_requests")).toBe(false);
  });

  test("every metric a panel or an alert names is exported by a service, or comes from Prometheus or kube-state-metrics", () => {
    const unknown = readers()
      .filter(({ metric }) => !metrics.has(metric) && !(metric in EXTERNAL))
      .map(({ where, metric }) => `${where}: ${metric}`);
    expect([...new Set(unknown)]).toEqual([]);
  });

  test("every label a selector matches on is one its metric has, or the scrape adds", () => {
    const wrong = readers().flatMap(({ where, metric, labels }) => {
      const known = new Set([
        ...TARGET_LABELS,
        ...(EXTERNAL[metric] ?? []),
        ...(metrics.get(metric) ?? []),
        ...(metric.endsWith("_bucket") ? ["le"] : []),
      ]);
      // A labelled metric nobody has touched yet has no samples to read its labels from.
      const sampled = (metrics.get(metric)?.size ?? 0) > 0 || metric in EXTERNAL;
      return labels.filter((label) => sampled && !known.has(label)).map((label) => `${where}: ${metric}{${label}}`);
    });
    expect([...new Set(wrong)]).toEqual([]);
  });
});
