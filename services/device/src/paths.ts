import { join } from "node:path";

/** The service's SQL migrations (Prisma layout), found from src/ and dist/ alike. */
export const migrationsDir = join(__dirname, "..", "prisma", "migrations");
