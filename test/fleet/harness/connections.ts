import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { type FleetProcess, poll } from "./processes";

/**
 * The socket inodes of every ESTABLISHED TCP connection to `port` on this host, client side (its
 * remote port is `port`), from `/proc/net/tcp` and `/proc/net/tcp6`.
 */
function socketsTo(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const remotePort = Number.parseInt(fields[2]!.split(":")[1]!, 16);
      if (fields[3] === "01" && remotePort === port) inodes.add(fields[9]!);
    }
  }
  return inodes;
}

/** How many of `inodes` process `pid` holds among its file descriptors. */
function held(pid: number, inodes: ReadonlySet<string>): number {
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return 0;
  }
  return fds.filter((fd) => {
    try {
      const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      return socket !== null && inodes.has(socket[1]!);
    } catch {
      return false;
    }
  }).length;
}

/** A client process and how many connections it must hold to the server. */
export interface Dialer {
  readonly name: string;
  readonly pid: number | undefined;
  readonly atLeast: number;
}

/** How many connections process `pid` holds open to `server` now (each grpc-js channel has its own). */
export function connectionsTo(server: FleetProcess, pid: number | undefined): number {
  return pid === undefined ? 0 : held(pid, socketsTo(server.port));
}

/**
 * Resolves once every client process holds at least its number of connections to `server`: a
 * replica started again on its port is only in its clients' pools once they reconnected (grpc-js
 * backs off from an address it was refused at, channel by channel), so the next replica of its
 * service must not drain before that. Linux only (`/proc`), as the fleet is.
 */
export async function clientsConnected(
  server: FleetProcess,
  clients: readonly Dialer[],
  timeoutMs = 30_000,
): Promise<void> {
  const missing = () => {
    const inodes = socketsTo(server.port);
    return clients
      .map((c) => ({ ...c, holds: c.pid === undefined ? 0 : held(c.pid, inodes) }))
      .filter((c) => c.holds < c.atLeast)
      .map((c) => `${c.name} ${c.holds}/${c.atLeast}`);
  };
  try {
    await poll(() => missing().length === 0, `${server.name}'s clients to connect to it`, timeoutMs, 100);
  } catch (error) {
    throw new Error(`${(error as Error).message}; not connected: ${missing().join(", ")}`);
  }
}
