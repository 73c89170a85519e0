#!/usr/bin/env bash
# Copy front-end libraries from node_modules (installed from package-lock.json) into static/vendor,
# and the browser tests' own (axe-core, the accessibility check) into tests/browser/vendor: never
# under static/, so no page of the site can load it.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=(
  htmx.org/dist/htmx.min.js
  swagger-ui-dist/swagger-ui-bundle.js
  swagger-ui-dist/swagger-ui.css
  redoc/bundles/redoc.standalone.js
)
TEST_FILES=(
  axe-core/axe.min.js
)
for f in "${FILES[@]}" "${TEST_FILES[@]}"; do
  if [ ! -f "node_modules/$f" ]; then
    echo "installing front-end libraries from package-lock.json (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
    break
  fi
done
mkdir -p static/vendor
for f in "${FILES[@]}"; do
  cp "node_modules/$f" "static/vendor/$(basename "$f")"
done
mkdir -p tests/browser/vendor
for f in "${TEST_FILES[@]}"; do
  cp "node_modules/$f" "tests/browser/vendor/$(basename "$f")"
done
