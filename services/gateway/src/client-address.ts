import type { IncomingHttpHeaders } from "node:http";
import { BlockList, isIP } from "node:net";

/** A set of networks, as parsed from `GATEWAY_TRUSTED_PROXIES`. */
export interface TrustedProxies {
  /** The CIDRs as given (for logs and docs). */
  readonly cidrs: readonly string[];
  /** True when `address` (IPv4, IPv6 or IPv4-mapped IPv6) lies in one of the networks. */
  has(address: string): boolean;
}

/** `::ffff:10.0.0.1` → `10.0.0.1`; other addresses unchanged. */
function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

/** Parses a comma-separated CIDR list (`10.0.0.0/8, fd00::/8`; a bare address is a /32 or /128). */
export function parseCidrs(value: string): TrustedProxies {
  const list = new BlockList();
  const cidrs = value
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
  for (const cidr of cidrs) {
    const [network = "", bits, extra] = cidr.split("/");
    const family = isIP(network);
    if (family === 0 || extra !== undefined)
      throw new Error(`must be a list of CIDRs such as 10.0.0.0/8 (bad "${cidr}")`);
    const max = family === 4 ? 32 : 128;
    const prefix = bits === undefined ? max : Number(bits);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (bits !== undefined && !/^\d+$/.test(bits))) {
      throw new Error(`must be a list of CIDRs such as 10.0.0.0/8 (bad prefix in "${cidr}")`);
    }
    list.addSubnet(network, prefix, family === 4 ? "ipv4" : "ipv6");
  }
  return {
    cidrs,
    has(address: string) {
      const plain = plainAddress(address);
      const family = isIP(plain);
      if (cidrs.length === 0 || family === 0) return false;
      return list.check(plain, family === 4 ? "ipv4" : "ipv6");
    },
  };
}

/**
 * The client's address: the socket's, unless the socket is a trusted proxy; then `X-Forwarded-For`
 * is read from the right, skipping trusted proxies, and the first untrusted hop is the client
 * (the left-most entries are whatever the client claimed and are never believed on their own).
 */
export function clientAddress(
  request: { readonly headers: IncomingHttpHeaders; readonly socket: { readonly remoteAddress?: string | undefined } },
  trusted: TrustedProxies,
): string {
  let address = plainAddress(request.socket.remoteAddress ?? "");
  if (!trusted.has(address)) return address;
  const header = request.headers["x-forwarded-for"];
  const hops = (Array.isArray(header) ? header.join(",") : (header ?? ""))
    .split(",")
    .map((hop) => plainAddress(hop.trim()))
    .filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (isIP(hop) === 0) return address; // garbage: stop at the last hop we could believe
    address = hop;
    if (!trusted.has(hop)) return hop;
  }
  return address;
}
