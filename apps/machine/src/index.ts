/** `@unimatrix/machine`: the machine daemon and the host hooks, for the composition and for tests. */
export { backoffDelay } from "./backoff";
export { type Daemon, type DaemonOptions, runDaemon, tlsCredentials } from "./daemon";
export { clearStaleDoor, DoorInUseError, openDoor, type ProbeResult, probeDoor } from "./door";
export { runHook } from "./hook";
export { DoorClient, type DoorItem, type DoorStatus } from "./protocol";
export { Spool } from "./spool";
