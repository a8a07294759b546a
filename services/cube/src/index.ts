export { cubeEnv } from "./config";
export { migrationsDir } from "./paths";
export { type CubeServiceOptions, type RunningCube, startCube } from "./server";
