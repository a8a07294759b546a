import { LIVENESS_SERVICE } from "@unimatrix/service-kit/grpc";
import {
  blank,
  blockErrors,
  defaultValues,
  leafPaths,
  lookup,
  serviceReferences,
  skeleton,
  templates,
  type Values,
  valuesReferences,
} from "./chart";

const values = defaultValues();
const files = templates();
const yamlFiles = [...files.keys()].filter((file) => file.endsWith(".yaml"));
const allText = [...files.values()].join("\n");
const services = values.services as Record<string, Values>;

/** Every rendered document of every YAML template, with its file. */
const documents = yamlFiles.flatMap((file) => skeleton(files.get(file)!).map((doc) => ({ file, doc })));
const ofKind = (kind: string) => documents.filter(({ doc }) => doc.kind === kind).map(({ doc }) => doc);
const get = (doc: unknown, path: string): unknown => lookup(doc, path.split(".")).value;

describe("the blanking check itself", () => {
  test("catches a template that is not well-formed YAML once actions are blanked", () => {
    const broken = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n data:\n  a: b\n";
    expect(() => skeleton(broken)).toThrow();
  });

  test("drops else branches, so both arms of an if do not collide", () => {
    const text = "a:\n  {{- if .x }}\n  b: 1\n  {{- else }}\n  b: 2\n  {{- end }}\n";
    expect(blank(text)).toBe("a:\n  b: 1\n");
    expect(skeleton(text)).toEqual([{ a: { b: 1 } }]);
  });

  test("finds unbalanced blocks", () => {
    expect(blockErrors("{{ if .a }}{{ range .b }}{{ end }}")).toEqual(["{{ if }} is never closed"]);
    expect(blockErrors("{{ end }}")).toHaveLength(1);
  });
});

describe("templates", () => {
  test("the chart has the templates the issue asks for", () => {
    expect([...files.keys()]).toEqual(
      expect.arrayContaining([
        "_helpers.tpl",
        "NOTES.txt",
        "configmap.yaml",
        "secret.yaml",
        "serviceaccount.yaml",
        "deployment.yaml",
        "service.yaml",
        "hpa.yaml",
        "pdb.yaml",
        "networkpolicy.yaml",
        "ingress.yaml",
        "migrations-job.yaml",
      ]),
    );
  });

  test.each([...files.keys()])("%s: every block is closed", (file) => {
    expect(blockErrors(files.get(file)!)).toEqual([]);
  });

  test.each(yamlFiles)("%s: well-formed YAML once template actions are blanked", (file) => {
    const docs = skeleton(files.get(file)!);
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) {
      expect(typeof doc.apiVersion).toBe("string");
      expect(typeof doc.kind).toBe("string");
      expect(get(doc, "metadata.name")).toBeDefined();
      expect(get(doc, "metadata.labels")).toBeDefined();
    }
  });

  test("uses the stable API version of each kind", () => {
    const versions = Object.fromEntries(documents.map(({ doc }) => [doc.kind, doc.apiVersion]));
    expect(versions).toEqual({
      ConfigMap: "v1",
      Deployment: "apps/v1",
      HorizontalPodAutoscaler: "autoscaling/v2",
      HTTPRoute: "gateway.networking.k8s.io/v1",
      Ingress: "networking.k8s.io/v1",
      Job: "batch/v1",
      NetworkPolicy: "networking.k8s.io/v1",
      Pod: "v1",
      PodDisruptionBudget: "policy/v1",
      PrometheusRule: "monitoring.coreos.com/v1",
      Secret: "v1",
      Service: "v1",
      ServiceAccount: "v1",
      ServiceMonitor: "monitoring.coreos.com/v1",
    });
  });
});

describe("values references", () => {
  test("every .Values path a template references exists in values.yaml", () => {
    const refs = valuesReferences(allText);
    expect(refs.length).toBeGreaterThan(30);
    const missing = refs.filter((path) => !lookup(values, path).found).map((path) => path.join("."));
    expect([...new Set(missing)]).toEqual([]);
  });

  test("every $svc path (a service's values) exists under each of the four services", () => {
    const refs = serviceReferences(allText);
    expect(refs.length).toBeGreaterThan(10);
    expect(Object.keys(services).sort()).toEqual(["cube", "device", "gateway", "presence"]);
    const missing = Object.entries(services).flatMap(([name, svc]) =>
      refs.filter((path) => !lookup(svc, path).found).map((path) => `services.${name}.${path.join(".")}`),
    );
    expect([...new Set(missing)]).toEqual([]);
  });

  test("every value in values.yaml is used by some template (no documented-but-ignored keys)", () => {
    const refs = valuesReferences(allText).filter((path) => path.join(".") !== "services");
    const svcRefs = serviceReferences(allText);
    const prefixOf = (a: string[], b: string[]) => a.every((key, i) => b[i] === key);
    const unused = leafPaths(values).filter((leaf) => {
      if (refs.some((ref) => prefixOf(ref, leaf) || prefixOf(leaf, ref))) return false;
      if (leaf[0] === "services" && svcRefs.some((ref) => prefixOf(ref, leaf.slice(2)))) return false;
      return true;
    });
    expect(unused.map((path) => path.join("."))).toEqual([]);
  });
});

