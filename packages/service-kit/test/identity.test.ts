import { Metadata } from "@grpc/grpc-js";
import {
  bearerToken,
  constantTimeEquals,
  issueToken,
  PRINCIPAL_HEADER,
  type Principal,
  parseToken,
  principalResolver,
  sha256,
  signPrincipal,
  verifyPrincipal,
  verifySecret,
} from "@unimatrix/service-kit/auth";

const KEY = "k".repeat(40);
const drone: Principal = {
  kind: "drone-session",
  subjectId: "s-1",
  tenantId: "t-1",
  clientId: "c-1",
  cubeId: "cube-1",
  droneId: "d-1",
};

describe("tokens", () => {
  it("mints umx_<kind>_<lookup>_<secret> tokens whose digests verify only the right secret", () => {
    const issued = issueToken("client");
    const parsed = parseToken(issued.token);
    expect(parsed).toEqual({ kind: "client", lookup: issued.lookup, secret: expect.any(String) });
    expect(issued.lookupDigest.equals(sha256(issued.lookup))).toBe(true);
    expect(issued.verifierDigest).toHaveLength(32);
    expect(verifySecret(parsed!.secret, issued.verifierDigest)).toBe(true);
    expect(verifySecret(`${parsed!.secret}x`, issued.verifierDigest)).toBe(false);
    expect(issueToken("client").token).not.toBe(issued.token);
  });

  it.each([
    "",
    "umx_client_abc",
    "umx_wizard_abc_def",
    "xyz_client_abc_def",
    "umx_client_a b_def",
    "umx_client_abc_def_extra",
  ])("rejects the malformed token %j", (token) => {
    expect(parseToken(token)).toBeNull();
  });

  it("compares strings in constant time without length leaks in the API", () => {
    expect(constantTimeEquals("umx_operator_aaaa", "umx_operator_aaaa")).toBe(true);
    expect(constantTimeEquals("umx_operator_aaaa", "umx_operator_aaab")).toBe(false);
    expect(constantTimeEquals("short", "much longer value")).toBe(false);
  });

  it("reads a bearer token from an authorization header", () => {
    expect(bearerToken("Bearer umx_client_a_b")).toBe("umx_client_a_b");
    expect(bearerToken("bearer   umx_client_a_b ")).toBe("umx_client_a_b");
    expect(bearerToken("Basic abc")).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
  });
});

describe("signed principals", () => {
  it("round-trips a principal until it expires", () => {
    const now = 1_000_000;
    const signed = signPrincipal(drone, KEY, now, 60_000);
    expect(verifyPrincipal(signed, KEY, now + 59_999)).toEqual(drone);
    expect(verifyPrincipal(signed, KEY, now + 60_000)).toBeNull();
  });

  it("refuses a value signed with another key, or with a changed body", () => {
    const signed = signPrincipal(drone, KEY);
    expect(verifyPrincipal(signed, "x".repeat(40))).toBeNull();
    const [body, mac] = signed.split(".") as [string, string];
    const tampered = Buffer.from(Buffer.from(body, "base64url").toString().replace('"t-1"', '"t-2"')).toString(
      "base64url",
    );
    expect(verifyPrincipal(`${tampered}.${mac}`, KEY)).toBeNull();
    expect(verifyPrincipal("garbage", KEY)).toBeNull();
  });
});

describe("principal resolver", () => {
  const operatorToken = `umx_operator_${"o".repeat(24)}`;
  const clientToken = issueToken("client");
  const resolve = principalResolver({
    internalKey: KEY,
    operatorToken,
    resolveToken: async (parsed) =>
      parsed.lookup === clientToken.lookup ? { kind: "client", subjectId: "c-1", tenantId: "t-1" } : null,
  });
  const metadata = (entries: Record<string, string>) => {
    const m = new Metadata();
    for (const [k, v] of Object.entries(entries)) m.set(k, v);
    return m;
  };

  it("takes a gateway-signed principal", async () => {
    await expect(resolve(metadata({ [PRINCIPAL_HEADER]: signPrincipal(drone, KEY) }))).resolves.toEqual(drone);
  });

  it("never takes an unsigned principal", async () => {
    const unsigned = Buffer.from(JSON.stringify({ p: drone, exp: Date.now() + 60_000 })).toString("base64url");
    await expect(resolve(metadata({ [PRINCIPAL_HEADER]: unsigned }))).rejects.toMatchObject({ code: 16 });
    await expect(resolve(metadata({ [PRINCIPAL_HEADER]: `${unsigned}.AAAA` }))).rejects.toMatchObject({ code: 16 });
  });

  it("resolves the operator token and the service's own tokens, and nothing else", async () => {
    await expect(resolve(metadata({ authorization: `Bearer ${operatorToken}` }))).resolves.toMatchObject({
      kind: "operator",
    });
    await expect(resolve(metadata({ authorization: `Bearer ${clientToken.token}` }))).resolves.toEqual({
      kind: "client",
      subjectId: "c-1",
      tenantId: "t-1",
    });
    for (const bad of [`umx_operator_${"p".repeat(24)}`, issueToken("client").token, "not-a-token"]) {
      await expect(resolve(metadata({ authorization: `Bearer ${bad}` }))).rejects.toMatchObject({ code: 16 });
    }
    await expect(resolve(metadata({}))).rejects.toMatchObject({ code: 16, message: "missing bearer token" });
  });
});
