/** Connect JSON calls through the gateway, as any browser client makes them. */

/** A failed call, with the Connect error code (`not_found`, `permission_denied`, ...). */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * The "token" of a session opened by signing in through the identity provider: the credential
 * is the gateway's HttpOnly cookie, which this script never sees; calls carry the CSRF token instead.
 */
export const COOKIE_SESSION = "cookie-session";

/** The session's CSRF token (the readable `umx_csrf` cookie the gateway set at sign-in). */
function csrfToken(): string {
  return /(?:^|;\s*)umx_csrf=([^;]*)/.exec(document.cookie)?.[1] ?? "";
}

/** The headers and credentials mode a call with `token` goes out with. */
export function credentialsOf(token: string): { headers: Record<string, string>; credentials: RequestCredentials } {
  if (token === COOKIE_SESSION) return { headers: { "x-umx-csrf": csrfToken() }, credentials: "same-origin" };
  return { headers: { authorization: `Bearer ${token}` }, credentials: "omit" };
}

/** Calls `/<package.Service>/<Method>` with a bearer token (or the session cookie); answers the decoded JSON body. */
export async function rpc<T>(method: string, body: unknown, token: string): Promise<T> {
  let response: Response;
  try {
    const { headers, credentials } = credentialsOf(token);
    response = await fetch(`/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
      credentials,
    });
  } catch {
    throw new ApiError("unavailable", "the gateway cannot be reached", 0);
  }
  const text = await response.text();
  let json: Record<string, unknown> = {};
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    json = { message: text };
  }
  if (!response.ok) {
    throw new ApiError(String(json.code ?? "unknown"), String(json.message ?? response.statusText), response.status);
  }
  return json as T;
}

export const CUBE = "unimatrix.cube.v1";
export const PRESENCE = "unimatrix.presence.v1";
export const DEVICE = "unimatrix.device.v1";

/** The token kinds the console accepts at sign-in. */
export type TokenKind = "user" | "client";

export function tokenKind(token: string): TokenKind | undefined {
  // A person signed in through the identity provider acts as a user of their tenant.
  if (token === COOKIE_SESSION) return "user";
  if (/^umx_user_[A-Za-z0-9_-]+$/.test(token)) return "user";
  if (/^umx_client_[A-Za-z0-9_-]+$/.test(token)) return "client";
  return undefined;
}

/** The tab's session: kept in sessionStorage (gone when the tab closes), never in a URL. */
export const session = {
  get token(): string | undefined {
    return sessionStorage.getItem("umx.token") ?? undefined;
  },
  signIn(token: string): void {
    sessionStorage.setItem("umx.token", token);
  },
  signOut(): void {
    if (this.token === COOKIE_SESSION) {
      void fetch("/auth/logout", { method: "POST", ...credentialsOf(COOKIE_SESSION) });
    }
    sessionStorage.clear();
  },
  /** The seat (drone session) taken in a cube by a client token. */
  seat(cubeId: string): Seat | undefined {
    const text = sessionStorage.getItem(`umx.seat.${cubeId}`);
    return text ? (JSON.parse(text) as Seat) : undefined;
  },
  setSeat(cubeId: string, seat: Seat | undefined): void {
    if (seat) sessionStorage.setItem(`umx.seat.${cubeId}`, JSON.stringify(seat));
    else sessionStorage.removeItem(`umx.seat.${cubeId}`);
  },
};

export interface Seat {
  readonly droneId: string;
  readonly label: string;
  readonly roleName: string;
  readonly sessionToken: string;
}

export interface Cube {
  id: string;
  name: string;
  directive?: string;
  taxonomyJson?: string;
  /** The kinds the cube service reads from the taxonomy. */
  taxonomyKinds?: string[];
  callerAccess?: string;
  createdAt?: string;
  updatedAt?: string;
}

export interface Role {
  id: string;
  name: string;
  shortDescription?: string;
  detailedDescription?: string;
  roleClass?: string;
  isDefault?: boolean;
  mandatory?: boolean;
  humanSeat?: boolean;
  canBroadcast?: boolean;
  receivesAllDirect?: boolean;
}

export interface Drone {
  id: string;
  clientId?: string;
  roleId?: string;
  roleName?: string;
  label?: string;
  hostname?: string;
  posture?: string;
  lastSeenAt?: string;
  lastLogPostAt?: string;
  live?: boolean;
  evictedAt?: string;
  silentPingCount?: number;
  lastSilentPingAt?: string;
  /** `SEAT_STATE_WORKING` / `_WAITING` / `_BLOCKED` / `_IDLE`; absent until the drone first says. */
  state?: string;
  stateNote?: string;
  stateChangedAt?: string;
  machineId?: string;
}

export interface Entry {
  id: string;
  cursor?: string;
  author?: { droneId?: string; label?: string; principalId?: string; principalKind?: string };
  message?: string;
  visibility?: string;
  recipientDroneIds?: string[];
  kind?: string;
  createdAt?: string;
  ackCount?: number;
  ackedByDroneIds?: string[];
  claim?: Claim;
  replyToEntryId?: string;
  threadRootEntryId?: string;
  replyCount?: number;
  expectsReply?: boolean;
  question?: boolean;
  seatState?: { state?: string; note?: string };
}

/** A claim lease on an entry (protobuf JSON: the uint64 fence arrives as a decimal string). */
export interface Claim {
  holderDroneId?: string;
  holderPrincipalId?: string;
  holderLabel?: string;
  claimedAt?: string;
  fence?: string;
  /** `CLAIM_STATE_HELD` or `CLAIM_STATE_STALE`. */
  state?: string;
  renewedAt?: string;
  staleAt?: string;
}

/** What happened to an entry for one recipient drone (ListReceipts). */
export interface Receipt {
  droneId: string;
  label?: string;
  deliveredAt?: string;
  /** `DELIVERY_CHANNEL_STREAM`, `DELIVERY_CHANNEL_MACHINE_LINK` or `DELIVERY_CHANNEL_HOOK`. */
  deliveredVia?: string;
  readAt?: string;
  ackedAt?: string;
  nudgedAt?: string;
}

/** A question to the cube's humans (an `ask_human` entry) and its answer once given. */
export interface Question {
  entry: Entry;
  answer?: Entry;
}

export interface Notification {
  id: string;
  cursor?: string;
  kind?: string;
  text?: string;
  entryId?: string;
  actorDroneId?: string;
  actorRoleName?: string;
  createdAt?: string;
}

export interface Decision {
  id: string;
  author?: Entry["author"];
  title?: string;
  rationale?: string;
  entryId?: string;
  createdAt?: string;
}

export interface Machine {
  id: string;
  name: string;
  linked?: boolean;
  presenceChangedAt?: string;
  createdAt?: string;
  revokedAt?: string;
}

export interface Device {
  id: string;
  displayName?: string;
  platform?: string;
  status?: string;
  online?: boolean;
  leaseExpiresAt?: string;
  enrolledAt?: string;
  revokedReason?: string;
}

export interface Placement {
  rootSessionId: string;
  deviceId?: string;
  rev?: string;
  placedAt?: string;
  updatedAt?: string;
  activeRunId?: string;
}

/** An API client of the tenant (an agent host's credential holder). */
export interface Client {
  id: string;
  name: string;
  createdAt?: string;
  credentialIssuedAt?: string;
  revokedAt?: string;
}

/** A client's access on one cube. */
export interface Grant {
  clientId: string;
  cubeId: string;
  access?: string;
  updatedAt?: string;
}

/** A single-use enroll token's metadata (never its plaintext). */
export interface EnrollToken {
  id: string;
  label?: string;
  createdAt?: string;
  expiresAt?: string;
}

/** One row of the device context's audit trail. */
export interface AuditEvent {
  id: string;
  eventType?: string;
  deviceId?: string;
  actorId?: string;
  rootSessionId?: string;
  enrollTokenId?: string;
  detailJson?: string;
  at?: string;
}

/** Every page of a list RPC (`pageToken` → `nextPageToken`), up to `limit` items. */
export async function listAll<T>(
  method: string,
  body: Record<string, unknown>,
  key: string,
  token: string,
  limit = 5000,
): Promise<T[]> {
  const items: T[] = [];
  let pageToken = "";
  do {
    const page = await rpc<Record<string, unknown>>(method, { ...body, pageSize: 500, pageToken }, token);
    items.push(...((page[key] as T[] | undefined) ?? []));
    pageToken = String(page.nextPageToken ?? "");
  } while (pageToken && items.length < limit);
  return items;
}

export const IDENTITY = `${CUBE}.IdentityService`;

/** What the gateway offers for signing in: a provider's name (or none), and whether a session cookie is open. */
export async function signInOptions(): Promise<{ provider: { name: string } | null; signedIn: boolean }> {
  try {
    const response = await fetch("/auth/session", { credentials: "same-origin", cache: "no-store" });
    if (response.ok) return (await response.json()) as { provider: { name: string } | null; signedIn: boolean };
  } catch {
    // the gateway cannot be reached: offer the token box alone
  }
  return { provider: null, signedIn: false };
}
