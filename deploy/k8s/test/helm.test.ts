// The chart through the real Helm binary: `helm lint --strict` and `helm template` over the
// defaults, every example and the production shape, every rendered object validated against the
// Kubernetes (and Prometheus Operator / Gateway API) schemas, and what matters asserted.
import { join } from "node:path";
import {
  chartDir,
  defaultValues,
  exampleFiles,
  examplesDir,
  lookup,
  mergeValues,
  readYaml,
  type Values,
  withValue,
} from "./chart";
import { HelmError, helm, helmLint, helmTemplate, helmVersion, type Manifest } from "./helm";

const defaults = defaultValues();
const example = (file: string) => mergeValues(defaults, readYaml(join(examplesDir, file)));
const production = example("production.yaml");
const get = (doc: unknown, path: string): unknown => lookup(doc, path.split(".")).value;
const find = (docs: Manifest[], kind: string, name: string) => {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  if (!doc) throw new Error(`no ${kind} ${name}`);
  return doc;
};
const container = (docs: Manifest[], service: string) =>
  get(find(docs, "Deployment", `umx-unimatrix-${service}`), "spec.template.spec.containers.0") as Values;

/** The schema class of a rendered object, from the model packages (ESM, hence the dynamic import). */
async function modelOf(doc: Manifest): Promise<{ new (data: unknown): { validate(): void } }> {
  const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/") : ["", doc.apiVersion];
  const module =
    group === "monitoring.coreos.com"
      ? await import(`@kubernetes-models/prometheus-operator/${group}/${version}`)
      : group === "gateway.networking.k8s.io"
        ? await import(`@kubernetes-models/gateway-api/${group}/${version}`)
        : await import(`kubernetes-models/${group ? `${group}/` : ""}${version}`);
  const model = (module as Record<string, unknown>)[doc.kind];
  if (typeof model !== "function") throw new Error(`no schema for ${doc.apiVersion} ${doc.kind}`);
  return model as { new (data: unknown): { validate(): void } };
}

const cases: [string, Values][] = [
  ...exampleFiles().map((file): [string, Values] => [file, example(file)]),
  ["every option on", withValue(withValue(production, "tests.enabled", true), "networkPolicy.enabled", true)],
];

