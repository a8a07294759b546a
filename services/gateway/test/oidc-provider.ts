import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { JWK } from "jose";
import type Provider from "oidc-provider";

// Both are ESM-only: loaded by dynamic import (jest runs tests as CommonJS).
const jose = () => import("jose");
const oidcProvider = async () => (await import("oidc-provider")).default;

/** The scope Unimatrix asks of the provider's access tokens in these tests. */
export const SCOPE = "unimatrix";

/** A confidential client of the provider using the client-credentials grant (a service account). */
export const SERVICE_CLIENT = { id: "svc-reporter", secret: "svc-reporter-secret-0123456789abcdef" };
/** The console's confidential client (authorization code + PKCE); its redirect is the gateway's callback. */
export const CONSOLE_CLIENT = { id: "umx-console", secret: "umx-console-secret-0123456789abcdef" };
/** The groups the provider puts in a person's access tokens (`groups`), by login. */
const GROUPS: Readonly<Record<string, readonly string[]>> = {
  carol: ["umx-users", "staff"],
  mallory: ["staff"],
};
/** A public client (PKCE, no secret) an MCP host signs in with. */
export const AGENT_CLIENT = { id: "mcp-agent", redirect: "http://127.0.0.1:1/callback" };

interface SigningKey {
  readonly kid: string;
  readonly privateJwk: JWK;
  readonly privateKey: CryptoKey;
}