describe("what the manifests say", () => {
  const deployments = ofKind("Deployment");
  const pod = deployments[0]!;
  const container = get(pod, "spec.template.spec.containers.0") as Values;

  test("one Deployment template, ranged over the four services, selecting the service by args", () => {
    expect(deployments).toHaveLength(1);
    expect(files.get("deployment.yaml")).toMatch(/range \$name, \$svc := \.Values\.services/);
    expect(container.command).toBeUndefined();
    expect(container.args).toEqual(["x"]);
    expect(files.get("deployment.yaml")).toContain("args: [{{ $name | quote }}]");
  });

  test("gRPC services get native gRPC startup, liveness and readiness probes on their port", () => {
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      expect(get(container, `${probe}.grpc.port`)).toBe("x");
    }
    // Startup and liveness ask the kit's LIVENESS_SERVICE; readiness the server's "" (follows the database).
    expect([get(container, "startupProbe.grpc.service"), get(container, "livenessProbe.grpc.service")]).toEqual([
      LIVENESS_SERVICE,
      LIVENESS_SERVICE,
    ]);
    expect(get(container, "readinessProbe.grpc.service")).toBeUndefined();
    // The gateway arm (dropped by the blanking) probes /healthz and /readyz.
    const text = files.get("deployment.yaml")!;
    expect(text.match(/path: \/healthz/g)).toHaveLength(2);
    expect(text).toContain("path: {{ $root.Values.probes.readiness.gatewayPath }}");
    expect(get(values, "probes.readiness.gatewayPath")).toBe("/readyz");
  });

  test("pods run non-root with a read-only root filesystem, a /tmp emptyDir and no token", () => {
    const podSpec = get(pod, "spec.template.spec") as Values;
    expect(podSpec.automountServiceAccountToken).toBe("x");
    expect(get(values, "serviceAccount.automountToken")).toBe(false);
    expect(values.podSecurityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    expect(values.containerSecurityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(container.volumeMounts).toEqual([{ name: "tmp", mountPath: "/tmp" }]);
    expect(get(podSpec, "volumes.0.emptyDir.sizeLimit")).toBe("x");
  });

  test("preStop sleeps, and the termination grace outlasts preStop plus the drain", () => {
    expect(get(container, "lifecycle.preStop.exec.command")).toEqual(["sleep", "x"]);
    expect(files.get("_helpers.tpl")).toMatch(
      /add \.Values\.shutdown\.preStopSleepSeconds \(div \(add \$drainMs 999\) 1000\) \.Values\.shutdown\.extraGraceSeconds/,
    );
    // The same formula over the default values: the drain delay and the drain both count.
    const shutdown = values.shutdown as { preStopSleepSeconds: number; extraGraceSeconds: number };
    const env = (values.config as { env: Values }).env;
    const drainMs = Number(env.UMX_DRAIN_DELAY_MS ?? 0) + Number(env.UMX_SHUTDOWN_GRACE_MS);
    const grace = shutdown.preStopSleepSeconds + Math.ceil(drainMs / 1000) + shutdown.extraGraceSeconds;
    expect(grace).toBeGreaterThan(shutdown.preStopSleepSeconds + drainMs / 1000);
    expect(grace).toBe(2 + 15 + 5);
  });

  test("Services declare appProtocol grpc (and a headless twin) for the gRPC services, http for the gateway", () => {
    const servicesDocs = ofKind("Service");
    expect(get(servicesDocs[0], "spec.ports.0")).toMatchObject({
      name: "grpc",
      appProtocol: "grpc",
      targetPort: "grpc",
    });
    expect(get(servicesDocs[1], "spec.clusterIP")).toBe("None");
    expect(files.get("service.yaml")).toContain("appProtocol: http");
  });

  test("the migration Job is a pre-install/pre-upgrade hook running migrate.js, after its Secret", () => {
    const [job] = ofKind("Job");
    const annotations = get(job, "metadata.annotations") as Values;
    expect(annotations["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
    const [hookSecret] = ofKind("Secret").filter((s) => get(s, "metadata.annotations") !== undefined);
    const secretAnnotations = get(hookSecret, "metadata.annotations") as Values;
    expect(secretAnnotations["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
    expect(Number(secretAnnotations["helm.sh/hook-weight"])).toBeLessThan(Number(annotations["helm.sh/hook-weight"]));
    expect(get(job, "spec.template.spec.restartPolicy")).toBe("Never");
    expect(get(job, "spec.template.spec.containers.0.command")).toEqual(["node", "apps/unimatrix/dist/migrate.js"]);
  });

  test("NetworkPolicy admits only this release's services to the gRPC ports", () => {
    const [policy] = ofKind("NetworkPolicy");
    const from = get(policy, "spec.ingress.0.from.0.podSelector") as Values;
    expect(get(from, "matchExpressions.0")).toEqual({
      key: "app.kubernetes.io/component",
      operator: "In",
      values: ["cube", "device", "presence", "gateway"],
    });
    expect(Object.keys(get(from, "matchLabels") as Values).sort()).toEqual([
      "app.kubernetes.io/instance",
      "app.kubernetes.io/name",
    ]);
  });

  test("the Ingress routes to the gateway's http port; default annotations turn SSE buffering off", () => {
    const [ingress] = ofKind("Ingress");
    expect(get(ingress, "spec.rules.0.http.paths.0.backend.service.port.name")).toBe("http");
    const annotations = get(values, "ingress.annotations") as Values;
    expect(annotations["nginx.ingress.kubernetes.io/proxy-buffering"]).toBe("off");
    expect(Number(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"])).toBeGreaterThanOrEqual(3600);
  });

  test("HPA and PDB target each service's Deployment and pods", () => {
    const [hpa] = ofKind("HorizontalPodAutoscaler");
    expect(get(hpa, "spec.scaleTargetRef")).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: "x-x" });
    const [pdb] = ofKind("PodDisruptionBudget");
    expect(get(pdb, "spec.maxUnavailable")).toBe("x");
    expect(files.get("hpa.yaml")).toContain("fail (printf");
  });
});
