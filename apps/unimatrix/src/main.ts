#!/usr/bin/env node
/**
 * The `unimatrix` command. `unimatrix machine …` and `unimatrix hook …` are the machine side
 * (@unimatrix/machine), loaded without any service so a hook starts fast; anything else runs
 * services (`unimatrix [service ...]`, serve.ts).
 */
const HELP = `Usage: unimatrix [service ...]       run services (all four by default): cube, device, presence, gateway
       unimatrix machine run [options]   the machine daemon (presence link, local door, notice spool)
       unimatrix machine status          the running daemon's state
       unimatrix hook <event>            an agent host's hook (session-start, post-tool-use, …)

Run "unimatrix machine --help" or "unimatrix hook --help" for more.
`;

const argv = process.argv.slice(2);
const command = argv[0];
if (command === "--help" || command === "-h" || command === "help") {
  process.stdout.write(HELP);
} else if (command === "machine" || command === "hook") {
  // A hook runs after every tool call as a fresh process: it loads the CLI bundled into one file
  // (apps/machine/scripts/bundle-hook.mjs) with a plain require — an import() would start Node's
  // ESM loader, which alone costs about as much CPU as the hook's own work.
  // A tree built by `tsc --build` alone has no bundle: the module tree then.
  const load = (): Promise<typeof import("@unimatrix/machine/cli")> => {
    if (command === "hook") {
      try {
        return Promise.resolve(require("@unimatrix/machine/hook-bundle") as typeof import("@unimatrix/machine/cli"));
      } catch (error) {
        if ((error as { code?: unknown }).code !== "MODULE_NOT_FOUND") throw error;
      }
    }
    return import("@unimatrix/machine/cli");
  };
  load()
    .then(({ runCli }) => runCli(argv))
    .then(
      (code) => process.exit(code),
      (error: unknown) => {
        process.stderr.write(`unimatrix ${command}: ${(error as Error).stack ?? String(error)}\n`);
        process.exit(1);
      },
    );
} else {
  void import("./serve.js");
}
