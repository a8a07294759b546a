export { type CubeConfig, cubeEnv, readCubeConfig } from "./config";
export {
  type CubeServiceOptions,
  cubeService,
  LIVENESS_JOB,
  migrationsDir,
  type RunningCube,
  startCube,
} from "./service";
