// The chart's Grafana dashboard (unimatrix/files/dashboard.json): well-formed for Grafana, every
// query PromQL that parses, scoped to the release's jobs and namespace, and shipped unchanged in the
// sidecar's ConfigMap. That every metric it names exists is metric-names.test.ts's job.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chartDir, defaultValues, examplesDir, mergeValues, readYaml, withValue } from "./chart";
import { helmTemplate } from "./helm";
import { dashboard, dashboardQueries, readPromql, withoutGrafanaVariables } from "./promql";

const board = dashboard();
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a JavaScript template.
const PICKED = "${datasource}";

describe("the dashboard", () => {
  test("has a stable uid, unique panel ids and no overlapping panels", () => {
    expect(board.uid).toBe("unimatrix-overview");
    const ids = board.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const panel of board.panels) {
      const { x, y, w, h } = (panel as unknown as { gridPos: { x: number; y: number; w: number; h: number } }).gridPos;
      expect(x + w).toBeLessThanOrEqual(24);
      for (let row = y; row < y + h; row++)
        for (let col = x; col < x + w; col++) {
          const cell = `${row}:${col}`;
          expect(cells.has(cell) ? `panel ${panel.id} overlaps at ${cell}` : "").toBe("");
          cells.add(cell);
        }
    }
  });

  test("every graph has queries, all on the data source the viewer picks", () => {
    const graphs = board.panels.filter((panel) => panel.type !== "row");
    expect(graphs.length).toBeGreaterThanOrEqual(25);
    for (const panel of graphs) {
      expect(panel.targets?.length ?? 0).toBeGreaterThan(0);
      expect(panel.datasource).toEqual({ type: "prometheus", uid: PICKED });
      for (const target of panel.targets ?? []) expect(target.datasource?.uid).toBe(PICKED);
    }
    expect(board.templating.list.map((variable) => variable.name)).toEqual(["datasource", "namespace"]);
  });

  test("every query parses as PromQL", () => {
    const broken = dashboardQueries(board)
      .map(({ where, expr }) => ({ where, errors: readPromql(withoutGrafanaVariables(expr)).errors }))
      .filter(({ errors }) => errors.length > 0);
    expect(broken).toEqual([]);
    // The parser does find a broken query.
    expect(readPromql("sum(rate(x[5m])").errors.length).toBeGreaterThan(0);
  });

  test("every series a panel reads is of the chosen namespace and a unimatrix job", () => {
    const unscoped = dashboardQueries(board)
      .filter(({ where }) => where.startsWith("panel"))
      .flatMap(({ where, expr }) =>
        readPromql(withoutGrafanaVariables(expr))
          .selectors.filter((s) => !(s.labels.includes("namespace") && s.labels.includes("job")))
          .map((s) => `${where}: ${s.metric}`),
      );
    expect(unscoped).toEqual([]);
    for (const { expr } of dashboardQueries(board)) expect(expr).toMatch(/job=~?"unimatrix-/);
  });

  test("covers every surface and dependency the alerts watch", () => {
    const text = dashboardQueries(board)
      .map(({ expr }) => expr)
      .join("\n");
    for (const metric of [
      "grpc_server_handling_seconds_bucket",
      "unimatrix_gateway_request_duration_seconds_bucket",
      "unimatrix_gateway_response_start_seconds_bucket",
      "unimatrix_gateway_mcp_tool_calls_total",
      "unimatrix_db_up",
      "unimatrix_db_pool_waiting",
      "unimatrix_bus_up",
      "unimatrix_feed_backlog_items",
      "process_resident_memory_bytes",
      "nodejs_heap_size_used_bytes",
      "process_open_fds",
    ])
      expect(text).toContain(metric);
  });
});

describe("the sidecar ConfigMap", () => {
  const production = mergeValues(defaultValues(), readYaml(join(examplesDir, "production.yaml")));

  test("holds the dashboard file unchanged, labelled for Grafana's sidecar", () => {
    const maps = helmTemplate(production).filter(
      (doc) => doc.kind === "ConfigMap" && doc.metadata.name === "umx-unimatrix-dashboards",
    );
    expect(maps).toHaveLength(1);
    expect(maps[0]!.metadata.labels?.grafana_dashboard).toBe("1");
    expect(maps[0]!.metadata.annotations).toEqual({ grafana_folder: "Unimatrix" });
    const data = maps[0]!.data as Record<string, string>;
    expect(Object.keys(data)).toEqual(["unimatrix.json"]);
    expect(data["unimatrix.json"]).toBe(readFileSync(join(chartDir, "files", "dashboard.json"), "utf8").trimEnd());
  });

  test("is left out unless metrics.dashboards.enabled", () => {
    const docs = helmTemplate(withValue(production, "metrics.dashboards.enabled", false));
    expect(docs.filter((doc) => doc.metadata.name === "umx-unimatrix-dashboards")).toEqual([]);
  });
});
