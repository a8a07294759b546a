#!/usr/bin/env node
// `unimatrix hook …` in Node, for the `unimatrix-hook` sh client when it cannot take the fast path
// (no curl, no daemon at the door, --help, …): the same as the `unimatrix` command's `hook`, loaded
// from the bundled CLI (apps/machine/scripts/bundle-hook.mjs) so it starts as fast as Node can.
let cli;
try {
  cli = require("../dist/hook-bundle.js");
} catch (error) {
  if (error.code !== "MODULE_NOT_FOUND") throw error;
  cli = require("../dist/cli.js");
}
cli.runCli(["hook", ...process.argv.slice(2)]).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`unimatrix hook: ${error?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
