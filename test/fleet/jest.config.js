/** The fleet tests (`npm run test:fleet`): real processes on the compiled tree, one suite at a time. */
const { join } = require("node:path");
const base = require("../../jest.config.js");

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  rootDir: join(__dirname, "..", ".."),
  roots: ["<rootDir>/test/fleet"],
  // Each suite starts seven processes; on a small CI machine they must not compete with each other.
  maxWorkers: 1,
  testTimeout: 240_000,
};
