import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { connectJson, OPERATOR_TOKEN, type System, startSystem } from "../../../services/gateway/test/system";

const run = promisify(execFile);
const script = join(__dirname, "..", "..", "..", "apps", "unimatrix", "dist", "bootstrap.js");

/** The environment of a bootstrap run: no gateway URL of the caller's shell leaks in. */
function envWith(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!("UMX_GATEWAY_URL" in extra)) delete env.UMX_GATEWAY_URL;
  return env;
}

/** A port on which nothing listens (taken, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("npm run bootstrap without a system", () => {
  it("answers --help with its options and the variables it reads", async () => {
    const { stdout } = await run(process.execPath, [script, "--help"], { env: envWith({}) });
    for (const word of ["--tenant", "--gateway", "UMX_GATEWAY_URL", "GATEWAY_PORT", "UMX_OPERATOR_TOKEN"]) {
      expect(stdout).toContain(word);
    }
  });

  it("refuses an unknown option with the usage", async () => {
    await expect(run(process.execPath, [script, "--tenat", "x"], { env: envWith({}) })).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/Unknown option '--tenat'[\s\S]*Usage: npm run bootstrap/),
    });
  });

  it("names the URL it tried, taken from GATEWAY_PORT, when nothing answers there", async () => {
    const port = await closedPort();
    await expect(
      run(process.execPath, [script, "--tenant", "x"], {
        env: envWith({ GATEWAY_PORT: String(port), UMX_OPERATOR_TOKEN: OPERATOR_TOKEN }),
      }),
    ).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining(
        `bootstrap failed: cannot reach the gateway at http://127.0.0.1:${port} (ECONNREFUSED)`,
      ),
    });
  });
});

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

  it("finds the gateway on GATEWAY_PORT when no URL is given", async () => {
    const port = new URL(system.url).port;
    const { stdout } = await run(process.execPath, [script, "--tenant", "by-port"], {
      env: envWith({ GATEWAY_PORT: port, UMX_OPERATOR_TOKEN: OPERATOR_TOKEN }),
    });
    expect(stdout).toMatch(/^client\s+umx_client_/m);
    expect(stdout).toContain(`"url": "http://127.0.0.1:${port}/mcp"`);
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
