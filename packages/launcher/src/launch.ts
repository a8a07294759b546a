import { cubeEnv, startCube } from "@unimatrix/cube";
import { deviceEnv, startDevice } from "@unimatrix/device";
import { gatewayEnv, startGateway } from "@unimatrix/gateway";
import { presenceEnv, startPresence } from "@unimatrix/presence";
import {
  type Bus,
  commonEnv,
  createLogger,
  InProcessBus,
  readConfig,
  resolveInternalKey,
  resolveOperatorToken,
} from "@unimatrix/service-kit";

/** The services a process can run, in start order (the gateway last: it calls the others). */
export const SERVICE_NAMES = ["cube", "device", "presence", "gateway"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** Where a started service listens. */
export interface Endpoint {
  readonly name: ServiceName;
  readonly protocol: "grpc" | "http";
  readonly port: number;
  /** Port of its Prometheus `/metrics` listener. */
  readonly metricsPort: number | undefined;
}

/** A running set of services. */
export interface Launched {
  readonly endpoints: readonly Endpoint[];
  readonly embedded: boolean;
  /** Stops in reverse start order. */
  stop(): Promise<void>;
}

/**
 * Starts the named services (all by default) in this process from the environment. With no
 * REDIS_URL the services share one in-process bus; a gateway started alongside services is pointed
 * at their real ports (so port 0 works for tests).
 */
export async function launch(names: readonly ServiceName[] = SERVICE_NAMES, env = process.env): Promise<Launched> {
  const read = readConfig(commonEnv, env);
  const config = { ...read, operatorToken: resolveOperatorToken(read) };
  const ports = {
    cube: readConfig(cubeEnv, env),
    device: readConfig(deviceEnv, env),
    presence: readConfig(presenceEnv, env),
  };
  const gateway = readConfig(gatewayEnv, env);
  const bus: Bus | undefined = config.redisUrl ? undefined : new InProcessBus();
  const stops: (() => Promise<void>)[] = [];
  const endpoints: Endpoint[] = [];
  const local = (name: ServiceName, fallback: string) => {
    const endpoint = endpoints.find((e) => e.name === name);
    return endpoint ? `127.0.0.1:${endpoint.port}` : fallback;
  };
  try {
    for (const name of names) {
      if (name === "gateway") continue;
      const common = {
        config,
        port: ports[name].port,
        metricsPort: ports[name].metricsPort,
        bus,
        logger: createLogger(name, config.logLevel),
      };
      const running =
        name === "cube"
          ? await startCube(common)
          : name === "device"
            ? await startDevice(common)
            : await startPresence({
                ...common,
                // Presence resolves user and client tokens through cube: the one in this process, unless told otherwise.
                ...(env.PRESENCE_CUBE_ADDRESS ? {} : { presence: { cubeAddress: local("cube", "") || undefined } }),
              });
      stops.push(() => running.stop());
      endpoints.push({ name, protocol: "grpc", port: running.port, metricsPort: running.metricsPort });
    }
    if (names.includes("gateway")) {
      const running = await startGateway({
        config,
        gateway: {
          ...gateway,
          cubeAddress: local("cube", gateway.cubeAddress),
          deviceAddress: local("device", gateway.deviceAddress),
          presenceAddress: local("presence", gateway.presenceAddress),
        },
        internalKey: resolveInternalKey(config),
        bus,
        metricsPort: gateway.metricsPort,
      });
      stops.push(() => running.stop());
      endpoints.push({ name: "gateway", protocol: "http", port: running.port, metricsPort: running.metricsPort });
    }
  } catch (error) {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await bus?.close();
    throw error;
  }
  return {
    endpoints,
    embedded: !config.databaseUrl,
    async stop() {
      for (const stop of [...stops].reverse()) await stop();
      await bus?.close();
    },
  };
}
