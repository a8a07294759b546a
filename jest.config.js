/** One jest run for the whole tree: every package's and service's `test/` folder. */
const { existsSync } = require("node:fs");
const { join } = require("node:path");
/** THE list of services (apps/unimatrix/services.json): their test roots and package names. */
const { services } = require("./apps/unimatrix/services.json");
const swc = [
  "@swc/jest",
  {
    jsc: { parser: { syntax: "typescript" }, target: "es2022" },
    // Keep dynamic import() as is: PGlite loads its wasm through one.
    module: { type: "commonjs", ignoreDynamic: true },
  },
];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["packages", "apps", "services", "deploy"]
    .filter((dir) => existsSync(join(__dirname, dir)))
    .map((dir) => `<rootDir>/${dir}`),
  testMatch: ["**/test/**/*.test.ts"],
  transform: { "^.+\\.ts$": swc },
  moduleNameMapper: {
    "^@unimatrix/contracts/(.*)$": "<rootDir>/proto/gen/$1",
    // The kit's subpaths (its package.json `exports`): a folder's index, or a single file.
    "^@unimatrix/service-kit/(auth|bus|grpc|observe|rules|service|store|testing)$":
      "<rootDir>/packages/service-kit/src/$1/index.ts",
    "^@unimatrix/service-kit/(clock|config|errors|logger)$": "<rootDir>/packages/service-kit/src/$1.ts",
    [`^@unimatrix/(${services.map((s) => s.name).join("|")})$`]: "<rootDir>/services/$1/src/index.ts",
    "^@unimatrix/machine$": "<rootDir>/apps/machine/src/index.ts",
    "^@unimatrix/machine/cli$": "<rootDir>/apps/machine/src/cli.ts",
    "^@unimatrix/app$": "<rootDir>/apps/unimatrix/src/services.ts",
  },
  globalSetup: "<rootDir>/scripts/jest-global-setup.js",
  reporters: ["default", "<rootDir>/scripts/jest-summary-reporter.js"],
  testTimeout: 60_000,
  // The run is one process on a 2-core machine (in band): a handle a test leaves open (seen after
  // mcp-stateless.test.ts) would hold the whole run open after the last test. End it instead;
  // every test has finished and reported by then.
  forceExit: true,
};
