#!/usr/bin/env node
// The `unimatrix` command as npm links it (node_modules/.bin/unimatrix): the built CLI,
// dist/main.js. npm links a bin only when its file exists at install time, and dist/ is built
// after the install, so the link points here and this file hands over.
const { existsSync } = require("node:fs");
const { join } = require("node:path");

const main = join(__dirname, "..", "dist", "main.js");
if (!existsSync(main)) {
  process.stderr.write("unimatrix: not built yet; run `npm run build` (or `npm start`) in the checkout first\n");
  process.exit(1);
}
require(main);
