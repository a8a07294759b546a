#!/usr/bin/env node
import { parseArgs } from "node:util";
import { commonEnv, readConfig, resolveOperatorToken } from "@unimatrix/service-kit";

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
  const call = async <T>(path: string, body: unknown, token: string): Promise<T> => {
    const response = await fetch(`${base}/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as T & { code?: string; message?: string };
    if (!response.ok) throw new Error(`${path}: ${answer.code ?? response.status}: ${answer.message ?? ""}`);
    return answer;
  };
  const tenant = await call<{ tenant: { id: string }; adminUserToken: string }>(
    "unimatrix.cube.v1.IdentityService/CreateTenant",
    { name: values.tenant, adminDisplayName: `${values.tenant} admin` },
    operator,
  );
  const user = tenant.adminUserToken;
  const cube = await call<{ cube: { id: string } }>(
    "unimatrix.cube.v1.CubeService/CreateCube",
    { requestKey: crypto.randomUUID(), name: values.cube, directive: values.directive },
    user,
  );
  const role = await call<{ role: { id: string } }>(
    "unimatrix.cube.v1.CubeService/CreateRole",
    { cubeId: cube.cube.id, name: "worker", isDefault: true, canBroadcast: true, roleClass: "ROLE_CLASS_WORKER" },
    user,
  );
  const client = await call<{ client: { id: string }; token: string }>(
    "unimatrix.cube.v1.IdentityService/IssueClient",
    { name: values.client },
    user,
  );
  await call(
    "unimatrix.cube.v1.IdentityService/SetCubeGrant",
    { clientId: client.client.id, cubeId: cube.cube.id, access: "CUBE_ACCESS_WRITE" },
    user,
  );
  process.stdout.write(
    [
      `tenant   ${tenant.tenant.id}`,
      `cube     ${cube.cube.id}`,
      `role     ${role.role.id} (worker)`,
      `user     ${user}`,
      `client   ${client.token}`,
      "",
      "These tokens are shown once. Point an MCP client at the gateway, e.g.:",
      `  { "url": "${base}/mcp", "headers": { "Authorization": "Bearer ${client.token}" } }`,
      `then call seat_attach with cube_id ${cube.cube.id} and role_id ${role.role.id}, and log_post.`,
      "",
    ].join("\n"),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`bootstrap failed: ${(error as Error).message}\n`);
  process.exit(1);
});
