#!/usr/bin/env bash
# Copy front-end libraries from node_modules (installed from package-lock.json) into static/vendor.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=(
  htmx.org/dist/htmx.min.js
  swagger-ui-dist/swagger-ui-bundle.js
  swagger-ui-dist/swagger-ui.css
  redoc/bundles/redoc.standalone.js
)
for f in "${FILES[@]}"; do
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
