import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { SERVICE_NAMES, SERVICES } from "@unimatrix/app";
import { allEnvVars } from "@unimatrix/service-kit/config";
import "@unimatrix/cube";
import "@unimatrix/device";
import "@unimatrix/presence";
import "@unimatrix/gateway";
import { defaultValues, root, skeleton, templates, type Values } from "./chart";

interface Instruction {
  readonly op: string;
  readonly args: string;
  readonly line: number;
}
interface Stage {
  readonly from: string;
  readonly name: string;
  readonly instructions: Instruction[];
}

/** Parses a Dockerfile into global ARGs and stages (continuations joined, comments dropped). */
function parseDockerfile(text: string): { globalArgs: Map<string, string>; stages: Stage[] } {
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.endsWith("\\") && i + 1 < lines.length) {
      i++;
      const next = lines[i]!;
      if (/^\s*#/.test(next)) continue;
      line = `${line.slice(0, -1)} ${next.trim()}`;
    }
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match) throw new Error(`line ${start + 1}: not an instruction: ${line}`);
    const op = match[1]!.toUpperCase();
    const args = match[2]!.trim();
    if (op === "FROM") {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!from) throw new Error(`line ${start + 1}: bad FROM`);
      stages.push({ from: from[1]!, name: from[2] ?? `#${stages.length}`, instructions: [] });
    } else if (stages.length === 0) {
      if (op !== "ARG") throw new Error(`line ${start + 1}: only ARG may precede the first FROM`);
      const [name, value] = args.split("=");
      globalArgs.set(name!, value ?? "");
    } else {
      stages[stages.length - 1]!.instructions.push({ op, args, line: start + 1 });
    }
  }
  return { globalArgs, stages };
}

const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
const { globalArgs, stages } = parseDockerfile(dockerfile);
const stage = (name: string) => {
  const found = stages.find((s) => s.name === name);
  if (!found) throw new Error(`no stage ${name}`);
  return found;
};
/** The stage chain from a stage up to its base image (a stage inherits its parent's settings). */
const lineage = (name: string): Stage[] => {
  const chain: Stage[] = [];
  let current: Stage | undefined = stage(name);
  while (current) {
    chain.push(current);
    const parent: string = current.from;
    current = stages.find((s) => s.name === parent);
  }
  return chain;
};
/** The effective exec-form value of ENTRYPOINT / CMD / USER in a stage (nearest wins). */
const effective = (name: string, op: string): string | undefined => {
  for (const s of lineage(name)) {
    const found = s.instructions.filter((i) => i.op === op).at(-1);
    if (found) return found.args;
  }
  return undefined;
};
const execForm = (name: string, op: string): string[] => {
  const raw = effective(name, op);
  if (raw === undefined) throw new Error(`${name}: no ${op}`);
  const parsed = JSON.parse(raw) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === "string")) throw new Error(`${op} is not exec form`);
  return parsed as string[];
};
const runs = (name: string) =>
  stage(name)
    .instructions.filter((i) => i.op === "RUN")
    .map((i) => i.args);

const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  workspaces: string[];
  scripts: Record<string, string>;
  license: string;
};
/** How a Dockerfile refers to a build argument: "${NAME}". */
const argRef = (name: string) => ["$", "{", name, "}"].join("");
const launcherEntrypoint = ["node", "apps/unimatrix/dist/main.js"];

