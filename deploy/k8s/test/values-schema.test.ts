import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  defaultValues,
  exampleFiles,
  examplesDir,
  mergeValues,
  readYaml,
  schemaErrors,
  schemaValidator,
  undocumentedKeys,
  type Values,
  withValue,
} from "./chart";

const validate = schemaValidator();
const defaults = defaultValues();
const minimal = mergeValues(defaults, readYaml(join(examplesDir, "minimal.yaml")));

describe("values.schema.json", () => {
  test("accepts the chart's own values.yaml", () => {
    expect(schemaErrors(validate, defaults)).toEqual([]);
  });

  test("there are example values files, and each one merged over values.yaml validates", () => {
    const files = exampleFiles();
    expect(files).toEqual(expect.arrayContaining(["minimal.yaml", "existing-secret.yaml", "production.yaml"]));
    for (const file of files) {
      const merged = mergeValues(defaults, readYaml(join(examplesDir, file)));
      expect({ file, errors: schemaErrors(validate, merged) }).toEqual({ file, errors: [] });
    }
  });

  test("every example either fills the required connection settings or names an existing Secret", () => {
    for (const file of exampleFiles()) {
      const secrets = mergeValues(defaults, readYaml(join(examplesDir, file))).secrets as Values;
      const complete = Boolean(secrets.databaseUrl && secrets.redisUrl && secrets.internalKey);
      expect({ file, ok: complete || Boolean(secrets.existingSecret) }).toEqual({ file, ok: true });
    }
  });

  // Each wrong value must be refused, with the error at the offending path.
  const wrong: [string, unknown, string][] = [
    ["config.env.LOG_LEVEL", "verbose", "/config/env/LOG_LEVEL"],
    ["config.env.UMX_SHUTDOWN_GRACE_MS", 0, "/config/env/UMX_SHUTDOWN_GRACE_MS"],
    ["config.env.UMX_SHUTDOWN_GRACE_MS", 1.5, "/config/env/UMX_SHUTDOWN_GRACE_MS"],
    ["config.env.UMX_DRAIN_DELAY_MS", -1, "/config/env/UMX_DRAIN_DELAY_MS"],
    ["config.env.UMX_GRPC_MAX_CONNECTION_AGE_MS", "5m", "/config/env/UMX_GRPC_MAX_CONNECTION_AGE_MS"],
    ["config.env.UMX_DB_PROBE_MS", -1, "/config/env/UMX_DB_PROBE_MS"],
    ["config.env.UMX_BUS_PREFIX", "has spaces", "/config/env/UMX_BUS_PREFIX"],
    ["config.env.DATABASE_URL", "postgres://in/the/configmap", "/config/env"],
    ["config.env.CUBE_PORT", 9000, "/config/env"],
    ["config.env.lower_case", "x", "/config/env"],
    ["config.env.SOME_FLOAT", 0.25, "/config/env/SOME_FLOAT"],
    ["services.presence.env.UMX_INTERNAL_KEY", "k".repeat(40), "/services/presence/env"],
    ["services.cube.port", 70000, "/services/cube/port"],
    ["services.cube.port", "7001", "/services/cube/port"],
    ["services.device.replicas", -1, "/services/device/replicas"],
    ["services.gateway.autoscaling.minReplicas", 0, "/services/gateway/autoscaling/minReplicas"],
    ["services.gateway.autoscaling.targetCPUUtilizationPercentage", 0, "/services/gateway/autoscaling"],
    ["services.presence.pdb.maxUnavailable", 0, "/services/presence/pdb/maxUnavailable"],
    ["services.presence.pdb.maxUnavailable", "150%", "/services/presence/pdb/maxUnavailable"],
    ["services.cube.resources.requests.memory", "lots", "/services/cube/resources/requests/memory"],
    ["services.worker", {}, "/services"],
    ["image.pullPolicy", "Sometimes", "/image/pullPolicy"],
    ["image.digest", "sha256:nothex", "/image/digest"],
    ["secrets.databaseUrl", "mysql://db/unimatrix", "/secrets/databaseUrl"],
    ["secrets.redisUrl", "http://redis:6379", "/secrets/redisUrl"],
    ["secrets.internalKey", "too-short", "/secrets/internalKey"],
    ["secrets.operatorToken", "not-an-operator-token", "/secrets/operatorToken"],
    ["ingress.hosts", [{ host: "UPPER.example.com", paths: [{ path: "/", pathType: "Prefix" }] }], "/ingress/hosts/0"],
    ["ingress.hosts", [{ host: "a.example.com", paths: [{ path: "/", pathType: "Regex" }] }], "/ingress/hosts/0"],
    ["shutdown.extraGraceSeconds", 0, "/shutdown/extraGraceSeconds"],
    ["topologySpread.whenUnsatisfiable", "Maybe", "/topologySpread/whenUnsatisfiable"],
    ["podSecurityContext.runAsNonRoot", false, "/podSecurityContext/runAsNonRoot"],
    ["networkPolicy.extraFrom", [{ podSelecter: {} }], "/networkPolicy/extraFrom/0"],
    ["probes.liveness.periodSeconds", 0, "/probes/liveness/periodSeconds"],
    ["probes.readiness.gatewayPath", "/ready", "/probes/readiness/gatewayPath"],
    ["probes.liveness.gatewayPath", "/readyz", "/probes/liveness"],
    ["replicaCount", 3, "/"],
  ];

  test.each(wrong)("rejects %s = %j", (path, value, at) => {
    const errors = schemaErrors(validate, withValue(minimal, path, value));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.some((line) => line.startsWith(`${at}`))).toBe(true);
  });

  test("the same paths with right values are accepted (the rejections above are about the value)", () => {
    const right: [string, unknown][] = [
      ["config.env.LOG_LEVEL", "debug"],
      ["config.env.UMX_SHUTDOWN_GRACE_MS", "15000"],
      ["config.env.SOME_NEW_SETTING", 5],
      ["services.presence.env.PRESENCE_RETENTION_MS", 604800000],
      ["services.cube.port", 9001],
      ["services.presence.pdb.maxUnavailable", "50%"],
      ["image.digest", `sha256:${"a".repeat(64)}`],
      ["secrets.databaseUrl", "postgresql://u:p@db:5432/umx?sslmode=require"],
      ["secrets.redisUrl", "rediss://redis:6380"],
      ["secrets.operatorToken", "umx_operator_0123456789abcdef"],
    ];
    for (const [path, value] of right) {
      expect({ path, errors: schemaErrors(validate, withValue(minimal, path, value)) }).toEqual({ path, errors: [] });
    }
  });

  test("documents every key of values.yaml with a comment", () => {
    const text = readFileSync(join(__dirname, "..", "unimatrix", "values.yaml"), "utf8");
    expect(undocumentedKeys(text)).toEqual([]);
    // The check finds a key without its comment.
    expect(undocumentedKeys("# -- documented\na: 1\nb:\n  # -- documented\n  c: 2\n  d: 3\n")).toEqual(["6: d: 3"]);
  });
});
