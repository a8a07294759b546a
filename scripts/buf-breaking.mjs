// `buf breaking` (FILE rules, buf.yaml) of proto/ against the contract as last landed on main, so
// an incompatible change to a released message fails `npm test`. Offline: buf reads the local git
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
const against = has("refs/heads/main")
  ? ".git#branch=main,subdir=proto"
  : has("refs/remotes/origin/main")
    ? ".git#ref=refs/remotes/origin/main,subdir=proto"
    : null;
if (!against) {
  console.error("buf breaking: no main branch to compare against (fetch main first)");
  process.exit(1);
}
execFileSync(join(root, "node_modules", ".bin", "buf"), ["breaking", "proto", "--against", against], {
  cwd: root,
  stdio: "inherit",
});
console.log(`buf breaking: proto/ is compatible with ${against.split(",")[0]}`);
