import { type Database, type Tx as KitTx, inTransaction as kitInTransaction } from "@unimatrix/service-kit/store";
import { PrismaClient } from "../../generated/prisma/client";

export type { PrismaClient } from "../../generated/prisma/client";

/** An interactive transaction client of the cube schema (the kit's `Tx`). */
export type Tx = KitTx<PrismaClient>;

/** Opens the service's Prisma client on the kit's database adapter. */
export function openPrisma(database: Database): PrismaClient {
  return new PrismaClient({ adapter: database.adapter });
}

/** Runs `fn` in one interactive transaction with the kit's timeouts (READ COMMITTED). */
export function inTransaction<T>(prisma: PrismaClient, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return kitInTransaction(prisma, fn);
}

/** A digest as the `Bytes` Prisma expects (a plain ArrayBuffer-backed copy). */
export function bytes(buffer: Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(buffer);
}
