import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, renameSync, statSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, parse } from "node:path";
import type { Duplex } from "node:stream";
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

/** The test-only preload that holds the daemon between its door probe and what follows. */
const HOLD = join(__dirname, "door-hold.cjs");

/** A socket file left behind by a listener killed with SIGKILL: nobody listens on it (ECONNREFUSED). */
function staleSocket(path: string): void {
  const script = `require("node:net").createServer().listen(${JSON.stringify(path)},()=>process.kill(process.pid,"SIGKILL"))`;
  spawnSync(process.execPath, ["-e", script]);
  if (!statSync(path).isSocket()) throw new Error(`no stale socket at ${path}`);
}

/** The first line the daemon's preload writes on its fd 3 channel. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const channel = child.stdio[3] as Duplex;
    let text = "";
    channel.setEncoding("utf8");
    channel.on("data", (chunk: string) => {
      text += chunk;
      if (text.includes("\n")) resolve(text.slice(0, text.indexOf("\n")));
    });
    child.once("exit", (code) => reject(new Error(`the daemon exited (${code}) before its door probe`)));
  });
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
function daemonOn(
  dir: string,
  door: string,
  as?: { uid: number; gid: number },
  env: NodeJS.ProcessEnv = {},
): DaemonProcess {
  return new DaemonProcess(
    ["--presence", "127.0.0.1:1", "--door", door, "--spool", join(dir, "spool")],
    { UNIMATRIX_MACHINE_TOKEN: TOKEN, ...env },
    as,
    env.UMX_TEST_HELD_DOOR !== undefined,
  );
}

describe("the door's stale rules with real processes: only a refused connection clears a door", () => {
  const children: ChildProcess[] = [];
  const daemons: DaemonProcess[] = [];
  afterAll(async () => {
    for (const daemon of daemons) await daemon.terminate();
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

  it("a stale door replaced by a live one between the refused probe and the delete: the daemon deletes nothing and exits 1 EADDRINUSE", async () => {
    const dir = mkdtempSync(join(tmpdir(), "umx-door-swapped-"));
    mkdirSync(join(dir, "run"), { mode: 0o700 });
    const door = join(dir, "run", "machine.sock");
    staleSocket(door);
    const stale = statSync(door).ino;
    const next = `${door}.next`;
    const replacement = await listener(next, 16);
    children.push(replacement);
    const inode = statSync(next).ino;
    expect(inode).not.toBe(stale);

    const daemon = daemonOn(dir, door, undefined, {
      NODE_OPTIONS: `--require ${JSON.stringify(HOLD)}`,
      UMX_TEST_HELD_DOOR: door,
    });
    daemons.push(daemon);
    // The daemon stat'ed the stale door and its probe was refused; it is held before hearing so.
    expect(await firstLine(daemon.child)).toBe("probed ECONNREFUSED");
    expect(statSync(door).ino).toBe(stale);
    renameSync(next, door); // another daemon's door takes the path (a new inode)
    (daemon.child.stdio[3] as Duplex).write("g");

    await eventually(() => !daemon.running || daemon.named("door_open").length > 0, "the daemon exiting or opening");
    expect(daemon.named("door_open")).toEqual([]);
    expect(await daemon.exited).toBe(1);
    expect(daemon.stderr).toMatch(
      /^unimatrix machine run: EADDRINUSE: a unimatrix machine daemon is already serving .*machine\.sock; stop it first/,
    );
    expect(statSync(door).ino).toBe(inode);
    const still = await dial(door);
    expect(typeof still).not.toBe("string");
    (still as Socket).destroy();
  });
});
