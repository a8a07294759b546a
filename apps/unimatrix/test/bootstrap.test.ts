import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { connectJson, OPERATOR_TOKEN, type System, startSystem } from "../../../services/gateway/test/system";

const run = promisify(execFile);
const script = join(__dirname, "..", "..", "..", "apps", "unimatrix", "dist", "bootstrap.js");

describe("npm run bootstrap", () => {
  let system: System;
  beforeAll(async () => {
    system = await startSystem("bootstrap");
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
  });

  it("creates a tenant, a cube, a role and an agent client, and prints a token that works", async () => {
    const { stdout } = await run(
      process.execPath,
      [script, "--tenant", "acme", "--cube", "launch", "--gateway", system.url],
      {
        env: { ...process.env, UMX_OPERATOR_TOKEN: OPERATOR_TOKEN },
      },
    );
    const field = (name: string) => new RegExp(`^${name}\\s+(\\S+)`, "m").exec(stdout)?.[1];
    const cubeId = field("cube")!;
    const roleId = field("role")!;
    const client = field("client")!;
    expect(client).toMatch(/^umx_client_/);
    expect(stdout).toContain(`${system.url}/mcp`);
    const cubes = await connectJson(system, "unimatrix.cube.v1.CubeService/ListCubes", {}, client);
    expect(cubes.status).toBe(200);
    expect((cubes.body.cubes as { id: string; name: string }[]).map((c) => [c.id, c.name])).toEqual([
      [cubeId, "launch"],
    ]);
    const seat = await connectJson(system, "unimatrix.cube.v1.CubeService/AttachSeat", { cubeId, roleId }, client);
    expect([seat.status, seat.body.outcome]).toEqual([200, "ATTACH_SEAT_OUTCOME_CREATED"]);
  });

  it("fails with a clear message when the operator token is wrong", async () => {
    await expect(
      run(process.execPath, [script, "--tenant", "x", "--gateway", system.url], {
        env: { ...process.env, UMX_OPERATOR_TOKEN: "umx_operator_not-the-right-one-000" },
      }),
    ).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/bootstrap failed: .*CreateTenant: unauthenticated/),
    });
  });
});
