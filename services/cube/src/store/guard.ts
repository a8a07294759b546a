import { ResourceExhaustedError } from "@unimatrix/service-kit/errors";
import type { PrismaClient } from "./prisma";

/**
 * The storage guard: refuses a write (before anything is written) when the schema's size plus the
 * write's estimated size would pass the budget. The measured size is cached briefly and grown by
 * each admitted write's estimate, so the guard costs one catalog query per `refreshMs`, not per write.
 */
export class StorageGuard {
  #measured = 0;
  #measuredAt = -Infinity;
  #pending = 0;

  constructor(
    private readonly prisma: PrismaClient,
    /** Budget in bytes; 0 disables the guard. */
    private readonly budgetBytes: number,
    private readonly refreshMs = 1_000,
  ) {}

  /** Throws RESOURCE_EXHAUSTED when writing about `bytes` more would pass the budget. */
  async admit(bytes: number): Promise<void> {
    if (this.budgetBytes <= 0) return;
    const now = Date.now();
    if (now - this.#measuredAt > this.refreshMs) {
      this.#measured = await this.size();
      this.#measuredAt = now;
      this.#pending = 0;
    }
    // Rows cost more than their text: count a fixed per-row overhead as well.
    const estimate = bytes + 512;
    if (this.#measured + this.#pending + estimate > this.budgetBytes)
      throw new ResourceExhaustedError("the cube store has reached its storage budget; nothing was written");
    this.#pending += estimate;
  }

  /** Current size of the tables (with indexes and TOAST) of the service's schema, in bytes. */
  async size(): Promise<number> {
    const rows = await this.prisma.$queryRaw<{ bytes: bigint | null }[]>`
      SELECT sum(pg_total_relation_size(c.oid))::bigint AS bytes
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind = 'r'`;
    return Number(rows[0]?.bytes ?? 0);
  }
}
