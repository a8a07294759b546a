import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, commonEnv, envVar, portSchema, readConfig } from "@unimatrix/service-kit/config";
import { resolveInternalKey } from "@unimatrix/service-kit/service";

describe("config from the environment", () => {
  it("applies documented defaults", () => {
    const config = readConfig(commonEnv, {});
    expect(config).toMatchObject({
      databaseUrl: undefined,
      redisUrl: undefined,
      busPrefix: "umx",
      dataDir: "./data",
      bindHost: "0.0.0.0",
      logLevel: "info",
      shutdownGraceMs: 10_000,
      drainDelayMs: 5_000,
      grpcMaxConnectionAgeMs: 300_000,
    });
    expect(readConfig(commonEnv, { UMX_DRAIN_DELAY_MS: "0" }).drainDelayMs).toBe(0);
  });

  it.each([
    ["DATABASE_URL", "mysql://x"],
    ["REDIS_URL", "not a url"],
    ["UMX_BUS_PREFIX", "has spaces"],
    ["UMX_INTERNAL_KEY", "short"],
    ["UMX_OPERATOR_TOKEN", "plain"],
    ["LOG_LEVEL", "loud"],
    ["UMX_SHUTDOWN_GRACE_MS", "-5"],
    ["UMX_DRAIN_DELAY_MS", "-1"],
    ["UMX_GRPC_MAX_CONNECTION_AGE_MS", "soon"],
  ])("names %s when it is %j", (name, value) => {
    expect(() => readConfig(commonEnv, { [name]: value })).toThrow(ConfigError);
    expect(() => readConfig(commonEnv, { [name]: value })).toThrow(new RegExp(`^invalid configuration: ${name} `));
  });

  it("validates service ports", () => {
    const shape = { port: envVar("CUBE_PORT", "port", portSchema, "7001") };
    expect(readConfig(shape, {}).port).toBe(7001);
    expect(readConfig(shape, { CUBE_PORT: "0" }).port).toBe(0);
    expect(() => readConfig(shape, { CUBE_PORT: "70000" })).toThrow(/CUBE_PORT .*got "70000"/);
    expect(() => readConfig(shape, { CUBE_PORT: "http" })).toThrow(/CUBE_PORT/);
  });

  it("requires UMX_INTERNAL_KEY with Postgres, and keeps one under the data dir on the embedded default", () => {
    expect(() =>
      resolveInternalKey({ internalKey: undefined, databaseUrl: "postgres://x/y", dataDir: "./data" }),
    ).toThrow(/UMX_INTERNAL_KEY is required/);
    const dataDir = mkdtempSync(join(tmpdir(), "umx-key-"));
    const first = resolveInternalKey({ internalKey: undefined, databaseUrl: undefined, dataDir });
    expect(first.length).toBeGreaterThanOrEqual(32);
    expect(readFileSync(join(dataDir, "internal-key"), "utf8")).toBe(first);
    expect(resolveInternalKey({ internalKey: undefined, databaseUrl: undefined, dataDir })).toBe(first);
  });
});
