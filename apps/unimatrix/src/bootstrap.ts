#!/usr/bin/env node
import { parseArgs } from "node:util";
import { commonEnv, readConfig } from "@unimatrix/service-kit/config";

const USAGE = `Usage: npm run bootstrap -- [options]

Creates a tenant (and its admin user), a cube with a default worker role, and an agent client
with write access to it, through the gateway's public Connect API, and prints their tokens.
Unimatrix must be running (npm start in another terminal).

Options:
  --tenant <name>       tenant to create (default: demo)
  --cube <name>         cube to create (default: "first cube")
  --directive <text>    the cube's directive (default: "Coordinate here.")
  --client <name>       agent client to issue (default: agent)
  --gateway <url>       the gateway's URL (default: UMX_GATEWAY_URL, else
                        http://127.0.0.1:<GATEWAY_PORT>, GATEWAY_PORT defaulting to 8080)
  -h, --help            print this text and exit

Environment:
  UMX_OPERATOR_TOKEN    the operator token; on the embedded default it is read from
                        <UMX_DATA_DIR>/operator-token when unset
  UMX_GATEWAY_URL       the gateway's URL, when --gateway is not given
  GATEWAY_PORT          the gateway's port on this host, when neither is given
`;

/** The gateway URL bootstrap talks to: `--gateway`, else `UMX_GATEWAY_URL`, else localhost on `GATEWAY_PORT`. */
async function gatewayUrl(option: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  let url = option ?? env.UMX_GATEWAY_URL;
  if (url === undefined) {
    // The gateway's own definition of GATEWAY_PORT (default and validation); loaded only when needed.
    const { gatewayEnv } = await import("@unimatrix/gateway");
    url = `http://127.0.0.1:${readConfig({ port: gatewayEnv.port }, env).port}`;
  }
  return url.replace(/\/$/, "");
}

/** "fetch failed" names neither the URL nor the cause: say both, and what to check. */
function unreachable(error: unknown, base: string): Error | undefined {
  if (!(error instanceof TypeError) || error.message !== "fetch failed") return undefined;
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? "no answer";
  return new Error(
    `cannot reach the gateway at ${base} (${why}); is Unimatrix running (npm start)? ` +
      "Give its URL with --gateway or UMX_GATEWAY_URL, or its port with GATEWAY_PORT.",
  );
}

/**
 * `npm run bootstrap -- --tenant acme`: with the operator token, creates a tenant (and its admin
 * user), a cube with a default worker role, and an agent client with write access to it, through
 * the gateway's public Connect API; prints the tokens and what to do next.
 */
async function main(): Promise<void> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      options: {
        tenant: { type: "string", default: "demo" },
        cube: { type: "string", default: "first cube" },
        directive: { type: "string", default: "Coordinate here." },
        client: { type: "string", default: "agent" },
        gateway: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (error) {
    process.stderr.write(`bootstrap: ${(error as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const base = await gatewayUrl(values.gateway as string | undefined);
  const { resolveOperatorToken } = await import("@unimatrix/service-kit/service");
  const { seedTenant } = await import("@unimatrix/service-kit/testing");
  const config = readConfig(commonEnv);
  const operator = resolveOperatorToken(config);
  if (!operator) throw new Error("UMX_OPERATOR_TOKEN is not set: the operator token is needed to create a tenant");
  // The same seeder the system tests start from, through the gateway's public Connect API.
  const seeded = await seedTenant(
    { connect: base },
    {
      operatorToken: operator,
      tenant: values.tenant as string,
      cube: { name: values.cube as string, directive: values.directive as string },
      role: { name: "worker", canBroadcast: true },
      clients: [values.client as string],
    },
  ).catch((error: unknown) => {
    throw unreachable(error, base) ?? error;
  });
  const client = seeded.clients[0]!;
  process.stdout.write(
    [
      `tenant   ${seeded.tenantId}`,
      `cube     ${seeded.cubeId}`,
      `role     ${seeded.roleId} (worker)`,
      `user     ${seeded.userToken}`,
      `client   ${client.token}`,
      "",
      "These tokens are shown once. Point an MCP client at the gateway, e.g.:",
      `  { "url": "${base}/mcp", "headers": { "Authorization": "Bearer ${client.token}" } }`,
      `then call seat_attach with cube_id ${seeded.cubeId} and role_id ${seeded.roleId}, and log_post.`,
      "",
    ].join("\n"),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`bootstrap failed: ${(error as Error).message}\n`);
  process.exit(1);
});
