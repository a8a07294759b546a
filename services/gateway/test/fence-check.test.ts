import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { call, type System, seedTenant, startSystem } from "./system";

/** The `curl` fence-check recipe exactly as the cube README documents it. */
function recipe(): string {
  const readme = readFileSync(join(__dirname, "..", "..", "cube", "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("### Fence check from a git hook or CI job"));
  const match = /```sh\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error("the cube README has no fence-check recipe");
  return match[1];
}

/** Runs the recipe with its variables; resolves with the shell's exit code. */
function runRecipe(env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    execFile("sh", ["-c", recipe()], { env: { PATH: process.env.PATH ?? "", ...env } }, (error) => {
      resolve(error ? Number((error as { code?: number }).code ?? 1) : 0);
    });
  });
}

describe("the documented CheckFence curl recipe, through the gateway", () => {
  let system: System;
  beforeAll(async () => {
    system = await startSystem("gw_fence_recipe");
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  test("exits 0 only while the fence holds", async () => {
    const t = await seedTenant(system, "fence-recipe", 1);
    const client = t.clients[0] as { token: string };
    const seat = await call<{ sessionToken: string }>(
      system,
      "unimatrix.cube.v1.CubeService/AttachSeat",
      { cubeId: t.cubeId, roleId: t.roleId, hostname: "ci" },
      client.token,
    );
    const entry = await call<{ entry: { id: string } }>(
      system,
      "unimatrix.cube.v1.ActivityService/AppendEntry",
      { cubeId: t.cubeId, message: "fix the build", visibility: "VISIBILITY_BROADCAST" },
      t.user,
    );
    const target = { cubeId: t.cubeId, entryId: entry.entry.id };
    const claim = await call<{ claim: { fence: string } }>(
      system,
      "unimatrix.cube.v1.ActivityService/ClaimEntry",
      target,
      seat.sessionToken,
    );
    expect(claim.claim.fence).toBe("1");
    const env = (fence: string, token = t.user) => ({
      UNIMATRIX_URL: system.url,
      UNIMATRIX_TOKEN: token,
      CUBE: t.cubeId,
      ENTRY: entry.entry.id,
      FENCE: fence,
    });
    expect(await runRecipe(env("1"))).toBe(0);
    expect(await runRecipe(env("1", seat.sessionToken))).toBe(0);
    expect(await runRecipe(env("2"))).not.toBe(0);
    // Released and claimed again: fence 2 holds, fence 1 no longer does.
    await call(system, "unimatrix.cube.v1.ActivityService/ReleaseClaim", target, seat.sessionToken);
    expect(await runRecipe(env("1"))).not.toBe(0);
    await call(system, "unimatrix.cube.v1.ActivityService/ClaimEntry", target, seat.sessionToken);
    expect(await runRecipe(env("2"))).toBe(0);
    expect(await runRecipe(env("1"))).not.toBe(0);
    // A bad token or an unknown entry fails too.
    expect(await runRecipe(env("2", "umx_user_nope_nope"))).not.toBe(0);
    expect(await runRecipe({ ...env("2"), ENTRY: crypto.randomUUID() })).not.toBe(0);
  }, 60_000);
});
