#!/bin/sh
# Removes from an installed production tree what the services never load:
# - Prisma's query-compiler wasm for the database engines the project does not use (every
#   service's generated client loads `query_compiler_fast_bg.postgresql.*` only: provider
#   "postgresql", the default "fast" build; PGlite speaks Postgres too): ~57 of those files' 66 MB;
# - the ES-module builds OpenTelemetry ships for bundlers (`build/esm`, `build/esnext`): Node loads
#   `build/src` (their `main`; their package.json has no `import` condition): ~26 of its ~30 MB.
# deploy/k8s/test/dockerfile.test.ts checks that the generated clients load nothing this deletes.
#
#   sh deploy/docker/prune-runtime.sh <dir-with-node_modules>
set -eu
dir="${1:?usage: prune-runtime.sh <dir-with-node_modules>}"
runtime="$dir/node_modules/@prisma/client/runtime"
if [ ! -d "$runtime" ]; then
  echo "prune-runtime: $runtime is missing; install production dependencies first" >&2
  exit 1
fi
# The engine and build the generated clients use (keep in step with the schemas' generator blocks).
keep="query_compiler_fast_bg.postgresql."
for file in "$runtime"/query_compiler_*; do
  case "$(basename "$file")" in
    "$keep"*) ;;
    *) rm -f "$file" ;;
  esac
done
for pkg in "$dir"/node_modules/@opentelemetry/*; do
  if grep -q '"import"' "$pkg/package.json"; then continue; fi # an ESM entry Node could load: keep
  rm -rf "$pkg/build/esm" "$pkg/build/esnext"
done
