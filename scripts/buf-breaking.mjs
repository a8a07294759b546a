// `buf breaking` (FILE rules, buf.yaml) of proto/ against the contract as last landed on main, so
// an incompatible change to a released message fails `npm test`. "Last landed" is the merge base
// of HEAD and main: a branch is judged against the main it contains, not against messages main
// gained after it forked (those would read as deletions). Offline: buf reads the local git
// objects (works in worktrees too). On main itself it compares main with main and passes.
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const git = (...args) =>
  execFileSync("git", args, { cwd: root, stdio: ["ignore", "pipe", "ignore"] })
    .toString()
    .trim();
const has = (ref) => {
  try {
    git("rev-parse", "--verify", "--quiet", `${ref}^{commit}`);
    return true;
  } catch {
    return false;
  }
};
const main = has("refs/heads/main") ? "main" : has("refs/remotes/origin/main") ? "origin/main" : null;
if (!main) {
  console.error("buf breaking: no main branch to compare against (fetch main first)");
  process.exit(1);
}
const base = git("merge-base", "HEAD", main);
const against = `.git#ref=${base},subdir=proto`;
execFileSync(join(root, "node_modules", ".bin", "buf"), ["breaking", "proto", "--against", against], {
  cwd: root,
  stdio: "inherit",
});
console.log(`buf breaking: proto/ is compatible with ${main} as of ${base.slice(0, 12)} (merge base)`);
