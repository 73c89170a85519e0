#!/usr/bin/env bash
# Copy front-end libraries from node_modules (installed from package-lock.json) into static/vendor.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/htmx.org/dist/htmx.min.js ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
mkdir -p static/vendor
cp node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx.min.js
