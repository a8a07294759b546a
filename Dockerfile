# syntax=docker/dockerfile:1.7
#
# One image for the whole workspace: built once, the command selects the service.
#
#   docker build -t unimatrix .                                   # default: all four in one process
#   docker run --rm unimatrix cube                                # one service: cube|device|presence|gateway
#   docker build --build-arg SERVICE=cube -t unimatrix-cube .     # an image whose default command is one service
#   docker run --rm --entrypoint node unimatrix apps/unimatrix/dist/migrate.js   # migrations, then exit
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -t unimatrix .    # OCI labels filled in
#
# Health outside Kubernetes (no HEALTHCHECK baked in: the port depends on the command): the probe
# command asks grpc.health.v1 (exit 0 only when SERVING) or an HTTP path (exit 0 only on 200):
#   docker run -d --health-cmd 'node apps/unimatrix/dist/probe.js grpc://127.0.0.1:7001' unimatrix cube
#   docker run -d --health-cmd 'node apps/unimatrix/dist/probe.js http://127.0.0.1:8080/readyz' unimatrix gateway
#
# The Helm chart (deploy/k8s/unimatrix) runs one image for every Deployment and passes the service
# name as the container's args; the migration Job overrides the command with migrate.js.

ARG NODE_VERSION=24
# all | cube | device | presence | gateway | migrate: which final stage becomes the default target.
ARG SERVICE=all

# ---------------------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS base
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false
WORKDIR /app

# Manifests only, so the dependency layers stay cached until a package.json or the lockfile changes.
# Every workspace of the root package.json is listed here (deploy/k8s/test checks it).
FROM base AS manifests
COPY package.json package-lock.json ./
COPY proto/package.json proto/
COPY packages/service-kit/package.json packages/service-kit/
COPY apps/machine/package.json apps/machine/
COPY apps/unimatrix/package.json apps/unimatrix/
COPY services/cube/package.json services/cube/
COPY services/device/package.json services/device/
COPY services/presence/package.json services/presence/
COPY services/gateway/package.json services/gateway/

# ---------------------------------------------------------------------------------------------
# build: all dependencies (dev included), generate (buf + prisma generate), compile (tsc --build),
# then gather what the runtime needs under /out, keeping the workspace layout.
FROM manifests AS build
# Install scripts are not needed: generate runs explicitly below, after the sources are copied.
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts
COPY . .
RUN npm run generate && npm run build
RUN sh deploy/docker/assemble-runtime.sh /out

# ---------------------------------------------------------------------------------------------
# prod-deps: production dependencies only (workspace links point at the folders copied from /out).
# --omit=optional as well: the lockfile marks the Prisma CLI, TypeScript and their trees
# "devOptional" (optional peers of @prisma/client that the root devDependencies provide), which
# --omit=dev alone keeps (354 MB instead of 124 MB). The only optional production package today
# is pg-cloudflare, which Node never loads.
FROM manifests AS prod-deps
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --omit=optional --ignore-scripts
# Prisma ships the query compiler for every engine; the services load the Postgres one only.
COPY deploy/docker/prune-runtime.sh /tmp/prune-runtime.sh
RUN sh /tmp/prune-runtime.sh /app && rm /tmp/prune-runtime.sh

# ---------------------------------------------------------------------------------------------
# runtime: no dev dependencies, no npm, no sources. Files are owned by root (the app user can read
# but not change them) and nothing is written outside /tmp, so the root filesystem can be read-only.
FROM base AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="unimatrix" \
      org.opencontainers.image.description="Coordination plane for teams of AI agents and the machines they run on: cube, device, presence and gateway in one image." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/unimatrix/unimatrix" \
      org.opencontainers.image.documentation="deploy/k8s/README.md"
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps \
    UMX_DATA_DIR=/data
# /data: the embedded default's PGlite files (no DATABASE_URL); mount a volume there to keep them.
# Under Kubernetes the services use Postgres and it is never written.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
    && mkdir -p /data \
    && chown 1000:1000 /data
# The whole prod-deps tree, not only /app/node_modules: npm nests a workspace's own node_modules
# when versions differ (none today: the root package.json's `overrides` keeps one PGlite).
COPY --from=prod-deps /app/ ./
COPY --from=build /out/ ./
# uid/gid 1000 is the image's unprivileged "node" user; numeric so runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 7001 7002 7003 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "apps/unimatrix/dist/main.js"]

# ---------------------------------------------------------------------------------------------
# Final stages: the same image with a different default command.
FROM runtime AS all
CMD []

FROM runtime AS cube
CMD ["cube"]

FROM runtime AS device
CMD ["device"]

FROM runtime AS presence
CMD ["presence"]

FROM runtime AS gateway
CMD ["gateway"]

FROM runtime AS migrate
ENTRYPOINT ["node", "apps/unimatrix/dist/migrate.js"]
CMD []

# The default target: the stage named by SERVICE.
FROM ${SERVICE} AS final
