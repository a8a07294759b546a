import { spawn } from "node:child_process";

/** What a command printed and how it ended. */
export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `file` to its end with `input` on stdin, as an agent host runs a hook. Kept apart from the
 * test world so the hook benchmark's quiet host process can use it without loading any service.
 */
export function runCommand(
  file: string,
  args: readonly string[],
  input: string,
  env: NodeJS.ProcessEnv = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.on("error", () => {}); // a command that exits without reading its input
    child.stdin.end(input);
  });
}
