import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, statSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, parse } from "node:path";
import { DaemonProcess, eventually } from "./world";

/** A token the daemon accepts in form (it never reaches presence: it stops at the door). */
const TOKEN = "umx_machine_doorrules_0123456789abcdef";
const NOBODY = 65534;

/**
 * Lets `nobody` reach the checkout (and the Node binary inside it): a clone in a `mktemp -d`
 * folder (0700) is closed to other users. Grants traverse only (o+x, no listing) on the folders
 * above `path` that lack it; what is inside a checkout is world-readable already.
 */
function letOthersTraverse(path: string): void {
  const root = parse(path).root;
  for (let dir = dirname(path); dir !== root; dir = dirname(dir)) {
    const mode = statSync(dir).mode;
    if ((mode & 0o001) === 0) chmodSync(dir, (mode & 0o7777) | 0o001);
  }
}

/** A plain listener on `path` in its own process (not a daemon), resolved once it listens. */
async function listener(path: string, backlog: number): Promise<ChildProcess> {
  const script = `require("node:net").createServer().listen({path:${JSON.stringify(path)},backlog:${backlog}},()=>{require("node:fs").chmodSync(${JSON.stringify(path)},0o600);process.stdout.write("ready\\n")})`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve) => child.stdout?.once("data", resolve));
  return child;
}

/** Connects to `path`: the socket, or the error code. */
function dial(path: string): Promise<Socket | string> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once("connect", () => resolve(socket));
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
  });
}

/** `unimatrix machine run` on `door` with nothing else that could touch it (no presence behind). */
function daemonOn(dir: string, door: string, as?: { uid: number; gid: number }): DaemonProcess {
  return new DaemonProcess(
    ["--presence", "127.0.0.1:1", "--door", door, "--spool", join(dir, "spool")],
    { UNIMATRIX_MACHINE_TOKEN: TOKEN },
    as,
  );
}

describe("the door's stale rules with real processes: only a refused connection clears a door", () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const child of children) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
  });

  it("a listener that does not answer (stopped, its backlog full): the daemon exits 1 on EAGAIN and the door stays its", async () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-door-stopped-"));
    mkdirSync(join(dir, "run"), { mode: 0o700 });
    const door = join(dir, "run", "machine.sock");
    const held = await listener(door, 1);
    children.push(held);
    const inode = statSync(door).ino;
    held.kill("SIGSTOP");
    // Fill its backlog: connections are queued until one is refused for want of room (EAGAIN).
    const queued: Socket[] = [];
    let refusal = "";
    for (let i = 0; i < 16 && refusal === ""; i++) {
      const outcome = await dial(door);
      if (typeof outcome === "string") refusal = outcome;
      else queued.push(outcome);
    }
    expect(refusal).toBe("EAGAIN");

    const daemon = daemonOn(dir, door);
    expect(await daemon.exited).toBe(1);
    expect(daemon.stderr).toMatch(/^unimatrix machine run: connect EAGAIN .*machine\.sock\n$/);
    expect(daemon.named("door_open")).toEqual([]);
    expect(statSync(door).ino).toBe(inode);

    // The listener resumes and still holds its door: a connection is accepted there.
    for (const socket of queued) socket.destroy();
    held.kill("SIGCONT");
    let after: Socket | string = "";
    await eventually(async () => {
      after = await dial(door);
      return typeof after !== "string";
    }, "the resumed listener accepting");
    (after as unknown as Socket).destroy();
  });

  it("a door the daemon may not connect to (another user's 0600 socket, EACCES): the daemon exits 1 and deletes nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-door-eacces-"));
    chmodSync(dir, 0o755);
    const run = join(dir, "run");
    mkdirSync(run, { mode: 0o700 });
    chownSync(run, NOBODY, NOBODY); // the daemon's own directory…
    const door = join(run, "machine.sock");
    const held = await listener(door, 16); // …holding root's owner-only socket
    children.push(held);
    const inode = statSync(door).ino;
    const spool = join(dir, "spool");
    mkdirSync(spool, { mode: 0o700 });
    chownSync(spool, NOBODY, NOBODY);

    letOthersTraverse(process.execPath);
    letOthersTraverse(__filename);
    const daemon = daemonOn(dir, door, { uid: NOBODY, gid: NOBODY });
    expect(await daemon.exited).toBe(1);
    expect(daemon.stderr).toMatch(/^unimatrix machine run: connect EACCES .*machine\.sock\n$/);
    expect(statSync(door).ino).toBe(inode);
    const still = await dial(door);
    expect(typeof still).not.toBe("string");
    (still as Socket).destroy();
  });
});
