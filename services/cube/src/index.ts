export { type CubeConfig, cubeEnv, readCubeConfig } from "./config";
export { type CubeServiceOptions, migrationsDir, type RunningCube, startCube } from "./service";
