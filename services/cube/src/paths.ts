import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

/** The service's package folder: the nearest folder above this file with a package.json (src/ and dist/src/ alike). */
function packageRoot(from: string): string {
  let dir = from;
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${from}`);
    dir = up;
  }
  return dir;
}

/** The service's SQL migrations (Prisma layout), found from src/ and dist/src/ alike. */
export const migrationsDir = join(packageRoot(__dirname), "prisma", "migrations");
