// The agent host of the hook benchmark: a process of its own that starts each command and times
// it, as Claude Code starts a hook — and nothing else. The benchmark's own process runs cube and
// presence; timed from there, even `/bin/true` took p50 11.6 / p99 22 ms on a quiet machine (its
// event loop and collector), against 6.1 / 12.1 ms from a quiet process. Run by index.ts with
// `fork`: each message `{ file, args, input, env }` is answered `{ ms, code, stdout, stderr }`.
import { performance } from "node:perf_hooks";
import { runCommand } from "../test/run-command";

export interface HostRun {
  file: string;
  args: string[];
  input: string;
  env?: Record<string, string>;
}

export interface HostResult {
  ms: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

async function run(request: HostRun): Promise<HostResult> {
  const started = performance.now();
  const result = await runCommand(request.file, request.args, request.input, request.env);
  return { ms: performance.now() - started, ...result };
}

process.on("message", (request: HostRun) => {
  run(request).then(
    (result) => process.send?.(result),
    (error: Error) => process.send?.({ ms: Number.NaN, code: null, stdout: "", stderr: error.message }),
  );
});
process.on("disconnect", () => process.exit(0));
