// The chart's alerts (unimatrix/files/alerts.yaml) through the real promtool (Debian's prometheus
// package; .ci/run installs it): `promtool check rules`, then `promtool test rules` with a firing
// and a quiet case per alert (alerts/<group>.promtool.yaml); the PrometheusRule the chart renders holds
// exactly that file; every alert carries a severity, a summary and a runbook the README explains.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import YAML from "yaml";
import { defaultValues, examplesDir, mergeValues, readYaml, root, withValue } from "./chart";
import { helmTemplate } from "./helm";
import { alertGroups, alertRules, alertsFile } from "./promql";

/** The promtool case files, one per rule group. */
const casesDir = join(__dirname, "alerts");
const caseFiles = readdirSync(casesDir)
  .filter((file) => file.endsWith(".promtool.yaml"))
  .sort();

/** Runs promtool (`binary`: another name, for the check below); a missing binary fails with what to install. */
function promtool(args: readonly string[], cwd = __dirname, binary = "promtool"): { status: number; output: string } {
  const result = spawnSync(binary, args, { cwd, encoding: "utf8" });
  if ((result.error as NodeJS.ErrnoException | undefined)?.code === "ENOENT") {
    throw new Error(
      "promtool is missing: install Debian's prometheus package " +
        "(apt-get install -y --no-install-recommends prometheus; .ci/run does it)",
    );
  }
  return { status: result.status ?? 1, output: `${result.stdout}${result.stderr}` };
}

/** The promtool cases: per alert name, how many expect it to fire and how many expect silence. */
function caseCounts(): Map<string, { firing: number; quiet: number }> {
  const counts = new Map<string, { firing: number; quiet: number }>();
  const tests = caseFiles.flatMap(
    (name) =>
      (
        YAML.parse(readFileSync(join(casesDir, name), "utf8")) as {
          tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
        }
      ).tests,
  );
  for (const test of tests)
    for (const check of test.alert_rule_test ?? []) {
      const count = counts.get(check.alertname) ?? { firing: 0, quiet: 0 };
      if ((check.exp_alerts ?? []).length > 0) count.firing++;
      else count.quiet++;
      counts.set(check.alertname, count);
    }
  return counts;
}

describe("the alerts through promtool", () => {
  const names = alertRules().map((rule) => rule.alert);

  test("promtool check rules accepts the shipped file, counting every rule", () => {
    const { status, output } = promtool(["check", "rules", alertsFile]);
    expect(output).toContain(`SUCCESS: ${names.length} rules found`);
    expect(status).toBe(0);
    expect(names.length).toBeGreaterThanOrEqual(16);
  });

  test("promtool test rules passes every case of every group's file", () => {
    expect(caseFiles).toEqual(["dependencies.promtool.yaml", "gateway.promtool.yaml", "grpc.promtool.yaml"]);
    const { status, output } = promtool(["test", "rules", ...caseFiles], casesDir);
    expect(output.match(/SUCCESS/g)).toHaveLength(caseFiles.length);
    expect(output).not.toContain("FAILED");
    expect(status).toBe(0);
  });

  test("every alert has a case that fires it and a case that must not", () => {
    const counts = caseCounts();
    const missing = names.filter((name) => !(counts.get(name)?.firing && counts.get(name)?.quiet));
    expect(missing).toEqual([]);
    // No case names an alert the file does not have (a renamed alert would pass silently).
    expect([...counts.keys()].filter((name) => !names.includes(name))).toEqual([]);
  });

  test("the cases catch a broken rule: counting streams as gRPC errors fails them", () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-alerts-"));
    try {
      const broken = readFileSync(alertsFile, "utf8").replaceAll(',grpc_type="unary"', "");
      expect(broken).not.toEqual(readFileSync(alertsFile, "utf8"));
      writeFileSync(join(dir, "alerts.yaml"), broken);
      const cases = readFileSync(join(casesDir, "grpc.promtool.yaml"), "utf8").replace(
        "../../unimatrix/files/alerts.yaml",
        "alerts.yaml",
      );
      writeFileSync(join(dir, "cases.yaml"), cases);
      const { status, output } = promtool(["test", "rules", "cases.yaml"], dir);
      expect(status).not.toBe(0);
      expect(output).toMatch(/alertname: UnimatrixGrpcErrors/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a missing promtool fails with what to install", () => {
    expect(() => promtool(["--version"], __dirname, "promtool-not-installed")).toThrow(
      /promtool is missing: install Debian's prometheus package/,
    );
  });
});

describe("what every alert says", () => {
  const readme = readFileSync(join(root, "deploy", "k8s", "README.md"), "utf8");
  const runbooks = readme.slice(readme.indexOf("## Runbooks"));

  test.each(alertRules().map((rule) => [rule.alert, rule] as const))(
    "%s: severity, summary, a static runbook line and its README section",
    (name, rule) => {
      expect(name).toMatch(/^Unimatrix[A-Z][A-Za-z]+$/);
      expect(["critical", "warning"]).toContain(rule.labels.severity);
      expect(rule.annotations.summary?.length).toBeGreaterThan(10);
      expect(rule.annotations.runbook).toMatch(/\. See deploy\/k8s\/README\.md#runbooks\.$/);
      expect(rule.annotations.runbook).not.toContain("{{");
      expect(runbooks).toContain(`### ${name}\n`);
    },
  );

  test("alert names are unique and the groups are the surfaces and the dependencies", () => {
    const names = alertRules().map((rule) => rule.alert);
    expect(new Set(names).size).toBe(names.length);
    expect(alertGroups().map((group) => group.name)).toEqual([
      "unimatrix.grpc",
      "unimatrix.gateway",
      "unimatrix.dependencies",
    ]);
  });
});

describe("what the chart ships", () => {
  const production = mergeValues(defaultValues(), readYaml(join(examplesDir, "production.yaml")));

  test("the PrometheusRule's spec is the rules file, unchanged", () => {
    const docs = helmTemplate(production);
    const rules = docs.filter((doc) => doc.kind === "PrometheusRule");
    expect(rules.map((doc) => doc.metadata.name)).toEqual(["umx-unimatrix"]);
    expect(rules[0]!.metadata.labels?.release).toBe("kube-prometheus-stack");
    expect(rules[0]!.spec).toEqual(YAML.parse(readFileSync(alertsFile, "utf8")));
  });

  test("no PrometheusRule unless metrics.prometheusRule.enabled", () => {
    const off = withValue(production, "metrics.prometheusRule.enabled", false);
    expect(helmTemplate(off).filter((doc) => doc.kind === "PrometheusRule")).toEqual([]);
  });

  test("the migration alert matches the Job name the chart renders", () => {
    const job = helmTemplate(production).find((doc) => doc.kind === "Job");
    const rule = alertRules().find((r) => r.alert === "UnimatrixMigrationFailed")!;
    const pattern = /job_name=~"([^"]+)"/.exec(rule.expr)![1]!;
    expect(job?.metadata.name).toMatch(new RegExp(`^(?:${pattern})$`));
  });
});

// Keep the case files runnable by hand from their folder (the path their header comments give).
test.each(caseFiles)("%s names the shipped rules file by a path relative to itself", (name) => {
  const file = YAML.parse(readFileSync(join(casesDir, name), "utf8")) as { rule_files: string[] };
  expect(file.rule_files).toEqual(["../../unimatrix/files/alerts.yaml"]);
});
