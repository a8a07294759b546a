import type { Database } from "@unimatrix/service-kit";
import { PrismaClient } from "../../generated/prisma/client";

export type { PrismaClient } from "../../generated/prisma/client";

/** A Prisma interactive transaction client. */
export type Tx = Omit<PrismaClient, "$connect" | "$disconnect" | "$on" | "$transaction" | "$extends" | "$use">;

/** Opens the service's Prisma client on the kit's database adapter. */
export function openPrisma(database: Database): PrismaClient {
  return new PrismaClient({ adapter: database.adapter });
}

/** Runs `fn` in one interactive transaction (READ COMMITTED), with a generous timeout under load. */
export function inTransaction<T>(prisma: PrismaClient, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return prisma.$transaction(fn, { maxWait: 10_000, timeout: 30_000 });
}

/** A digest as the `Bytes` Prisma expects (a plain ArrayBuffer-backed copy). */
export function bytes(buffer: Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(buffer);
}
