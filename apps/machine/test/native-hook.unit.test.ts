import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HOOK_BIN, runCommand } from "./world";

/** The native client the build compiles where a C compiler is. */
const NATIVE = join(HOOK_BIN, "..", "dist", "unimatrix-hook-native");
const hasCompiler = spawnSync("cc", ["--version"], { stdio: "ignore" }).status === 0;

/**
 * A bare door: answers the hook request with `body` and never answers anything after it, so a
 * client that waited for `handed`'s answer would sit until its 5 s socket timeout and say so.
 * Resolves with every request line the door read, once the client has closed the connection.
 */
function bareDoor(path: string, body: string): { server: Server; lines: Promise<string[]> } {
  let resolveLines: (lines: string[]) => void = () => {};
  const lines = new Promise<string[]>((resolve) => {
    resolveLines = resolve;
  });
  const server = createServer((socket) => {
    let seen = "";
    let answered = false;
    socket.on("data", (chunk: Buffer) => {
      seen += chunk.toString("latin1");
      if (!answered && seen.includes("\r\n\r\n")) {
        answered = true;
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      }
    });
    socket.on("error", () => {});
    // Request lines, wherever they start (a request's body is not followed by a line break).
    socket.on("close", () => resolveLines(seen.match(/(GET|POST) \S+ HTTP\/1\.1/g) ?? []));
  });
  server.listen(path);
  return { server, lines };
}

(hasCompiler ? describe : describe.skip)("the native hook client (unimatrix-hook-native)", () => {
  const dir = mkdtempSync(join(tmpdir(), "umx-native-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const input = JSON.stringify({ session_id: "s1", hook_event_name: "PostToolUse" });

  it("prints the answer, then sends handed on the same connection and exits without waiting for its answer", async () => {
    expect(existsSync(NATIVE)).toBe(true);
    const path = join(dir, "printed.sock");
    const door = bareDoor(path, '{"hookSpecificOutput":{}}\n');
    try {
      const run = await runCommand(NATIVE, [path, "post-tool-use", "claude-code", "claude"], input, {
        UNIMATRIX_DRONE_TOKEN: "t1",
      });
      expect(run).toEqual({ code: 0, stdout: '{"hookSpecificOutput":{}}\n', stderr: "" });
      expect(await door.lines).toEqual(["POST /v1/hook/post-tool-use HTTP/1.1", "POST /v1/handed HTTP/1.1"]);
    } finally {
      door.server.close();
    }
  });

  it("at a door nobody answers it reads nothing: exits 111, or becomes its fallback with UNIMATRIX_HOOK_NATIVE=0 and stdin whole", async () => {
    const absent = join(dir, "absent.sock");
    const args = [absent, "post-tool-use", "claude-code", "claude"];
    expect(await runCommand(NATIVE, args, input, {})).toEqual({ code: 111, stdout: "", stderr: "" });
    const fallback = ["/bin/sh", "-c", 'printf "%s|%s|" "$UNIMATRIX_HOOK_NATIVE" "$1"; cat', "fallback", "second"];
    const run = await runCommand(NATIVE, [...args, ...fallback], input, { UNIMATRIX_HOOK_NATIVE: "1" });
    expect(run).toEqual({ code: 0, stdout: `0|second|${input}`, stderr: "" });
  });

  it("an empty answer prints nothing and hands nothing", async () => {
    const path = join(dir, "empty.sock");
    const door = bareDoor(path, "");
    try {
      const run = await runCommand(NATIVE, [path, "post-tool-use", "claude-code", "claude"], input, {});
      expect(run).toEqual({ code: 0, stdout: "", stderr: "" });
      expect(await door.lines).toEqual(["POST /v1/hook/post-tool-use HTTP/1.1"]);
    } finally {
      door.server.close();
    }
  });
});
