import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..", "..");
const BUF = join(ROOT, "node_modules", ".bin", "buf");

/** `buf breaking` of a changed copy of proto/ against proto/ as it is (the FILE rules of buf.yaml). */
function breakingAfter(change: (dir: string) => void): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), "umx-breaking-"));
  try {
    cpSync(join(ROOT, "proto"), join(dir, "proto"), { recursive: true, filter: (p) => !p.includes("node_modules") });
    cpSync(join(ROOT, "buf.yaml"), join(dir, "buf.yaml"));
    change(join(dir, "proto"));
    const run = spawnSync(BUF, ["breaking", "proto", "--against", join(ROOT, "proto")], { cwd: dir });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("buf breaking guards the released contract", () => {
  const file = "unimatrix/cube/v1/cube_service.proto";

  test("an unchanged contract passes", () => {
    expect(breakingAfter(() => {}).status).toBe(0);
  });

  test("renaming or renumbering a released field fails", () => {
    const renamed = breakingAfter((dir) => {
      const path = join(dir, file);
      writeFileSync(path, readFileSync(path, "utf8").replace("string hostname = 5", "string host_name = 5"));
    });
    expect(renamed.status).not.toBe(0);
    expect(renamed.output).toMatch(/AttachSeatRequest.*changed name from "hostname" to "host_name"/);
  });

  test("npm test runs it against main (scripts/buf-breaking.mjs in the lint step)", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(pkg.scripts.lint).toContain("node scripts/buf-breaking.mjs");
    const script = readFileSync(join(ROOT, "scripts", "buf-breaking.mjs"), "utf8");
    expect(script).toContain('git("merge-base", "HEAD", main)');
    expect(script).toMatch(/\.git#ref=\$\{base\},subdir=proto/);
  });
});