describe("Dockerfile", () => {
  test("has the build, prod-deps and runtime stages, and a final stage chosen by SERVICE", () => {
    expect(stages.map((s) => s.name)).toEqual(
      expect.arrayContaining(["base", "manifests", "build", "prod-deps", "runtime", "migrate", ...SERVICE_NAMES]),
    );
    expect(globalArgs.get("SERVICE")).toBe("all");
    expect(stages.at(-1)!.from).toBe(argRef("SERVICE"));
    for (const target of ["all", "migrate", ...SERVICE_NAMES]) {
      expect(lineage(target).map((s) => s.name)).toContain("runtime");
    }
  });

  test("every FROM and COPY --from names an earlier stage or a pinned-major base image", () => {
    stages.forEach((s, index) => {
      const earlier = stages.slice(0, index).map((e) => e.name);
      if (s.from === argRef("SERVICE")) return;
      if (s.from.includes(":")) {
        expect(s.from).toBe(`node:${argRef("NODE_VERSION")}-bookworm-slim`);
        expect(globalArgs.get("NODE_VERSION")).toMatch(/^\d+$/);
      } else expect(earlier).toContain(s.from);
      for (const copy of s.instructions.filter((i) => i.op === "COPY" && i.args.includes("--from="))) {
        expect(earlier).toContain(/--from=(\S+)/.exec(copy.args)![1]);
      }
    });
  });

  test("each service's stage runs the command its npm script runs", () => {
    expect(SERVICE_NAMES).toEqual(["cube", "device", "presence", "gateway"]);
    for (const service of SERVICE_NAMES) {
      expect(execForm(service, "ENTRYPOINT")).toEqual(launcherEntrypoint);
      expect(execForm(service, "CMD")).toEqual([service]);
      const script = pkg.scripts[`start:${service}`];
      expect(script).toBeDefined();
      expect(script!.endsWith(`&& ${[...launcherEntrypoint, service].join(" ")}`)).toBe(true);
    }
    expect(execForm("all", "CMD")).toEqual([]);
    expect(pkg.scripts.start!.endsWith(`&& ${launcherEntrypoint.join(" ")}`)).toBe(true);
  });

  test("the migrate stage and the chart's migration Job run the npm migrate script's entry point", () => {
    const migrate = execForm("migrate", "ENTRYPOINT");
    expect(migrate).toEqual(["node", "apps/unimatrix/dist/migrate.js"]);
    expect(execForm("migrate", "CMD")).toEqual([]);
    expect(pkg.scripts.migrate!.endsWith(`&& ${migrate.join(" ")}`)).toBe(true);
    const job = skeleton(templates().get("migrations-job.yaml")!).find((doc) => doc.kind === "Job")!;
    const containers = (job.spec as { template: { spec: { containers: Values[] } } }).template.spec.containers;
    expect(containers[0]!.command).toEqual(migrate);
  });

  test("the entry points are compiled from the composition's sources that exist", () => {
    const tsconfig = readFileSync(join(root, "apps", "unimatrix", "tsconfig.json"), "utf8");
    expect(tsconfig).toContain('"rootDir": "src"');
    expect(tsconfig).toContain('"outDir": "dist"');
    for (const js of ["apps/unimatrix/dist/main.js", "apps/unimatrix/dist/migrate.js"]) {
      const source = js.replace("/dist/", "/src/").replace(/\.js$/, ".ts");
      expect({ source, exists: existsSync(join(root, source)) }).toEqual({ source, exists: true });
    }
    // The npm bin is a committed launcher (npm links a bin only if its file exists at install
    // time, before dist/ is built) that hands over to the compiled dist/main.js.
    const launcher = JSON.parse(readFileSync(join(root, "apps", "unimatrix", "package.json"), "utf8"));
    expect(launcher.bin.unimatrix).toBe("bin/unimatrix.cjs");
    const script = readFileSync(join(root, "apps", "unimatrix", launcher.bin.unimatrix), "utf8");
    expect(script).toContain('join(__dirname, "..", "dist", "main.js")');
  });

  test("all CMD and ENTRYPOINT instructions use the exec form (signals reach node, not a shell)", () => {
    for (const s of stages) {
      for (const i of s.instructions.filter((x) => x.op === "CMD" || x.op === "ENTRYPOINT")) {
        expect({ line: i.line, exec: Array.isArray(JSON.parse(i.args)) }).toEqual({ line: i.line, exec: true });
      }
    }
  });

  test("the manifests stage copies the lockfile and every workspace's package.json", () => {
    const copies = stage("manifests")
      .instructions.filter((i) => i.op === "COPY")
      .map((i) => i.args);
    expect(copies).toContain("package.json package-lock.json ./");
    for (const ws of pkg.workspaces) expect(copies).toContain(`${ws}/package.json ${ws}/`);
    expect(copies).toHaveLength(pkg.workspaces.length + 1);
  });

  test("the build stage installs dev dependencies, generates and compiles with scripts that exist", () => {
    const build = runs("build").join("\n");
    expect(build).toMatch(/npm ci --ignore-scripts(?! --omit)/);
    expect(build).toContain("npm run generate && npm run build");
    expect(pkg.scripts.generate).toBe("node scripts/generate.mjs");
    expect(pkg.scripts.build).toBe("tsc --build");
    // The runtime tree keeps the workspace layout, dist folders and SQL migrations.
    expect(build).toContain("sh deploy/docker/assemble-runtime.sh /out");
    const assemble = readFileSync(join(root, "deploy", "docker", "assemble-runtime.sh"), "utf8");
    expect(assemble).toContain(`require('./package.json').workspaces`);
    expect(assemble).toContain('cp -R "$ws/dist" "$out/$ws/dist"');
    expect(assemble).toContain('cp -R "$ws/prisma/migrations" "$out/$ws/prisma/migrations"');
  });

  test("the runtime has production dependencies only, no npm, and runs as a numeric non-root user", () => {
    expect(runs("prod-deps")).toEqual([
      "--mount=type=cache,target=/root/.npm npm ci --omit=dev --omit=optional --ignore-scripts",
      "sh /tmp/prune-runtime.sh /app && rm /tmp/prune-runtime.sh",
    ]);
    const runtime = stage("runtime");
    const text = runtime.instructions.map((i) => `${i.op} ${i.args}`).join("\n");
    expect(text).not.toMatch(/npm (ci|install|i)\b/);
    // The whole tree: npm nests node_modules inside workspaces when versions differ.
    expect(text).toContain("COPY --from=prod-deps /app/ ./");
    expect(text).toContain("COPY --from=build /out/ ./");
    expect(text).toContain("rm -rf /usr/local/lib/node_modules/npm");
    const user = effective("cube", "USER")!;
    expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    // The chart runs pods as the same uid/gid.
    const context = defaultValues().podSecurityContext as Values;
    expect(user).toBe(`${context.runAsUser}:${context.runAsGroup}`);
    expect(effective("cube", "ENV")).toBeDefined();
    expect(text).toContain("NODE_ENV=production");
  });

  test("--omit=optional drops no package the runtime needs (only pg-cloudflare is optional in production)", () => {
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { optional?: boolean; dev?: boolean }>;
    };
    const optionalInProduction = Object.entries(lock.packages)
      .filter(([, p]) => p.optional === true && p.dev !== true)
      .map(([path]) => path.replace(/^.*node_modules\//, ""));
    // A new one (a platform binary of a native module, say) means revisiting the prod-deps stage.
    expect(optionalInProduction).toEqual(["pg-cloudflare"]);
  });

  test("nested workspace node_modules (in the lockfile) reach the runtime stage", () => {
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, unknown>;
    };
    const nested = Object.keys(lock.packages).filter((path) =>
      pkg.workspaces.some((ws) => path.startsWith(`${ws}/node_modules/`)),
    );
    const copies = stage("runtime")
      .instructions.filter((i) => i.op === "COPY" && i.args.startsWith("--from=prod-deps"))
      .map((i) => i.args);
    // Copying only /app/node_modules would drop these.
    if (nested.length > 0) expect(copies).toEqual(["--from=prod-deps /app/ ./"]);
    expect(copies.length).toBe(1);
  });

  test("one PGlite in the tree: the lockfile holds a single @electric-sql/pglite, at the root", () => {
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { version?: string }>;
    };
    const copies = Object.keys(lock.packages).filter((path) => path.endsWith("node_modules/@electric-sql/pglite"));
    expect(copies).toEqual(["node_modules/@electric-sql/pglite"]);
  });

  test("the prune step deletes only Prisma query compilers the generated clients never load", () => {
    // Every runtime file a generated client loads, from its own source.
    const loaded = new Set<string>();
    for (const service of ["cube", "device", "presence"]) {
      const dir = join(root, "services", service, "generated", "prisma", "internal");
      for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
        for (const m of readFileSync(join(dir, file), "utf8").matchAll(
          /@prisma\/client\/runtime\/(query_compiler[\w.-]+)/g,
        ))
          loaded.add(m[1]!);
      }
    }
    expect(loaded.size).toBeGreaterThan(0);
    // Run the prune script on a copy of the installed runtime folder's file names.
    const runtime = join(root, "node_modules", "@prisma", "client", "runtime");
    const scratch = mkdtempSync(join(tmpdir(), "umx-prune-"));
    const copy = join(scratch, "node_modules", "@prisma", "client", "runtime");
    mkdirSync(copy, { recursive: true });
    const names = readdirSync(runtime);
    for (const name of names) writeFileSync(join(copy, name), "");
    execFileSync("sh", [join(root, "deploy", "docker", "prune-runtime.sh"), scratch]);
    const kept = new Set(readdirSync(copy));
    for (const file of loaded) expect(kept.has(file)).toBe(true);
    const compilers = names.filter((n) => n.startsWith("query_compiler_"));
    const removed = compilers.filter((n) => !kept.has(n));
    // Other engines (mysql, sqlite, sqlserver, cockroachdb) and the "small" build are gone.
    expect(removed.length).toBeGreaterThan(compilers.length / 2);
    expect(removed.every((n) => !n.startsWith("query_compiler_fast_bg.postgresql."))).toBe(true);
    // Nothing but query compilers is touched there.
    expect(names.filter((n) => !kept.has(n)).every((n) => n.startsWith("query_compiler_"))).toBe(true);
  });

  test("the runtime stage carries the OCI image labels", () => {
    const labels = stage("runtime")
      .instructions.filter((i) => i.op === "LABEL")
      .map((i) => i.args)
      .join(" ");
    for (const key of ["title", "description", "licenses", "version", "revision", "created", "source"])
      expect(labels).toContain(`org.opencontainers.image.${key}=`);
    expect(labels).toContain(`org.opencontainers.image.licenses="${pkg.license}"`);
  });

  test("EXPOSE lists the services' default ports", () => {
    const expose = effective("cube", "EXPOSE")!.split(/\s+/).map(Number);
    const defaults = ["CUBE_PORT", "DEVICE_PORT", "PRESENCE_PORT", "GATEWAY_PORT"].map((name) =>
      Number(allEnvVars.find((v) => v.name === name)?.defaultValue),
    );
    expect(expose).toEqual(defaults);
  });

  test("services find their migrations next to dist/ in the layout the image keeps", () => {
    const stores = SERVICES.filter((s) => s.store);
    expect(stores.map((s) => s.name)).toEqual(["cube", "device", "presence"]);
    for (const service of stores) {
      // The exported migrationsDir is <service>/prisma/migrations, beside src/ and dist/.
      expect(service.migrationsDir).toBe(join(root, "services", service.name, "prisma", "migrations"));
      const src = join(root, "services", service.name, "src");
      const declaring = ["paths.ts", "service.ts"].filter((file) => existsSync(join(src, file)));
      const text = declaring.map((file) => readFileSync(join(src, file), "utf8")).join("\n");
      expect(text).toContain('join(__dirname, "..", "prisma", "migrations")');
    }
    // The migration Job takes each service's own migrationsDir from the one list, not a path of its own.
    const migrate = readFileSync(join(root, "apps", "unimatrix", "src", "migrate.ts"), "utf8");
    expect(migrate).toContain("s.migrationsDir");
    expect(migrate).toContain('from "./services"');
  });
});

