import { silentLogger } from "../logger";
import type { CommonConfig } from "../service/deps";
import { type RunningSystem, type SystemPart, startParts } from "../service/system";
import { type TestSchema, testBusPrefix, testConfig, testSchema } from "./isolation";

/** The operator token test systems are started with. */
export const TEST_OPERATOR_TOKEN = "umx_operator_systemtest_0123456789abcdef0123";

/** A system under test: its parts on their own Postgres schemas and bus prefix. */
export interface TestSystem extends RunningSystem {
  readonly config: CommonConfig;
  /** `127.0.0.1:<port>` of a part. */
  address(name: string): string;
}

/**
 * Starts `parts` (the composition's service parts, the gateway…; inner arrays concurrently)
 * for one suite: real Postgres (a fresh schema per part, dropped at stop) and Redis (a fresh
 * prefix), quiet logs, `TEST_OPERATOR_TOKEN` unless overridden. The kit imports no service: the
 * caller passes the parts.
 */
export async function startSystem(
  label: string,
  parts: readonly (SystemPart | readonly SystemPart[])[],
  overrides: Partial<CommonConfig> = {},
): Promise<TestSystem> {
  const config = testConfig({ busPrefix: testBusPrefix(label), operatorToken: TEST_OPERATOR_TOKEN, ...overrides });
  const schemas = new Map<string, TestSchema>();
  const schema = (name: string) => {
    let s = schemas.get(name);
    if (!s) {
      s = testSchema(`${label}_${name}`);
      schemas.set(name, s);
    }
    return s.schema;
  };
  const dropAll = async () => {
    for (const s of schemas.values()) await s.drop().catch(() => {});
  };
  let system: RunningSystem;
  try {
    system = await startParts(parts, { config, logger: () => silentLogger(), schema });
  } catch (error) {
    await dropAll();
    throw error;
  }
  return {
    ...system,
    get: system.get,
    config,
    address(name) {
      const endpoint = system.endpoints.find((e) => e.name === name);
      if (!endpoint) throw new Error(`${name} is not part of this system`);
      return `127.0.0.1:${endpoint.port}`;
    },
    async stop() {
      await system.stop();
      await dropAll();
    },
  };
}
