export { cubeEnv } from "./config";
export { type CubeServiceOptions, type RunningCube, startCube } from "./server";
