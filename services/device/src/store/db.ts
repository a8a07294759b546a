import type { Database } from "@unimatrix/service-kit";
import { PrismaClient } from "../../generated/prisma/client";

/** The Prisma client of the device context. */
export type Db = PrismaClient;
/** The client handed to an interactive transaction. */
export type Tx = Omit<PrismaClient, "$connect" | "$disconnect" | "$on" | "$transaction" | "$extends">;

/** Opens the Prisma client over the kit's driver adapter. */
export function openDb(database: Database): Db {
  return new PrismaClient({ adapter: database.adapter });
}

/**
 * Runs `work` in one READ COMMITTED transaction. Contenders queue on row locks, so the waits are
 * generous: a hundred racing rebinds must all get their turn rather than fail with a timeout.
 */
export function inTransaction<T>(db: Db, work: (tx: Tx) => Promise<T>): Promise<T> {
  return db.$transaction(work, { maxWait: 20_000, timeout: 20_000 });
}

/** A locked read that found nothing where the transaction had just seen a row: an engine anomaly. */
export class StoreAnomalyError extends Error {
  constructor(what: string) {
    super(`store anomaly: ${what}`);
    this.name = "StoreAnomalyError";
  }
}
