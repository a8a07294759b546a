import { commonEnv, readConfig } from "@unimatrix/service-kit/config";
import { createLogger } from "@unimatrix/service-kit/logger";
import { type Endpoint, resolveOperatorToken, startParts } from "@unimatrix/service-kit/service";
import { SERVICE_NAMES, serviceEntry } from "./services";

export type { Endpoint };

/** A running set of services. */
export interface Launched {
  readonly endpoints: readonly Endpoint[];
  readonly embedded: boolean;
  /** The data directory of the embedded store. */
  readonly dataDir: string;
  /** Stops in reverse start order. */
  stop(): Promise<void>;
}

/**
 * Starts the named services (all by default) in this process from the environment, in the
 * list's order, with the kit's system starter (the one the system tests use). With no REDIS_URL
 * the services share one in-process bus; a gateway started alongside services is pointed at
 * their real ports (so port 0 works for tests).
 */
export async function launch(names: readonly string[] = SERVICE_NAMES, env = process.env): Promise<Launched> {
  const read = readConfig(commonEnv, env);
  const config = { ...read, operatorToken: resolveOperatorToken(read) };
  const wanted = SERVICE_NAMES.filter((name) => names.includes(name));
  const system = await startParts(
    wanted.map((name) => serviceEntry(name).part(env)),
    { config, logger: (name) => createLogger(name, config.logLevel) },
  );
  return {
    endpoints: system.endpoints,
    embedded: !config.databaseUrl,
    dataDir: config.dataDir,
    stop: () => system.stop(),
  };
}
