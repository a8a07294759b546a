// Tests that start the real `npm start` entry point need the compiled tree; build it if stale.
const { execFileSync } = require("node:child_process");
const { join } = require("node:path");

module.exports = async () => {
  const root = join(__dirname, "..");
  execFileSync(join(root, "node_modules", ".bin", "tsc"), ["--build"], { cwd: root, stdio: "inherit" });
};
