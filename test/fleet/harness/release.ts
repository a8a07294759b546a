import { execFileSync, spawn } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";

/** The repository root (this file is test/fleet/harness/release.ts). */
export const REPO_ROOT = join(__dirname, "..", "..", "..");

/** The release the upgrade test starts from (`test/fleet/previous-release.json`). */
export interface ReleaseRef {
  readonly version: string;
  readonly commit: string;
}

/** A built tree of a release, ready to run `apps/unimatrix/dist/main.js`. */
export interface BuiltRelease extends ReleaseRef {
  /** The full commit id. */
  readonly sha: string;
  /** The tree's root. */
  readonly root: string;
  /** How long this run spent building it (0: found built in the cache). */
  readonly buildMs: number;
  /** Where the build's output went. */
  readonly logPath: string;
}

/** The file a finished build leaves in its tree: its presence is what makes the cache valid. */
const BUILT_MARKER = ".unimatrix-release-built.json";

/** The previous release, as recorded in `test/fleet/previous-release.json`. */
export function previousRelease(): ReleaseRef {
  return JSON.parse(readFileSync(join(REPO_ROOT, "test", "fleet", "previous-release.json"), "utf8")) as ReleaseRef;
}

function git(args: string[]): string {
  return execFileSync("git", args, { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

/**
 * Why the release cannot be built from this clone (no history for its commit: a shallow clone),
 * or undefined when it can.
 */
export function unavailableReason(release: ReleaseRef): string | undefined {
  try {
    git(["rev-parse", "--verify", "--quiet", `${release.commit}^{commit}`]);
    return undefined;
  } catch {
    let shallow = "unknown";
    try {
      shallow = git(["rev-parse", "--is-shallow-repository"]);
    } catch {}
    return `commit ${release.commit} of release ${release.version} is not in this clone's history (shallow: ${shallow}); fetch it (git fetch --unshallow) to run the upgrade test`;
  }
}

/** Runs `command args` in `cwd`, its output appended to `log`; rejects on a non-zero exit. */
function run(command: string, args: string[], cwd: string, logPath: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const log = createWriteStream(logPath, { flags: "a" });
    log.write(`\n$ ${command} ${args.join(" ")}   (in ${cwd}, ${new Date().toISOString()})\n`);
    const child = spawn(command, args, { cwd, env: process.env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      log.end();
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args.join(" ")} failed (${code ?? signal}) in ${cwd}; output in ${logPath}`));
    });
  });
}

/** Whether a process with this id runs (signal 0 only checks). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes `<root>.building-<pid>` directories whose builder is gone (an interrupted run's leftovers, ~1 GB each). */
function removeAbandonedBuilds(root: string): void {
  const prefix = `${basename(root)}.building-`;
  for (const name of readdirSync(dirname(root))) {
    if (name.startsWith(prefix) && !alive(Number(name.slice(prefix.length))))
      rmSync(join(dirname(root), name), { recursive: true, force: true });
  }
}

/**
 * The release's tree, built: `git archive <commit>` unpacked into a directory of its own, then
 * `npm ci --prefer-offline` (its postinstall generates and builds) and `npm run build`. Cached in
 * `os.tmpdir()/unimatrix-release-<sha>` (valid once the build finished and left its marker), so a
 * second run only checks the marker; a fresh machine builds it (into a temporary directory renamed
 * into place, so an interrupted build is never taken for a finished one).
 */
export async function buildRelease(release: ReleaseRef): Promise<BuiltRelease> {
  const sha = git(["rev-parse", "--verify", `${release.commit}^{commit}`]);
  const root = join(tmpdir(), `unimatrix-release-${sha}`);
  const logPath = `${root}.build.log`;
  const launcher = join(root, "apps", "unimatrix", "dist", "main.js");
  if (existsSync(join(root, BUILT_MARKER)) && existsSync(launcher))
    return { ...release, sha, root, buildMs: 0, logPath };
  const startedAt = Date.now();
  removeAbandonedBuilds(root);
  const staging = `${root}.building-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    // git archive | tar -x: a plain tree (no worktree registered in this clone to clean up later).
    await run("sh", ["-c", `git -C '${REPO_ROOT}' archive ${sha} | tar -x -C '${staging}'`], staging, logPath);
    await run("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"], staging, logPath);
    await run("npm", ["run", "build"], staging, logPath);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw error;
  }
  const buildMs = Date.now() - startedAt;
  writeFileSync(join(staging, BUILT_MARKER), JSON.stringify({ ...release, sha, buildMs, builtAt: new Date() }));
  rmSync(root, { recursive: true, force: true });
  renameSync(staging, root);
  return { ...release, sha, root, buildMs, logPath };
}

/**
 * Runs a tree's migration command against `databaseUrl`, as the chart's migration Job does
 * (`node apps/unimatrix/dist/migrate.js`); resolves with its output, rejects on failure.
 */
export function migrate(root: string, databaseUrl: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, "apps", "unimatrix", "dist", "migrate.js")], {
      cwd: root,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATABASE_URL: databaseUrl },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve(output.trim()) : reject(new Error(`migrate in ${root} exited ${code}: ${output}`)),
    );
  });
}
