// What a PromQL expression reads: parsed with Prometheus's own grammar (@prometheus-io/lezer-promql,
// the parser of Prometheus's web UI), not with regular expressions.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parser } from "@prometheus-io/lezer-promql";
import YAML from "yaml";
import { chartDir } from "./chart";

/** One series selector of an expression: the metric and the label names it matches or groups on. */
export interface Selector {
  readonly metric: string;
  /** Labels named in the selector's matchers (`{job="…"}`). */
  readonly labels: readonly string[];
}

/** What an expression reads, or the syntax errors that stop it being read. */
export interface Reading {
  readonly selectors: readonly Selector[];
  /** Labels an aggregation groups by or a vector match joins on (`by (job)`, `on (pod)`). */
  readonly grouping: readonly string[];
  readonly errors: readonly string[];
}

/**
 * Grafana's variables as PromQL a parser takes: `$__rate_interval` (and the other `$__…` ranges) as
 * a duration; `$var`/`${var}` sit inside label values here, where any text is fine.
 */
export function withoutGrafanaVariables(expr: string): string {
  return expr.replaceAll(/\$__\w+/g, "5m").replaceAll(/\$\{?\w+\}?/g, "x");
}

/** Parses `expr` and lists its series selectors, grouping labels and syntax errors. */
export function readPromql(expr: string): Reading {
  const selectors: Selector[] = [];
  const grouping: string[] = [];
  const errors: string[] = [];
  const text = (from: number, to: number) => expr.slice(from, to);
  const cursor = parser.parse(expr).cursor();
  do {
    if (cursor.type.isError)
      errors.push(`syntax error at ${cursor.from}: ${JSON.stringify(text(cursor.from, cursor.from + 20))}`);
    else if (cursor.name === "VectorSelector") {
      const node = cursor.node;
      const name = node.getChild("Identifier");
      const labels = node
        .getChild("LabelMatchers")
        ?.getChildren("UnquotedLabelMatcher")
        .map((matcher) => matcher.getChild("LabelName"))
        .filter((label) => label !== null)
        .map((label) => text(label.from, label.to));
      if (!name) errors.push(`a selector without a metric name: ${text(node.from, node.to)}`);
      else selectors.push({ metric: text(name.from, name.to), labels: labels ?? [] });
    } else if (cursor.name === "GroupingLabels") {
      for (const label of cursor.node.getChildren("LabelName")) grouping.push(text(label.from, label.to));
    }
  } while (cursor.next());
  return { selectors, grouping, errors };
}

/** An alerting rule of the shipped rules file. */
export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

/** The chart's rules file (files/alerts.yaml), the text the PrometheusRule embeds. */
export const alertsFile = join(chartDir, "files", "alerts.yaml");

/** The groups of the rules file, as Prometheus reads them. */
export function alertGroups(): { name: string; rules: AlertRule[] }[] {
  return (YAML.parse(readFileSync(alertsFile, "utf8")) as { groups: { name: string; rules: AlertRule[] }[] }).groups;
}

/** Every alerting rule of the rules file. */
export function alertRules(): AlertRule[] {
  return alertGroups().flatMap((group) => group.rules);
}

/** A Grafana panel's query. */
interface Target {
  readonly expr: string;
  readonly datasource?: { type?: string; uid?: string };
}

/** A Grafana panel (rows included). */
export interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly targets?: Target[];
  readonly datasource?: { type?: string; uid?: string };
}

/** The chart's Grafana dashboard (files/dashboard.json). */
export interface Dashboard {
  readonly uid: string;
  readonly title: string;
  readonly panels: Panel[];
  readonly templating: { list: { name: string; type: string; query?: unknown }[] };
}

/** The dashboard the chart ships. */
export function dashboard(): Dashboard {
  return JSON.parse(readFileSync(join(chartDir, "files", "dashboard.json"), "utf8")) as Dashboard;
}

/** Every PromQL query of the dashboard: its panels' targets and its query variables. */
export function dashboardQueries(board: Dashboard): { where: string; expr: string }[] {
  const panels = board.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target, i) => ({
      where: `panel ${panel.id} "${panel.title}" #${i}`,
      expr: target.expr,
    })),
  );
  const variables = board.templating.list
    .filter((variable) => variable.type === "query")
    .map((variable) => {
      const query = variable.query as { query: string };
      // label_values(<selector>, label) is Grafana's, not PromQL: its selector is.
      const inner = /^label_values\((.*),\s*\w+\)$/.exec(query.query)?.[1] ?? query.query;
      return { where: `variable ${variable.name}`, expr: inner };
    });
  return [...panels, ...variables];
}
