import { basename, dirname, join } from "node:path";

/** The package folder: this file runs from src/ (tests) or dist/src/ (built). */
const packageDir = basename(dirname(__dirname)) === "dist" ? join(__dirname, "..", "..") : join(__dirname, "..");

/** The service's SQL migrations (Prisma layout), found from src/ and dist/src/ alike. */
export const migrationsDir = join(packageDir, "prisma", "migrations");
