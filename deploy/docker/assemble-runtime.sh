#!/bin/sh
# Gathers what the runtime image needs from a built workspace into <out>, keeping the workspace
# layout: the root package.json and, per workspace, its package.json, dist/ and SQL migrations.
# Run from the repository root after `npm run generate && npm run build` (the Dockerfile's build
# stage does). Production dependencies are installed separately (npm ci --omit=dev).
set -eu
out="${1:?usage: assemble-runtime.sh <out-dir>}"
mkdir -p "$out"
cp package.json "$out/"
for ws in $(node -p "require('./package.json').workspaces.join(' ')"); do
  if [ ! -d "$ws/dist" ]; then
    echo "assemble-runtime: $ws/dist is missing; build first" >&2
    exit 1
  fi
  mkdir -p "$out/$ws"
  # The composition's one list of services, read at run time next to its dist/.
  if [ -f "$ws/services.json" ]; then cp "$ws/services.json" "$out/$ws/"; fi
  cp "$ws/package.json" "$out/$ws/"
  cp -R "$ws/dist" "$out/$ws/dist"
  # A service's generated Prisma client, compiled in place beside src/ (dist/ requires it there).
  if [ -d "$ws/generated" ]; then cp -R "$ws/generated" "$out/$ws/generated"; fi
  if [ -d "$ws/prisma/migrations" ]; then
    mkdir -p "$out/$ws/prisma"
    cp -R "$ws/prisma/migrations" "$out/$ws/prisma/migrations"
  fi
done
find "$out" -name '*.tsbuildinfo' -delete
