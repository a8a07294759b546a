import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..", "..");
const KIT = join(ROOT, "packages", "service-kit");
const NAME = "@unimatrix/service-kit";

/** The kit's subpaths as its package.json `exports` declares them: subpath → source file. */
function declared(): Map<string, string> {
  const pkg = JSON.parse(readFileSync(join(KIT, "package.json"), "utf8")) as {
    exports: Record<string, { types: string; default: string }>;
  };
  return new Map(
    Object.entries(pkg.exports).map(([key, target]) => [
      key.slice(2),
      join(KIT, target.types.replace(/^\.\/dist\//, "src/").replace(/\.d\.ts$/, ".ts")),
    ]),
  );
}

/** Where jest's moduleNameMapper sends `specifier` (the first pattern that matches). */
function jestTarget(specifier: string): string | undefined {
  const { moduleNameMapper } = require(join(ROOT, "jest.config.js")) as { moduleNameMapper: Record<string, string> };
  for (const [pattern, target] of Object.entries(moduleNameMapper)) {
    const match = new RegExp(pattern).exec(specifier);
    if (match) return target.replace("<rootDir>", ROOT).replace(/\$(\d)/g, (_, i: string) => match[Number(i)] ?? "");
  }
  return undefined;
}

/** Where tsconfig.test.json's paths send `specifier` (an exact key first, then a `*` key). */
function testPathsTarget(specifier: string): string | undefined {
  const text = readFileSync(join(ROOT, "tsconfig.test.json"), "utf8");
  const { paths } = (JSON.parse(text) as { compilerOptions: { paths: Record<string, string[]> } }).compilerOptions;
  const exact = paths[specifier]?.[0];
  if (exact) return join(ROOT, exact);
  for (const [key, [target]] of Object.entries(paths)) {
    if (!key.endsWith("/*") || !target || !specifier.startsWith(key.slice(0, -1))) continue;
    return join(ROOT, target.replace("*", specifier.slice(key.length - 1)));
  }
  return undefined;
}

describe("the kit's subpaths", () => {
  test("there is no root entry: every import names a subpath", () => {
    expect(declared().has("")).toBe(false);
    expect(existsSync(join(KIT, "src", "index.ts"))).toBe(false);
    expect(jestTarget(NAME)).toBeUndefined();
  });

  test("each declared subpath has a source, and jest and the test typecheck resolve it to that source", () => {
    const subpaths = declared();
    expect(subpaths.size).toBeGreaterThanOrEqual(12);
    for (const [subpath, source] of subpaths) {
      const specifier = `${NAME}/${subpath}`;
      expect({ specifier, exists: existsSync(source) }).toEqual({ specifier, exists: true });
      expect({ specifier, jest: jestTarget(specifier) }).toEqual({ specifier, jest: source });
      expect({ specifier, tsc: testPathsTarget(specifier) }).toEqual({ specifier, tsc: source });
    }
  });
});
