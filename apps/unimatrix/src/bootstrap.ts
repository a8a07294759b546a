#!/usr/bin/env node
import { parseArgs } from "node:util";
import { commonEnv, readConfig } from "@unimatrix/service-kit/config";
import { resolveOperatorToken } from "@unimatrix/service-kit/service";
import { seedTenant } from "@unimatrix/service-kit/testing";

/**
 * `npm run bootstrap -- --tenant acme`: with the operator token, creates a tenant (and its admin
 * user), a cube with a default worker role, and an agent client with write access to it, through
 * the gateway's public Connect API; prints the tokens and what to do next.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tenant: { type: "string", default: "demo" },
      cube: { type: "string", default: "first cube" },
      directive: { type: "string", default: "Coordinate here." },
      client: { type: "string", default: "agent" },
      gateway: { type: "string", default: process.env.UMX_GATEWAY_URL ?? "http://127.0.0.1:8080" },
    },
  });
  const config = readConfig(commonEnv);
  const operator = resolveOperatorToken(config);
  if (!operator) throw new Error("UMX_OPERATOR_TOKEN is not set: the operator token is needed to create a tenant");
  const base = values.gateway!.replace(/\/$/, "");
  // The same seeder the system tests start from, through the gateway's public Connect API.
  const seeded = await seedTenant(
    { connect: base },
    {
      operatorToken: operator,
      tenant: values.tenant!,
      cube: { name: values.cube!, directive: values.directive! },
      role: { name: "worker", canBroadcast: true },
      clients: [values.client!],
    },
  );
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
