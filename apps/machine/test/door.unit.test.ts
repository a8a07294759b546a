import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, renameSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clearStaleDoor, DoorInUseError, openDoor, probeDoor } from "@unimatrix/machine";

const dir = mkdtempSync(join(tmpdir(), "umx-door-"));
let n = 0;
const fresh = () => join(dir, `d${++n}`, "machine.sock");

/** A socket file left behind by a process killed with SIGKILL while listening on it. */
function staleSocket(path: string): void {
  const script = `require("node:fs").mkdirSync(require("node:path").dirname(${JSON.stringify(path)}),{recursive:true});require("node:net").createServer().listen(${JSON.stringify(path)},()=>process.kill(process.pid,"SIGKILL"))`;
  spawnSync(process.execPath, ["-e", script]);
  if (!statSync(path).isSocket()) throw new Error("no stale socket");
}

describe("the door's stale rules", () => {
  it("a socket nobody listens on is refused on probe, so it is stale and replaced", async () => {
    const path = fresh();
    staleSocket(path);
    expect(await probeDoor(path)).toBe("refused");
    const server = await openDoor(path, () => ({ ok: true }));
    try {
      // The file now belongs to a live listener (an inode number may be reused, so it proves nothing).
      expect(await probeDoor(path)).toBe("live");
      expect(statSync(path).mode & 0o777).toBe(0o600);
    } finally {
      server.close();
    }
  });

  it("a live listener (even one that is not a daemon) is DoorInUseError and the file stays", async () => {
    const path = fresh();
    const other = createServer(() => {});
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(path, ".."), { recursive: true });
    await new Promise<void>((resolve) => other.listen(path, resolve));
    try {
      const inode = statSync(path).ino;
      await expect(openDoor(path, () => ({ ok: true }))).rejects.toThrow(DoorInUseError);
      await expect(clearStaleDoor(path)).rejects.toThrow(/EADDRINUSE: .*already serving/);
      expect(statSync(path).ino).toBe(inode);
    } finally {
      other.close();
    }
  });

  it.each([
    ["a probe that times out", "ETIMEDOUT"],
    ["a probe refused for permissions", "EACCES"],
  ])("%s never authorises deleting the door", async (_label, code) => {
    const path = fresh();
    staleSocket(path);
    const probe = () => Promise.reject(Object.assign(new Error(code), { code }));
    await expect(clearStaleDoor(path, probe)).rejects.toMatchObject({ code });
    expect(existsSync(path)).toBe(true);
  });

  it("a door whose inode changed while it was probed is not deleted (another daemon replaced it)", async () => {
    const path = fresh();
    staleSocket(path);
    const replacement = `${path}.new`;
    writeFileSync(replacement, "");
    const probe = async () => {
      renameSync(replacement, path);
      return "refused" as const;
    };
    const inode = statSync(replacement).ino;
    await clearStaleDoor(path, probe);
    expect(statSync(path).ino).toBe(inode);
  });

  it("no file: nothing to clear", async () => {
    await expect(clearStaleDoor(fresh())).resolves.toBeUndefined();
  });
});
