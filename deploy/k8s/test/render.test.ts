// Renders the chart with the real Helm binary (helm.ts) and checks the manifests a cluster would get.
import { join } from "node:path";
import { defaultValues, examplesDir, lookup, mergeValues, readYaml, type Values, withValue } from "./chart";
import { HelmError, helmNotes, helmTemplate, type Manifest } from "./helm";

const defaults = defaultValues();
const example = (file: string) => mergeValues(defaults, readYaml(join(examplesDir, file)));
const minimal = example("minimal.yaml");
const manifests = (values: Values) => helmTemplate(values);
const get = (doc: unknown, path: string): unknown => lookup(doc, path.split(".")).value;
const find = (docs: Manifest[], kind: string, name: string) => {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  if (!doc) throw new Error(`no ${kind} ${name}`);
  return doc;
};
const container = (deployment: Manifest) => get(deployment, "spec.template.spec.containers.0") as Values;
const envOf = (deployment: Manifest) =>
  (container(deployment).env as { name: string; value?: string; valueFrom?: Values }[]) ?? [];
const count = (docs: Manifest[]) =>
  docs.reduce<Record<string, number>>((acc, d) => {
    acc[d.kind] = (acc[d.kind] ?? 0) + 1;
    return acc;
  }, {});

describe("rendering", () => {
  test("values.yaml alone is refused, naming the missing setting", () => {
    expect(() => manifests(defaults)).toThrow(HelmError);
    expect(() => manifests(defaults)).toThrow(/secrets\.databaseUrl is required/);
    expect(() => manifests(withValue(minimal, "secrets.internalKey", ""))).toThrow(/secrets\.internalKey is required/);
  });

  test.each(["minimal.yaml", "existing-secret.yaml", "single-replica.yaml", "production.yaml"])(
    "%s renders to well-formed manifests with valid names and labels",
    (file) => {
      const docs = manifests(example(file));
      expect(docs.length).toBeGreaterThan(10);
      for (const doc of docs) {
        expect(typeof doc.apiVersion).toBe("string");
        expect(doc.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
        expect(doc.metadata.name.length).toBeLessThanOrEqual(63);
        for (const value of Object.values(doc.metadata.labels ?? {})) {
          expect(String(value)).toMatch(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/);
        }
      }
    },
  );

  test("the default install has every piece: four Deployments, Services (+3 headless), PDBs, policies", () => {
    expect(count(manifests(minimal))).toEqual({
      ConfigMap: 1,
      Deployment: 4,
      Job: 1,
      NetworkPolicy: 4,
      Pod: 1,
      PodDisruptionBudget: 4,
      Secret: 2,
      Service: 7,
      ServiceAccount: 1,
    });
  });

  test("each Deployment runs its service, with the right probes, replicas and grace", () => {
    const docs = manifests(minimal);
    for (const [service, port] of [
      ["cube", 7001],
      ["device", 7002],
      ["presence", 7003],
    ] as const) {
      const deployment = find(docs, "Deployment", `umx-unimatrix-${service}`);
      const c = container(deployment);
      expect(c.args).toEqual([service]);
      expect(c.command).toBeUndefined();
      expect(c.ports).toEqual([
        { name: "grpc", containerPort: port, protocol: "TCP" },
        { name: "metrics", containerPort: port + 2100, protocol: "TCP" },
      ]);
      // Alive whatever the database does (no restart in an outage); ready only while it serves.
      for (const probe of ["startupProbe", "livenessProbe"])
        expect(get(c, `${probe}.grpc`)).toEqual({ port, service: "liveness" });
      expect(get(c, "readinessProbe.grpc")).toEqual({ port });
      expect(get(deployment, "spec.replicas")).toBe(2);
      // preStop 2 s + ceil((drain delay 5000 + grace 10000) / 1000) + margin 5.
      expect(get(deployment, "spec.template.spec.terminationGracePeriodSeconds")).toBe(22);
      expect(get(c, "lifecycle.preStop.exec.command")).toEqual(["sleep", "2"]);
      // The secrets, then the service's own settings from services.<name>.env.
      const own = Object.keys((get(minimal, `services.${service}.env`) ?? {}) as Values).sort(); // Helm ranges maps in key order
      expect(envOf(deployment).map((e) => e.name)).toEqual([
        "DATABASE_URL",
        "REDIS_URL",
        "UMX_INTERNAL_KEY",
        "UMX_OPERATOR_TOKEN",
        ...own,
      ]);
    }
    const gateway = find(docs, "Deployment", "umx-unimatrix-gateway");
    const c = container(gateway);
    expect(c.args).toEqual(["gateway"]);
    expect(get(c, "livenessProbe.httpGet")).toEqual({ path: "/healthz", port: "http" });
    expect(get(c, "readinessProbe.httpGet")).toEqual({ path: "/readyz", port: "http" });
    // The gateway owns no tables: no database URL.
    const gatewayOwn = Object.keys((get(minimal, "services.gateway.env") ?? {}) as Values).sort();
    expect(envOf(gateway).map((e) => e.name)).toEqual([
      "REDIS_URL",
      "UMX_INTERNAL_KEY",
      "UMX_OPERATOR_TOKEN",
      ...gatewayOwn,
    ]);
    expect(get(envOf(gateway)[2], "valueFrom.secretKeyRef.optional")).toBe(true);
  });

  test("the ConfigMap carries ports, in-cluster addresses and config.env, as strings", () => {
    const configmap = find(manifests(minimal), "ConfigMap", "umx-unimatrix");
    expect(configmap.data).toEqual({
      CUBE_PORT: "7001",
      DEVICE_PORT: "7002",
      PRESENCE_PORT: "7003",
      GATEWAY_PORT: "8080",
      CUBE_METRICS_PORT: "9101",
      DEVICE_METRICS_PORT: "9102",
      PRESENCE_METRICS_PORT: "9103",
      GATEWAY_METRICS_PORT: "9100",
      // In-cluster clients dial the headless Services, so grpc-js balances over every pod.
      CUBE_ADDRESS: "dns:///umx-unimatrix-cube-headless:7001",
      DEVICE_ADDRESS: "dns:///umx-unimatrix-device-headless:7002",
      PRESENCE_ADDRESS: "dns:///umx-unimatrix-presence-headless:7003",
      PRESENCE_CUBE_ADDRESS: "dns:///umx-unimatrix-cube-headless:7001",
      CUBE_PRESENCE_ADDRESS: "dns:///umx-unimatrix-presence-headless:7003",
      LOG_LEVEL: "info",
      // The identity provider: off by default (Unimatrix tokens only).
      OIDC_ISSUER: "",
      OIDC_AUDIENCE: "",
      OIDC_SCOPE: "unimatrix",
      OIDC_JWKS_URL: "",
      UMX_BIND_HOST: "0.0.0.0",
      UMX_BUS_PREFIX: "umx",
      UMX_DATA_DIR: "./data",
      UMX_DB_PROBE_MS: "2000",
      UMX_DRAIN_DELAY_MS: "5000",
      UMX_GRPC_MAX_CONNECTION_AGE_MS: "300000",
      UMX_SHUTDOWN_GRACE_MS: "10000",
    });
  });

  test("large whole numbers stay whole (not 6.048e+08) in the ConfigMap and per-service env", () => {
    let values = withValue(minimal, "config.env.SOME_BUDGET_BYTES", 1073741824);
    values = withValue(values, "services.presence.env.PRESENCE_RETENTION_MS", 604800000);
    const docs = manifests(values);
    expect((find(docs, "ConfigMap", "umx-unimatrix").data as Values).SOME_BUDGET_BYTES).toBe("1073741824");
    const presence = envOf(find(docs, "Deployment", "umx-unimatrix-presence"));
    expect(presence.find((e) => e.name === "PRESENCE_RETENTION_MS")?.value).toBe("604800000");
    // Only the presence pods get presence's own variables.
    expect(envOf(find(docs, "Deployment", "umx-unimatrix-cube")).some((e) => e.name === "PRESENCE_RETENTION_MS")).toBe(
      false,
    );
  });

  test("the termination grace follows the drain: preStop + ceil(drain delay + grace) + margin", () => {
    const docs = manifests(example("production.yaml"));
    const grace = get(
      find(docs, "Deployment", "umx-unimatrix-cube"),
      "spec.template.spec.terminationGracePeriodSeconds",
    );
    expect(grace).toBe(10 + Math.ceil((5000 + 25000) / 1000) + 10);
    const odd = manifests(withValue(minimal, "config.env.UMX_SHUTDOWN_GRACE_MS", "12001"));
    expect(
      get(find(odd, "Deployment", "umx-unimatrix-device"), "spec.template.spec.terminationGracePeriodSeconds"),
    ).toBe(2 + Math.ceil((5000 + 12001) / 1000) + 5);
  });

  test("the chart's Secret holds the four settings; the migration hook Secret only the database URL", () => {
    const docs = manifests(withValue(minimal, "secrets.operatorToken", "umx_operator_0123456789abcdef"));
    expect(find(docs, "Secret", "umx-unimatrix").stringData).toEqual({
      DATABASE_URL: minimal.secrets && (minimal.secrets as Values).databaseUrl,
      REDIS_URL: (minimal.secrets as Values).redisUrl,
      UMX_INTERNAL_KEY: (minimal.secrets as Values).internalKey,
      UMX_OPERATOR_TOKEN: "umx_operator_0123456789abcdef",
    });
    const hook = find(docs, "Secret", "umx-unimatrix-migrations");
    expect(Object.keys(hook.stringData as Values)).toEqual(["DATABASE_URL"]);
    expect(hook.metadata.annotations?.["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
    expect(find(manifests(minimal), "Secret", "umx-unimatrix").stringData).not.toHaveProperty("UMX_OPERATOR_TOKEN");
  });

  test("the console's OIDC client secret comes from the operator's Secret, to the gateway only", () => {
    const docs = manifests(withValue(minimal, "oidc.clientSecret.existingSecret", "umx-oidc"));
    const gateway = envOf(find(docs, "Deployment", "umx-unimatrix-gateway"));
    expect(gateway.find((e) => e.name === "OIDC_CLIENT_SECRET")?.valueFrom).toEqual({
      secretKeyRef: { name: "umx-oidc", key: "OIDC_CLIENT_SECRET" },
    });
    for (const name of ["cube", "device", "presence"]) {
      expect(envOf(find(docs, "Deployment", `umx-unimatrix-${name}`)).map((e) => e.name)).not.toContain(
        "OIDC_CLIENT_SECRET",
      );
    }
    // Without one the gateway gets no such variable (a public client).
    expect(envOf(find(manifests(minimal), "Deployment", "umx-unimatrix-gateway")).map((e) => e.name)).not.toContain(
      "OIDC_CLIENT_SECRET",
    );
    expect(find(docs, "Secret", "umx-unimatrix").stringData).not.toHaveProperty("OIDC_CLIENT_SECRET");
  });

  test("with an existing Secret the chart creates none and reads the given keys from it", () => {
    const docs = manifests(example("production.yaml"));
    expect(docs.filter((d) => d.kind === "Secret")).toEqual([]);
    const env = envOf(find(docs, "Deployment", "umx-unimatrix-cube"));
    expect(env.map((e) => get(e, "valueFrom.secretKeyRef"))).toEqual([
      { name: "unimatrix-prod", key: "postgres-url" },
      { name: "unimatrix-prod", key: "redis-url" },
      { name: "unimatrix-prod", key: "internal-key" },
      { name: "unimatrix-prod", key: "operator-token", optional: true },
    ]);
    const job = find(docs, "Job", "umx-unimatrix-migrate");
    expect(get(job, "spec.template.spec.containers.0.env.0.valueFrom.secretKeyRef")).toEqual({
      name: "unimatrix-prod",
      key: "postgres-url",
    });
  });

  test("the migration Job runs migrate.js as a hook, after its Secret, non-root, without the chart's ServiceAccount", () => {
    const docs = manifests(minimal);
    const job = find(docs, "Job", "umx-unimatrix-migrate");
    expect(job.metadata.annotations).toEqual({
      "helm.sh/hook": "pre-install,pre-upgrade",
      "helm.sh/hook-weight": "-5",
      "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    });
    const spec = get(job, "spec.template.spec") as Values;
    expect(spec.serviceAccountName).toBeUndefined();
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(get(spec, "securityContext.runAsNonRoot")).toBe(true);
    expect(get(spec, "containers.0.command")).toEqual(["node", "apps/unimatrix/dist/migrate.js"]);
    expect(get(spec, "containers.0.securityContext.readOnlyRootFilesystem")).toBe(true);
    const hookWeight = Number(
      find(docs, "Secret", "umx-unimatrix-migrations").metadata.annotations?.["helm.sh/hook-weight"],
    );
    expect(hookWeight).toBeLessThan(-5);
    expect(count(manifests(withValue(minimal, "migrations.enabled", false))).Job).toBeUndefined();
    const production = find(manifests(example("production.yaml")), "Job", "umx-unimatrix-migrate");
    expect(get(production, "spec.template.spec.serviceAccountName")).toBe("unimatrix-migrations");
    const existing = withValue(withValue(minimal, "serviceAccount.create", false), "serviceAccount.name", "shared-sa");
    expect(
      get(find(manifests(existing), "Job", "umx-unimatrix-migrate"), "spec.template.spec.serviceAccountName"),
    ).toBe("shared-sa");
  });

  test("autoscaling creates an HPA and leaves replicas to it; min > max is refused", () => {
    const docs = manifests(example("production.yaml"));
    expect(count(docs).HorizontalPodAutoscaler).toBe(4);
    expect(get(find(docs, "Deployment", "umx-unimatrix-cube"), "spec.replicas")).toBeUndefined();
    const hpa = find(docs, "HorizontalPodAutoscaler", "umx-unimatrix-presence");
    expect(get(hpa, "spec")).toMatchObject({
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "umx-unimatrix-presence" },
      minReplicas: 3,
      maxReplicas: 10,
    });
    expect((get(hpa, "spec.metrics") as Values[]).map((m) => get(m, "resource.name"))).toEqual(["cpu", "memory"]);
    const bad = withValue(
      withValue(minimal, "services.cube.autoscaling.enabled", true),
      "services.cube.autoscaling.minReplicas",
      5,
    );
    expect(() => manifests(withValue(bad, "services.cube.autoscaling.maxReplicas", 3))).toThrow(
      "services.cube.autoscaling: minReplicas (5) is greater than maxReplicas (3)",
    );
  });

  test("NetworkPolicies: gRPC services admit this release's services (and extraFrom); the gateway gatewayFrom", () => {
    const docs = manifests(example("production.yaml"));
    const cube = find(docs, "NetworkPolicy", "umx-unimatrix-cube");
    expect(get(cube, "spec.ingress.0.ports")).toEqual([{ port: 7001, protocol: "TCP" }]);
    expect(get(cube, "spec.ingress.0.from")).toEqual([
      {
        podSelector: {
          matchLabels: { "app.kubernetes.io/name": "unimatrix", "app.kubernetes.io/instance": "umx" },
          matchExpressions: [
            { key: "app.kubernetes.io/component", operator: "In", values: ["cube", "device", "presence", "gateway"] },
          ],
        },
      },
      { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "agent-hosts" } } },
    ]);
    const gateway = find(docs, "NetworkPolicy", "umx-unimatrix-gateway");
    expect(get(gateway, "spec.ingress.0.from")).toEqual([
      { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } } },
    ]);
    // With no gatewayFrom the gateway takes traffic from anywhere (no `from`).
    const open = find(manifests(minimal), "NetworkPolicy", "umx-unimatrix-gateway");
    expect(get(open, "spec.ingress.0")).toEqual({ ports: [{ port: 8080, protocol: "TCP" }] });
    // Pod labels match the policy's selector.
    const podLabels = get(find(docs, "Deployment", "umx-unimatrix-gateway"), "spec.template.metadata.labels") as Values;
    expect(podLabels).toMatchObject({
      "app.kubernetes.io/name": "unimatrix",
      "app.kubernetes.io/instance": "umx",
      "app.kubernetes.io/component": "gateway",
    });
  });

  test("Services: gRPC with appProtocol grpc plus a headless twin; the gateway http; selectors match pods", () => {
    const docs = manifests(minimal);
    const cube = find(docs, "Service", "umx-unimatrix-cube");
    expect(get(cube, "spec.ports")).toEqual([
      { name: "grpc", port: 7001, targetPort: "grpc", protocol: "TCP", appProtocol: "grpc" },
      { name: "metrics", port: 9101, targetPort: "metrics", protocol: "TCP", appProtocol: "http" },
    ]);
    expect(get(find(docs, "Service", "umx-unimatrix-cube-headless"), "spec.clusterIP")).toBe("None");
    const gateway = find(docs, "Service", "umx-unimatrix-gateway");
    expect(get(gateway, "spec.ports.0")).toMatchObject({ name: "http", port: 8080, appProtocol: "http" });
    for (const service of docs.filter((d) => d.kind === "Service")) {
      const component = (get(service, "spec.selector") as Values)["app.kubernetes.io/component"] as string;
      const pods = get(
        find(docs, "Deployment", `umx-unimatrix-${component}`),
        "spec.template.metadata.labels",
      ) as Values;
      expect(pods).toMatchObject(get(service, "spec.selector") as Values);
    }
  });

  test("the Ingress (when enabled) routes every host and path to the gateway, with TLS and SSE annotations", () => {
    const docs = manifests(example("production.yaml"));
    const ingress = find(docs, "Ingress", "umx-unimatrix-gateway");
    expect(get(ingress, "spec.ingressClassName")).toBe("nginx");
    expect(get(ingress, "spec.tls")).toEqual([{ secretName: "unimatrix-tls", hosts: ["unimatrix.example.com"] }]);
    expect(get(ingress, "spec.rules.0")).toEqual({
      host: "unimatrix.example.com",
      http: {
        paths: [
          {
            path: "/",
            pathType: "Prefix",
            backend: { service: { name: "umx-unimatrix-gateway", port: { name: "http" } } },
          },
        ],
      },
    });
    expect(ingress.metadata.annotations?.["nginx.ingress.kubernetes.io/proxy-buffering"]).toBe("off");
    expect(count(manifests(minimal)).Ingress).toBeUndefined();
  });

  test("single-replica: one replica each, no PDBs, no policies, no spread constraints", () => {
    const docs = manifests(example("single-replica.yaml"));
    const kinds = count(docs);
    expect(kinds.PodDisruptionBudget).toBeUndefined();
    expect(kinds.NetworkPolicy).toBeUndefined();
    for (const d of docs.filter((x) => x.kind === "Deployment")) {
      expect(get(d, "spec.replicas")).toBe(1);
      expect(get(d, "spec.template.spec.topologySpreadConstraints")).toBeUndefined();
    }
    expect(get(find(docs, "ConfigMap", "umx-unimatrix"), "data.LOG_LEVEL")).toBe("debug");
  });

  test("topology spread: one constraint per key, selecting the service's own pods", () => {
    const docs = manifests(minimal);
    const constraints = get(
      find(docs, "Deployment", "umx-unimatrix-device"),
      "spec.template.spec.topologySpreadConstraints",
    );
    expect(constraints).toEqual(
      ["kubernetes.io/hostname", "topology.kubernetes.io/zone"].map((topologyKey) => ({
        topologyKey,
        maxSkew: 1,
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: {
          matchLabels: {
            "app.kubernetes.io/name": "unimatrix",
            "app.kubernetes.io/instance": "umx",
            "app.kubernetes.io/component": "device",
          },
        },
      })),
    );
  });

  test("a configuration change changes the pods' checksum annotation (so they roll)", () => {
    const checksum = (values: Values) =>
      get(
        find(manifests(values), "Deployment", "umx-unimatrix-cube"),
        "spec.template.metadata.annotations.checksum/config",
      );
    expect(checksum(minimal)).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum(withValue(minimal, "config.env.LOG_LEVEL", "debug"))).not.toBe(checksum(minimal));
    expect(checksum(withValue(minimal, "services.cube.replicas", 5))).toBe(checksum(minimal));
  });

  test("pods are non-root, read-only, tokenless, with /tmp as a sized emptyDir", () => {
    const spec = get(find(manifests(minimal), "Deployment", "umx-unimatrix-presence"), "spec.template.spec") as Values;
    expect(spec.serviceAccountName).toBe("umx-unimatrix");
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(get(spec, "containers.0.securityContext")).toEqual({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(spec.volumes).toEqual([{ name: "tmp", emptyDir: { sizeLimit: "64Mi" } }]);
  });

  test("NOTES.txt names the in-cluster addresses", () => {
    const notes = helmNotes(minimal);
    expect(notes).toContain("cube      grpc  umx-unimatrix-cube:7001");
    expect(notes).toContain("kubectl -n unimatrix port-forward svc/umx-unimatrix-gateway 8080");
  });
});
