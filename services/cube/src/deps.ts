import type { AccessTokenVerifier } from "@unimatrix/service-kit/auth";
import type { Bus } from "@unimatrix/service-kit/bus";
import type { Clock } from "@unimatrix/service-kit/clock";
import type { RawQuery } from "@unimatrix/service-kit/store";
import type { Logger } from "pino";
import type { CubeConfig } from "./config";
import type { MachineDirectory } from "./live/machines";
import type { AuthCache } from "./store/auth-cache";
import type { StorageGuard } from "./store/guard";
import type { PrismaClient } from "./store/prisma";

/** What the cube service's stores, handlers and streams share. */
export interface CubeDeps {
  readonly prisma: PrismaClient;
  /** `$queryRaw` straight on the pool, without Prisma: the append and read paths' hot statements. */
  readonly fast: RawQuery;
  readonly clock: Clock;
  readonly guard: StorageGuard;
  readonly bus: Bus;
  readonly logger: Logger;
  readonly config: CubeConfig;
  /** The replica's token → principal and (principal, cube) → access caches, invalidated through the bus. */
  readonly auth: AuthCache;
  /** The installation's internal key (seals page tokens). */
  readonly internalKey: string;
  /** Presence's machines, asked as the caller (AttachSeat's machine_id); absent: unchecked. */
  readonly machines?: MachineDirectory;
  /** The company's identity provider's access tokens, when one is configured (`OIDC_ISSUER`). */
  readonly accessTokens?: AccessTokenVerifier;
}
