// Configuration parity: every environment variable the services declare (read from code, so new
// ones are picked up) appears in the chart, in the README configuration tables and in the
// services' config validation; and what the chart sets passes that validation.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
// The one list of services; importing it imports every service, which registers its variables into allEnvVars.
import { SERVICES as LISTED } from "@unimatrix/app";
import { allEnvVars, ConfigError, type EnvVar, readConfig } from "@unimatrix/service-kit/config";
import { defaultValues, exampleFiles, examplesDir, mergeValues, readYaml, root, templates, type Values } from "./chart";

const SERVICES = LISTED.map((s) => s.name);
const values = defaultValues();
const files = templates();
const declared = allEnvVars.map((v) => v.name);

/** Variables the chart sets from values.yaml keys (config.env and every services.<name>.env). */
function valuesEnvNames(v: Values): string[] {
  const config = Object.keys((v.config as { env: Values }).env);
  const perService = SERVICES.flatMap((s) => Object.keys(((v.services as Values)[s] as { env: Values }).env));
  return [...config, ...perService];
}

/** Variables a template names literally: ConfigMap data keys and container `env` names. */
function templateEnvNames(): string[] {
  const configmap = [...files.get("configmap.yaml")!.matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!);
  const env = ["deployment.yaml", "migrations-job.yaml"].flatMap((file) =>
    [...files.get(file)!.matchAll(/- name: ([A-Z][A-Z0-9_]*)$/gm)].map((m) => m[1]!),
  );
  return [...configmap, ...env];
}

/** Variable names in the first column (`NAME`) of a README's markdown tables. */
function readmeTableNames(path: string): string[] {
  return [...readFileSync(path, "utf8").matchAll(/^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/gm)].map((m) => m[1]!);
}

/** The READMEs whose configuration table must list every variable. */
function readmes(): string[] {
  const chartReadme = join(root, "deploy", "k8s", "README.md");
  const rootReadme = join(root, "README.md");
  // The root README's table is written by the lead; when it exists it must agree as well.
  return existsSync(rootReadme) && readmeTableNames(rootReadme).length > 0 ? [chartReadme, rootReadme] : [chartReadme];
}

/**
 * The environment a service's container gets from the chart, modelled on the templates: the
 * ConfigMap (ports, addresses, config.env), the Secret's keys, and services.<name>.env.
 */
function podEnv(v: Values, service: (typeof SERVICES)[number], fullname = "umx-unimatrix"): Record<string, string> {
  const services = v.services as Record<string, { port: number; env: Values }>;
  const str = (value: unknown) => String(value);
  const secrets = v.secrets as Record<string, string>;
  const env: Record<string, string> = {
    CUBE_PORT: str(services.cube!.port),
    DEVICE_PORT: str(services.device!.port),
    PRESENCE_PORT: str(services.presence!.port),
    GATEWAY_PORT: str(services.gateway!.port),
    CUBE_ADDRESS: `${fullname}-cube:${services.cube!.port}`,
    DEVICE_ADDRESS: `${fullname}-device:${services.device!.port}`,
    PRESENCE_ADDRESS: `${fullname}-presence:${services.presence!.port}`,
  };
  for (const [key, value] of Object.entries((v.config as { env: Values }).env)) env[key] = str(value);
  if (service !== "gateway" && secrets.databaseUrl) env.DATABASE_URL = secrets.databaseUrl;
  if (secrets.redisUrl) env.REDIS_URL = secrets.redisUrl;
  if (secrets.internalKey) env.UMX_INTERNAL_KEY = secrets.internalKey;
  if (secrets.operatorToken) env.UMX_OPERATOR_TOKEN = secrets.operatorToken;
  for (const [key, value] of Object.entries(services[service]!.env)) env[key] = str(value);
  return env;
}

/** Validates an environment with every declared variable's own validation. */
function validate(env: Record<string, string>): Record<string, unknown> {
  const shape: Record<string, EnvVar> = Object.fromEntries(allEnvVars.map((v) => [v.name, v]));
  return readConfig(shape, env);
}

