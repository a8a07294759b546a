// Generates everything that is generated: protobuf-es code from proto/ (buf) and
// each service's Prisma client. Runs offline; `npm install` runs it (postinstall).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name) => join(root, "node_modules", ".bin", name);
const env = {
  ...process.env,
  // buf finds the local protoc-gen-es plugin on PATH.
  PATH: `${join(root, "node_modules", ".bin")}${delimiter}${process.env.PATH ?? ""}`,
  // prisma generate only checks that an engine file exists (see TOOLCHAIN.md).
  PRISMA_SCHEMA_ENGINE_BINARY: join(root, "scripts", "prisma-engine-stub", "schema-engine"),
  PRISMA_HIDE_UPDATE_MESSAGE: "1",
  CHECKPOINT_DISABLE: "1",
};
const run = (cmd, args, cwd = root) => execFileSync(cmd, args, { cwd, env, stdio: "inherit" });

run(bin("buf"), ["generate"]);
// Each service's client (services/<name>/generated/prisma, beside src/), and the service kit's
// test fixture. The services are the ones apps/unimatrix/services.json lists as owning a store.
const { services } = JSON.parse(readFileSync(join(root, "apps", "unimatrix", "services.json"), "utf8"));
const schemaDirs = [
  ...services.filter((s) => s.store).map((s) => join(root, "services", s.name)),
  join(root, "packages", "service-kit", "test", "fixtures"),
];
for (const dir of schemaDirs) {
  if (existsSync(join(dir, "prisma", "schema.prisma"))) {
    run(bin("prisma"), ["generate", "--schema", "prisma/schema.prisma"], dir);
  }
}
// A service's generated client is a TypeScript project of its own (services/<name>/generated),
// compiled in place by `tsc --build` through the service's project reference: the compiled
// service (dist/**) requires it at the same relative path its sources (src/**) import it from.
const generatedProject = {
  extends: "../../../tsconfig.base.json",
  compilerOptions: { rootDir: ".", noUnusedLocals: false, noUnusedParameters: false },
  include: ["prisma/**/*.ts"],
  exclude: ["**/*.d.ts"],
};
for (const s of services.filter((s) => s.store)) {
  const dir = join(root, "services", s.name, "generated");
  if (existsSync(dir)) {
    writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(generatedProject, null, 2)}\n`);
  }
}
