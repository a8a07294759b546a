import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { AGENT_CLIENT, SCOPE, signInThroughPages, TestProvider } from "./oidc-provider";
import { call, freePort, type System, seedTenant, startSystem } from "./system";

// A stock MCP SDK client (v1) with its OAuth provider interface: the 401 names the metadata, the
// client discovers the provider from it, runs authorization code + PKCE with the resource
// indicator, and calls tools as the client the person's subject is linked to.

/** The host side of the SDK's OAuth: a pre-registered public client, everything kept in memory. */
class MemoryOAuth implements OAuthClientProvider {
  authorizationUrl: URL | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = "";

  get redirectUrl(): string {
    return AGENT_CLIENT.redirect;
  }

  get clientMetadata() {
    return {
      client_name: "test agent",
      redirect_uris: [AGENT_CLIENT.redirect],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    };
  }

  clientInformation(): OAuthClientInformationMixed {
    return { client_id: AGENT_CLIENT.id };
  }

  tokens(): OAuthTokens | undefined {
    return this.#tokens;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.#tokens = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }

  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }

  codeVerifier(): string {
    return this.#verifier;
  }
}

describe("an MCP client signs in through the company's identity provider", () => {
  let provider: TestProvider;
  let system: System;
  let tenant: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    provider = await TestProvider.start(base);
    const oidc = { oidcIssuer: provider.issuer, oidcAudience: base, oidcScope: SCOPE };
    system = await startSystem("gw_oidc_mcp", { port, ...oidc }, "postgres", oidc);
    tenant = await seedTenant(system, "oidc-mcp", 1);
    await call(
      system,
      "unimatrix.cube.v1.IdentityService/LinkIdentity",
      { subject: "agent-owner", clientId: tenant.clients[0]!.id },
      tenant.user,
    );
  }, 120_000);
  afterAll(async () => {
    await system?.stop();
    await provider?.stop();
  });

  test("the stock SDK client discovers the provider from the 401, completes the code flow and calls a tool as the linked client", async () => {
    const oauth = new MemoryOAuth();
    const url = new URL(`${system.url}/mcp`);
    const first = new StreamableHTTPClientTransport(url, { authProvider: oauth });
    await expect(new Client({ name: "agent", version: "1.0.0" }).connect(first)).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    // The SDK found the provider through the gateway's metadata and asked for the /mcp resource and its scope.
    const authorization = oauth.authorizationUrl!;
    expect(authorization.origin).toBe(provider.issuer);
    expect(authorization.searchParams.get("resource")).toBe(`${system.url}/mcp`);
    expect(authorization.searchParams.get("scope")).toBe(SCOPE);
    expect(authorization.searchParams.get("code_challenge_method")).toBe("S256");

    const redirect = await signInThroughPages(authorization.href, "agent-owner");
    const code = redirect.searchParams.get("code");
    expect(code).toBeTruthy();
    await first.finishAuth(code!);
    const token = oauth.tokens()!.access_token;
    const claims = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as Record<string, unknown>;
    expect([claims.iss, claims.aud, claims.sub, claims.client_id]).toEqual([
      provider.issuer,
      `${system.url}/mcp`,
      "agent-owner",
      AGENT_CLIENT.id,
    ]);

    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: oauth }));
    try {
      const listed = await client.callTool({ name: "cube_list", arguments: {} });
      expect(listed.isError).toBeFalsy();
      const cubes = (listed.structuredContent as { cubes: { id: string }[] }).cubes;
      expect(cubes.map((c) => c.id)).toEqual([tenant.cubeId]);
      const seat = await client.callTool({
        name: "seat_attach",
        arguments: { cube_id: tenant.cubeId, role_id: tenant.roleId },
      });
      expect(seat.isError).toBeFalsy();
      // Acting as the drone now: a post lands in the cube's log under the linked client's seat.
      const posted = await client.callTool({ name: "log_post", arguments: { message: "signed in via the provider" } });
      expect(posted.isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });
});