describe("configuration parity", () => {
  test("the services declare their variables (the list is read from code)", () => {
    expect(declared).toEqual(
      expect.arrayContaining(["DATABASE_URL", "REDIS_URL", "UMX_INTERNAL_KEY", "CUBE_PORT", "GATEWAY_PORT"]),
    );
    expect(new Set(declared).size).toBe(declared.length);
  });

  test("every declared variable is set by the chart", () => {
    const inChart = new Set([...valuesEnvNames(values), ...templateEnvNames()]);
    expect(declared.filter((name) => !inChart.has(name))).toEqual([]);
  });

  test("the chart sets no variable the services do not declare (no typos, no leftovers)", () => {
    const known = new Set(declared);
    const inChart = [...valuesEnvNames(values), ...templateEnvNames()];
    expect(inChart.filter((name) => !known.has(name))).toEqual([]);
    for (const file of exampleFiles()) {
      const merged = mergeValues(values, readYaml(join(examplesDir, file)));
      expect({ file, unknown: valuesEnvNames(merged).filter((name) => !known.has(name)) }).toEqual({
        file,
        unknown: [],
      });
    }
  });

  test("the secrets are never in the ConfigMap, and always from the Secret", () => {
    const secretNames = ["DATABASE_URL", "REDIS_URL", "UMX_INTERNAL_KEY", "UMX_OPERATOR_TOKEN"];
    const configmap = files.get("configmap.yaml")!;
    for (const name of secretNames) {
      expect(configmap).not.toContain(name);
      expect(Object.keys((values.config as { env: Values }).env)).not.toContain(name);
      expect(files.get("deployment.yaml")).toMatch(new RegExp(`- name: ${name}\\n\\s+valueFrom:\\n\\s+secretKeyRef:`));
    }
    expect((values.secrets as { keys: Values }).keys).toEqual({
      databaseUrl: "DATABASE_URL",
      redisUrl: "REDIS_URL",
      internalKey: "UMX_INTERNAL_KEY",
      operatorToken: "UMX_OPERATOR_TOKEN",
    });
  });

  test.each(readmes().map((path) => [path.slice(root.length + 1), path]))(
    "%s lists exactly the declared variables in its configuration table",
    (_name, path) => {
      const rows = readmeTableNames(path);
      expect(declared.filter((name) => !rows.includes(name))).toEqual([]);
      expect(rows.filter((name) => !declared.includes(name))).toEqual([]);
      expect(new Set(rows).size).toBe(rows.length);
    },
  );

  test("every variable has validation, and each one refuses a wrong value naming the variable", () => {
    const env = podEnv(mergeValues(values, readYaml(join(examplesDir, "minimal.yaml"))), "cube");
    for (const variable of allEnvVars) {
      expect(typeof variable.schema.safeParse).toBe("function");
      expect(variable.description.length).toBeGreaterThan(10);
    }
    const wrong: Record<string, string> = {
      LOG_LEVEL: "verbose",
      CUBE_PORT: "70000",
      DATABASE_URL: "mysql://db",
      UMX_INTERNAL_KEY: "short",
      UMX_SHUTDOWN_GRACE_MS: "soon",
      CUBE_ADDRESS: "no-port",
    };
    for (const [name, value] of Object.entries(wrong)) {
      let error: unknown;
      try {
        validate({ ...env, [name]: value });
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe(name);
    }
  });

  test.each(["minimal.yaml", "single-replica.yaml", "production.yaml"])(
    "the environment each pod gets from values.yaml + %s passes the services' validation",
    (file) => {
      const merged = mergeValues(values, readYaml(join(examplesDir, file)));
      const secrets = merged.secrets as Values;
      // An existingSecret is filled by the operator; model it with valid placeholders.
      if (secrets.existingSecret) {
        Object.assign(secrets, {
          databaseUrl: "postgresql://u:p@db:5432/umx",
          redisUrl: "rediss://redis:6380",
          internalKey: "i".repeat(48),
        });
      }
      for (const service of SERVICES) {
        const config = validate(podEnv(merged, service));
        const services = merged.services as Record<string, { port: number }>;
        expect(config.CUBE_PORT).toBe(services.cube!.port);
        expect(config.GATEWAY_PORT).toBe(services.gateway!.port);
        expect(config.LOG_LEVEL).toBe((merged.config as { env: Values }).env.LOG_LEVEL);
        expect(config.CUBE_ADDRESS).toBe(`umx-unimatrix-cube:${services.cube!.port}`);
        expect(config.DATABASE_URL === undefined).toBe(service === "gateway");
        expect(config.UMX_INTERNAL_KEY).toBe(secrets.internalKey);
      }
    },
  );

  test("the chart's defaults equal the code's defaults", () => {
    const services = values.services as Record<string, { port: number; env: Values }>;
    const chartDefaults: Record<string, string> = {
      ...Object.fromEntries(Object.entries((values.config as { env: Values }).env).map(([k, v]) => [k, String(v)])),
      ...Object.fromEntries(SERVICES.flatMap((s) => Object.entries(services[s]!.env).map(([k, v]) => [k, String(v)]))),
      ...Object.fromEntries(SERVICES.map((s) => [`${s.toUpperCase()}_PORT`, String(services[s]!.port)])),
    };
    const drift = Object.entries(chartDefaults)
      .map(([name, value]) => ({ name, chart: value, code: allEnvVars.find((v) => v.name === name)?.defaultValue }))
      .filter(({ chart, code }) => code !== undefined && chart !== code);
    expect(drift).toEqual([]);
    expect(Object.keys(chartDefaults).length).toBeGreaterThanOrEqual(9);
  });
});