describe("the real Helm", () => {
  test("is Helm 4 (the version the chart README states)", () => {
    expect(helmVersion()).toMatch(/^v4\.\d+\.\d+/);
  });

  test("helm show readme prints the chart's own README", () => {
    expect(helm(["show", "readme", chartDir])).toMatch(/^# unimatrix \(Helm chart\)/);
  });

  test.each(cases)("helm lint --strict passes with %s", (_name, values) => {
    expect(helmLint(values)).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  test("helm lint --strict fails on a schema violation, naming it", () => {
    expect(() => helmLint(withValue(production, "services.cube.metricsPort", "ninety"))).toThrow(HelmError);
    expect(() => helmTemplate(withValue(production, "services.cube.metricsPort", "ninety"))).toThrow(/metricsPort/);
  });

  test.each(cases)("every object rendered with %s validates against its Kubernetes schema", async (_name, values) => {
    const docs = helmTemplate(values);
    expect(docs.length).toBeGreaterThan(15);
    const invalid: string[] = [];
    for (const doc of docs) {
      const Model = await modelOf(doc);
      try {
        new Model(doc).validate();
      } catch (error) {
        invalid.push(`${doc.kind}/${doc.metadata.name}: ${(error as Error).message}`);
      }
    }
    expect(invalid).toEqual([]);
  });

  test("the schema check catches a wrong type (so the check above can fail)", async () => {
    const docs = helmTemplate(production);
    const deployment = structuredClone(find(docs, "Deployment", "umx-unimatrix-cube"));
    (deployment.spec as Values).replicas = "three";
    const Model = await modelOf(deployment);
    expect(() => new Model(deployment).validate()).toThrow(/replicas/);
  });
});

describe("what the production shape renders", () => {
  const docs = helmTemplate(production);

  test("the gateway, presence and cube dial the headless Services with dns:/// (round robin over pods)", () => {
    const data = find(docs, "ConfigMap", "umx-unimatrix").data as Record<string, string>;
    expect(data.CUBE_ADDRESS).toBe("dns:///umx-unimatrix-cube-headless:7001");
    expect(data.DEVICE_ADDRESS).toBe("dns:///umx-unimatrix-device-headless:7002");
    expect(data.PRESENCE_ADDRESS).toBe("dns:///umx-unimatrix-presence-headless:7003");
    expect(data.PRESENCE_CUBE_ADDRESS).toBe("dns:///umx-unimatrix-cube-headless:7001");
    expect(data.CUBE_PRESENCE_ADDRESS).toBe("dns:///umx-unimatrix-presence-headless:7003");
    for (const service of ["cube", "device", "presence"]) {
      const headless = find(docs, "Service", `umx-unimatrix-${service}-headless`);
      expect(get(headless, "spec.clusterIP")).toBe("None");
    }
  });

  test("every process has a metrics port, on its pod and its Service, and nothing routes it outside", () => {
    for (const [service, port] of Object.entries({ cube: 9101, device: 9102, presence: 9103, gateway: 9100 })) {
      expect(container(docs, service).ports).toContainEqual({ name: "metrics", containerPort: port, protocol: "TCP" });
      expect(get(find(docs, "Service", `umx-unimatrix-${service}`), "spec.ports")).toContainEqual(
        expect.objectContaining({ name: "metrics", port, targetPort: "metrics" }),
      );
    }
    const ingress = find(docs, "Ingress", "umx-unimatrix-gateway");
    const backends = (get(ingress, "spec.rules") as Values[]).flatMap((rule) =>
      (get(rule, "http.paths") as Values[]).map((path) => get(path, "backend.service.port")),
    );
    expect(backends.length).toBeGreaterThan(0);
    for (const port of backends) expect(port).toEqual({ name: "http" });
    const route = find(docs, "HTTPRoute", "umx-unimatrix-gateway");
    expect(get(route, "spec.rules.0.backendRefs")).toEqual([{ name: "umx-unimatrix-gateway", port: 8080 }]);
  });

  test("the gRPC services are probed over gRPC health; the gateway over /healthz and /readyz", () => {
    for (const [service, port] of Object.entries({ cube: 7001, device: 7002, presence: 7003 })) {
      const c = container(docs, service);
      // Alive whatever the database does (no restart in an outage); ready only while it serves.
      for (const probe of ["startupProbe", "livenessProbe"])
        expect(get(c, `${probe}.grpc`)).toEqual({ port, service: "liveness" });
      expect(get(c, "readinessProbe.grpc")).toEqual({ port });
    }
    expect(get(container(docs, "gateway"), "readinessProbe.httpGet.path")).toBe("/readyz");
  });

  test("the ServiceMonitor scrapes /metrics on the metrics port of the ClusterIP Services only", () => {
    const monitor = find(docs, "ServiceMonitor", "umx-unimatrix");
    expect(monitor.metadata.labels?.release).toBe("kube-prometheus-stack");
    expect(get(monitor, "spec.endpoints")).toEqual([
      {
        port: "metrics",
        path: "/metrics",
        interval: "15s",
        scrapeTimeout: "5s",
        // The job names the dashboard and the alerts select on: unimatrix-<service>.
        relabelings: [
          {
            sourceLabels: ["__meta_kubernetes_service_label_app_kubernetes_io_component"],
            targetLabel: "job",
            replacement: "unimatrix-$1",
          },
        ],
      },
    ]);
    expect(get(monitor, "spec.selector.matchExpressions")).toContainEqual({
      key: "unimatrix.io/headless",
      operator: "DoesNotExist",
    });
    const selected = docs.filter(
      (d) =>
        d.kind === "Service" &&
        d.metadata.labels?.["app.kubernetes.io/instance"] === "umx" &&
        d.metadata.labels?.["unimatrix.io/headless"] === undefined,
    );
    expect(selected.map((d) => d.metadata.name).sort()).toEqual(
      ["cube", "device", "gateway", "presence"].map((s) => `umx-unimatrix-${s}`),
    );
  });

  test("the metrics ports admit only metrics.from when network policies are on", () => {
    const policy = find(docs, "NetworkPolicy", "umx-unimatrix-cube");
    expect(get(policy, "spec.ingress.1")).toEqual({
      ports: [{ port: 9101, protocol: "TCP" }],
      from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
    });
  });

  test("extraEnv reaches every service container; the image is pinned by digest", () => {
    for (const service of ["cube", "device", "presence", "gateway"]) {
      const c = container(docs, service);
      expect(c.env).toContainEqual({
        name: "OTEL_EXPORTER_OTLP_ENDPOINT",
        value: "http://otel-collector.observability:4318",
      });
      expect(c.image).toMatch(/^registry\.example\.com\/platform\/unimatrix@sha256:[0-9a-f]{64}$/);
    }
  });

  test("the migration Job's pod carries its annotations (a mesh sidecar can be opted out)", () => {
    const job = find(docs, "Job", "umx-unimatrix-migrate");
    expect(get(job, "spec.template.metadata.annotations")).toEqual({ "sidecar.istio.io/inject": "false" });
  });

  test("helm test: a hook Pod probes each service through its Service", () => {
    const pod = find(docs, "Pod", "umx-unimatrix-test-health");
    expect(pod.metadata.annotations?.["helm.sh/hook"]).toBe("test");
    expect(get(pod, "spec.containers.0.command")).toEqual([
      "node",
      "apps/unimatrix/dist/probe.js",
      "grpc://umx-unimatrix-cube:7001",
      "grpc://umx-unimatrix-device:7002",
      "grpc://umx-unimatrix-presence:7003",
      "http://umx-unimatrix-gateway:8080/readyz",
    ]);
  });
});

describe("extension points", () => {
  const base = example("minimal.yaml");

  test("extraEnvFrom, extraVolumes and extraVolumeMounts reach every service pod", () => {
    let values = withValue(base, "extraEnvFrom", [{ configMapRef: { name: "otel" } }]);
    values = withValue(values, "extraVolumes", [{ name: "ca", configMap: { name: "corp-ca" } }]);
    values = withValue(values, "extraVolumeMounts", [{ name: "ca", mountPath: "/etc/ssl/corp", readOnly: true }]);
    const docs = helmTemplate(values);
    for (const service of ["cube", "device", "presence", "gateway"]) {
      const c = container(docs, service);
      expect(c.envFrom).toContainEqual({ configMapRef: { name: "otel" } });
      expect(c.volumeMounts).toContainEqual({ name: "ca", mountPath: "/etc/ssl/corp", readOnly: true });
      const spec = get(find(docs, "Deployment", `umx-unimatrix-${service}`), "spec.template.spec") as Values;
      expect(spec.volumes).toContainEqual({ name: "ca", configMap: { name: "corp-ca" } });
    }
  });

  test("per-service nodeSelector, tolerations and affinity replace the global ones for that service only", () => {
    let values = withValue(base, "nodeSelector", { pool: "general" });
    values = withValue(values, "services.presence.nodeSelector", { pool: "edge" });
    values = withValue(values, "services.presence.tolerations", [
      { key: "edge", operator: "Exists", effect: "NoSchedule" },
    ]);
    values = withValue(values, "services.presence.extraEnv", [{ name: "PRESENCE_ONLY", value: "1" }]);
    const docs = helmTemplate(values);
    const spec = (s: string) => get(find(docs, "Deployment", `umx-unimatrix-${s}`), "spec.template.spec") as Values;
    expect(spec("presence").nodeSelector).toEqual({ pool: "edge" });
    expect(spec("presence").tolerations).toEqual([{ key: "edge", operator: "Exists", effect: "NoSchedule" }]);
    expect(spec("cube").nodeSelector).toEqual({ pool: "general" });
    expect(spec("cube").tolerations).toBeUndefined();
    expect(container(docs, "presence").env).toContainEqual({ name: "PRESENCE_ONLY", value: "1" });
    expect(container(docs, "cube").env).not.toContainEqual({ name: "PRESENCE_ONLY", value: "1" });
  });

  test("an HTTPRoute without a parent Gateway is refused, naming the setting", () => {
    expect(() => helmTemplate(withValue(base, "httpRoute.enabled", true))).toThrow(/httpRoute\.parentRefs/);
  });
});
