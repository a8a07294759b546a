// Compiles the hook's native client (native/unimatrix-hook.c → dist/unimatrix-hook-native) when
// this machine has a C compiler (cc, gcc or clang). The hook runs after every tool call: curl's own
// start (its TLS libraries) takes longer than the whole round trip should, and the native client
// starts in about a millisecond. Without a compiler the build goes on: `bin/unimatrix-hook` uses
// curl, then the Node hook, and says nothing is wrong.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(here, "native", "unimatrix-hook.c");
const output = join(here, "dist", "unimatrix-hook-native");

const compiler = ["cc", "gcc", "clang"].find(
  (name) => spawnSync(name, ["--version"], { stdio: "ignore" }).status === 0,
);
rmSync(output, { force: true });
if (compiler === undefined) {
  process.stdout.write("hook: no C compiler here; unimatrix-hook will use curl (slower to start)\n");
} else {
  const build = (extra) =>
    spawnSync(compiler, ["-O2", "-Wall", "-Wextra", "-Werror", ...extra, "-o", output, source], { stdio: "pipe" });
  // Linked statically where the C library allows it: no dynamic loader at each start (~0.3–0.5 ms
  // of a ~10 ms hook, measured from a quiet process); else as usual.
  let built = build(["-static"]);
  if (built.status !== 0) built = build([]);
  if (built.status !== 0) {
    process.stderr.write(built.stderr);
    rmSync(output, { force: true });
    process.stdout.write(`hook: ${compiler} could not build the native client; unimatrix-hook will use curl\n`);
  }
}
