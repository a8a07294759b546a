export { gatewayEnv } from "./config";
export { type GatewayOptions, type RunningGateway, startGateway } from "./server";
