#!/bin/sh
# Smoke-tests the runtime image's file tree without Docker: assembles what the Dockerfile's
# runtime stage holds (production dependencies + dist/ + migrations) in a scratch directory, runs
# the migrations, starts the four services as separate processes (as the chart does) against a
# real Postgres and Redis, waits for the gateway's /readyz, stops them with SIGTERM and checks that
# nothing was written into the tree (read-only root filesystem).
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/umx_smoke REDIS_URL=redis://127.0.0.1:6379 \
#     sh deploy/docker/smoke-runtime.sh
#
# Run from the repository root after `npm ci && npm run build`. Needs the npm registry or cache.
set -eu
: "${DATABASE_URL:?DATABASE_URL must name a Postgres database to migrate}"
: "${REDIS_URL:?REDIS_URL must name a Redis}"
work="${SMOKE_DIR:-$(mktemp -d)}"
base_port="${SMOKE_BASE_PORT:-17100}"
repo="$(pwd)"

echo "smoke: assembling the runtime tree in $work/app"
rm -rf "$work/app" "$work/out"
sh deploy/docker/assemble-runtime.sh "$work/out"
mkdir -p "$work/app"
cp package-lock.json "$work/app/"
(cd "$work/out" && find . -name package.json -not -path '*/dist/*') | while read -r manifest; do
  mkdir -p "$work/app/$(dirname "$manifest")"
  cp "$work/out/$manifest" "$work/app/$manifest"
done
(cd "$work/app" && npm ci --omit=dev --omit=optional --ignore-scripts --prefer-offline --no-audit --no-fund >/dev/null)
sh deploy/docker/prune-runtime.sh "$work/app"
cp -R "$work/out/." "$work/app/"
for dev in typescript prisma jest @biomejs/biome @bufbuild/buf; do
  if [ -e "$work/app/node_modules/$dev" ]; then echo "smoke: dev dependency $dev in the runtime tree" >&2; exit 1; fi
done
echo "smoke: node_modules $(du -sh "$work/app/node_modules" | cut -f1)"

cd "$work/app"
find . -path ./node_modules -prune -o -type f -print | sort >"$work/before.txt"
export UMX_INTERNAL_KEY="${UMX_INTERNAL_KEY:-smoke-internal-key-0123456789abcdef0123}"
export UMX_BUS_PREFIX="${UMX_BUS_PREFIX:-umx-smoke-$$}"
export NODE_ENV=production
export CUBE_PORT=$((base_port + 1)) DEVICE_PORT=$((base_port + 2)) PRESENCE_PORT=$((base_port + 3))
export GATEWAY_PORT=$((base_port + 80))
export CUBE_ADDRESS="127.0.0.1:$CUBE_PORT" DEVICE_ADDRESS="127.0.0.1:$DEVICE_PORT" PRESENCE_ADDRESS="127.0.0.1:$PRESENCE_PORT"

node apps/unimatrix/dist/migrate.js
pids=""
stop() {
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $pids; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT
for service in cube device presence gateway; do
  node apps/unimatrix/dist/main.js "$service" >"$work/$service.log" 2>&1 &
  pids="$pids $!"
done
ready=""
for _ in $(seq 1 60); do
  ready="$(node -e "fetch('http://127.0.0.1:$GATEWAY_PORT/readyz').then(r=>r.text()).then(t=>console.log(t),()=>{})")"
  case "$ready" in *'"status":"ready"'*) break ;; esac
  sleep 1
done
echo "smoke: /readyz $ready"
stop
trap - EXIT
case "$ready" in *'"status":"ready"'*) ;; *) echo "smoke: the gateway never became ready; logs in $work" >&2; exit 1 ;; esac
find . -path ./node_modules -prune -o -type f -print | sort >"$work/after.txt"
if ! diff "$work/before.txt" "$work/after.txt" >/dev/null; then
  echo "smoke: files were written into the tree:" >&2
  diff "$work/before.txt" "$work/after.txt" >&2 || true
  exit 1
fi
for service in cube device presence gateway; do
  grep -q '"msg":"stopping"' "$work/$service.log" || { echo "smoke: $service did not stop on SIGTERM" >&2; exit 1; }
done
cd "$repo"
echo "smoke: ok (tree in $work/app)"