/** .dockerignore as a matcher (Docker's rules: ** spans directories, a later "!" re-includes). */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const negate = line.startsWith("!");
      const pattern = (negate ? line.slice(1) : line).replace(/^\/+|\/+$/g, "");
      const source = pattern
        .split(/(\*\*\/|\*\*|\*|\?)/)
        .map((part) => {
          if (part === "**/") return "(?:.*/)?";
          if (part === "**") return ".*";
          if (part === "*") return "[^/]*";
          if (part === "?") return "[^/]";
          return part.replace(/[.+^${}()|[\]\\]/g, "\\$&");
        })
        .join("");
      return { negate, regex: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = path.split("/");
    let excluded = false;
    for (const rule of rules) {
      // A rule excludes a path when it matches the path or one of its parent directories.
      for (let n = 1; n <= parts.length; n++) {
        if (rule.regex.test(parts.slice(0, n).join("/"))) {
          excluded = !rule.negate;
          break;
        }
      }
    }
    return excluded;
  };
}

function walk(dir: string, skip: RegExp): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = join(dir, entry);
    const rel = relative(root, full);
    if (skip.test(rel)) return [];
    return statSync(full).isDirectory() ? walk(full, skip) : [rel];
  });
}

describe(".dockerignore", () => {
  const ignored = dockerignore(readFileSync(join(root, ".dockerignore"), "utf8"));

  test("the matcher follows Docker's rules", () => {
    const check = dockerignore("**/node_modules\nproto/gen\n*.md\n!README.md\n");
    expect(check("node_modules/x/index.js")).toBe(true);
    expect(check("services/cube/node_modules/a")).toBe(true);
    expect(check("proto/gen/unimatrix/a.ts")).toBe(true);
    expect(check("proto/unimatrix/a.proto")).toBe(false);
    expect(check("NOTES.md")).toBe(true);
    expect(check("README.md")).toBe(false);
  });

  test("keeps installed, generated, built and secret files out of the context", () => {
    for (const path of [
      "node_modules/yaml/package.json",
      "services/cube/node_modules/x",
      "services/cube/dist/index.js",
      "proto/gen/unimatrix/cube/v1/cube_pb.ts",
      "services/cube/generated/prisma/client.ts",
      ".git/HEAD",
      "data/cube/pgdata/PG_VERSION",
      "services/gateway/.env",
      "packages/service-kit/tsconfig.tsbuildinfo",
    ]) {
      expect({ path, ignored: ignored(path) }).toEqual({ path, ignored: true });
    }
  });

  test("keeps every file the build needs: manifests, configs, scripts, protos and sources", () => {
    const needed = [
      "package.json",
      "package-lock.json",
      "tsconfig.json",
      "tsconfig.base.json",
      "buf.yaml",
      "buf.gen.yaml",
      "scripts/generate.mjs",
      "scripts/prisma-engine-stub/schema-engine",
      "deploy/docker/assemble-runtime.sh",
      ...pkg.workspaces.flatMap((ws) => [`${ws}/package.json`, `${ws}/tsconfig.json`]),
      ...pkg.workspaces.flatMap((ws) =>
        walk(join(root, ws), /(node_modules|dist|gen|generated|test|bench|\.tsbuildinfo)$/),
      ),
    ];
    expect(needed.filter((path) => path.endsWith(".ts")).length).toBeGreaterThan(20);
    for (const path of needed) {
      expect({ path, exists: existsSync(join(root, path)), ignored: ignored(path) }).toEqual({
        path,
        exists: true,
        ignored: false,
      });
    }
  });
});
