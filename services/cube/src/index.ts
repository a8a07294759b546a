export { cubeEnv } from "./config";
export { type CubeServiceOptions, startCube } from "./server";