async function signingKey(kid: string): Promise<SigningKey> {
  const { generateKeyPair, exportJWK } = await jose();
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  return { kid, privateKey, privateJwk: { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" } };
}

/**
 * A real OpenID provider (npm `oidc-provider`, certified) on a local port: its dev login and
 * consent pages, the client-credentials grant, resource indicators (RFC 8707) issuing JWT access
 * tokens for any resource under `resourceBase`. `rotate()` signs with a new key from then on (the
 * old one stays published, as providers do during a rotation); `mint` signs tokens by hand with
 * the current key (or a key the provider never published) for the refusal cases.
 */
export class TestProvider {
  readonly #server: Server;
  readonly #resourceBase: string;
  #keys: SigningKey[] = [];
  #provider: Provider | undefined;
  #generation = 0;

  private constructor(server: Server, resourceBase: string) {
    this.#server = server;
    this.#resourceBase = resourceBase;
  }

  /** Starts a provider whose tokens are for resources under `resourceBase` (the gateway's public URL). */
  static async start(resourceBase: string): Promise<TestProvider> {
    let handle:
      | ((req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => void)
      | undefined;
    const server = createServer((req, res) => handle?.(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const provider = new TestProvider(server, resourceBase);
    await provider.rotate();
    handle = (req, res) => provider.#provider!.callback()(req, res);
    return provider;
  }

  get issuer(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The key id tokens are signed with now. */
  get kid(): string {
    return this.#keys[0]!.kid;
  }

  /** A new signing key, first in the published set; the provider signs with it from now on. */
  async rotate(): Promise<void> {
    this.#generation += 1;
    this.#keys = [await signingKey(`key-${this.#generation}`), ...this.#keys];
    this.#provider = this.#build(await oidcProvider());
  }

  /** A JWT signed by hand: the provider's current key, or (`foreignKey`) one it never published. */
  async mint(claims: Record<string, unknown>, options: { foreignKey?: boolean } = {}): Promise<string> {
    const key = options.foreignKey ? await signingKey(this.kid) : this.#keys[0]!;
    const now = Math.floor(Date.now() / 1000);
    const { SignJWT } = await jose();
    return new SignJWT({
      iss: this.issuer,
      aud: this.#resourceBase,
      scope: SCOPE,
      iat: now,
      exp: now + 300,
      ...claims,
    })
      .setProtectedHeader({ alg: "RS256", kid: key.kid, typ: "at+jwt" })
      .sign(key.privateKey);
  }

  /** An access token from the provider's token endpoint by the client-credentials grant. */
  async clientCredentialsToken(resource = this.#resourceBase): Promise<string> {
    const response = await fetch(`${this.issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${SERVICE_CLIENT.id}:${SERVICE_CLIENT.secret}`).toString("base64")}`,
      },
      body: new URLSearchParams({ grant_type: "client_credentials", scope: SCOPE, resource }),
    });
    const body = (await response.json()) as { access_token?: string; error?: string };
    if (!response.ok || !body.access_token)
      throw new Error(`token endpoint answered ${response.status}: ${JSON.stringify(body)}`);
    return body.access_token;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #build(OidcProvider: typeof Provider): Provider {
    const base = this.#resourceBase;
    // Its start-up warnings (dev interactions, in-memory adapter) are what a test provider is.
    const { warn } = console;
    console.warn = () => {};
    const provider = new OidcProvider(this.issuer, {
      clients: [
        {
          client_id: SERVICE_CLIENT.id,
          client_secret: SERVICE_CLIENT.secret,
          grant_types: ["client_credentials"],
          redirect_uris: [],
          response_types: [],
          scope: SCOPE,
        },
        {
          client_id: CONSOLE_CLIENT.id,
          client_secret: CONSOLE_CLIENT.secret,
          grant_types: ["authorization_code"],
          redirect_uris: [`${base}/auth/oidc/callback`],
          response_types: ["code"],
        },
        {
          client_id: AGENT_CLIENT.id,
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code", "refresh_token"],
          redirect_uris: [AGENT_CLIENT.redirect],
          response_types: ["code"],
        },
      ],
      jwks: { keys: this.#keys.map((key) => key.privateJwk) },
      scopes: ["openid", "offline_access", SCOPE],
      // The person's name in the ID token with the profile scope, as most providers send it.
      claims: { openid: ["sub"], profile: ["name"] },
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      features: {
        devInteractions: { enabled: true },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => base,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, indicator) => {
            if (indicator !== base && !indicator.startsWith(`${base}/`)) throw new Error("unknown resource");
            return { scope: SCOPE, audience: indicator, accessTokenFormat: "jwt", accessTokenTTL: 300 };
          },
        },
      },
      // A person's groups ride in their access tokens, as Okta, Entra ID and Keycloak can be set to do.
      extraTokenClaims: (_ctx, token) =>
        "accountId" in token && token.accountId ? { groups: [...(GROUPS[token.accountId] ?? [])] } : {},
      findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub, name: `Person ${sub}` }) }),
      // Signed cookies of the dev interactions (any fixed key in a test).
      cookies: { keys: ["test-provider-cookie-key"] },
      ttl: {
        AccessToken: 300,
        ClientCredentials: 300,
        IdToken: 300,
        AuthorizationCode: 60,
        Grant: 600,
        Interaction: 600,
        Session: 600,
      },
    });
    console.warn = warn;
    provider.proxy = false;
    return provider;
  }
}

/** A cookie jar for walking the provider's pages with fetch (one cookie per name). */
class CookieJar {
  readonly #cookies = new Map<string, string>();

  take(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair!.indexOf("=");
      this.#cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
  }

  header(): string {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join("; ");
  }
}

/**
 * A person signing in through the provider's own login and consent pages, as a browser would
 * (forms posted, redirects followed by hand): from an authorization URL to the redirect back to
 * the client, whose URL (with `code` and `state`) is returned.
 */
export async function signInThroughPages(authorizationUrl: string, login: string): Promise<URL> {
  const jar = new CookieJar();
  let url = authorizationUrl;
  let method = "GET";
  let body: URLSearchParams | undefined;
  for (let hop = 0; hop < 20; hop++) {
    const response = await fetch(url, {
      method,
      redirect: "manual",
      headers: {
        cookie: jar.header(),
        ...(body ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      ...(body ? { body } : {}),
    });
    jar.take(response);
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location) {
      const next = new URL(location, url);
      if (next.href.startsWith(AGENT_CLIENT.redirect) || !next.href.startsWith(new URL(url).origin)) return next;
      url = next.href;
      method = "GET";
      body = undefined;
      continue;
    }
    const page = await response.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1];
    const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1];
    if (!action || !prompt) throw new Error(`unexpected provider page (${response.status}): ${page.slice(0, 300)}`);
    url = new URL(action, url).href;
    method = "POST";
    body = new URLSearchParams(prompt === "login" ? { prompt, login, password: "any" } : { prompt });
  }
  throw new Error("too many hops signing in");
}
