#!/usr/bin/env bash
# One-time set-up on a fresh machine: Python environment, front-end libraries, Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# No byte-compiling at install: pip would compile every module of every package (torch's and
# sympy's thousands) where Python compiles, once, only what is imported (2.3 min -> 1 min).
.venv/bin/python -m pip install -q --no-compile -e '.[test]'
bash scripts/vendor.sh
# Browser tests drive Debian's Chromium; never a downloaded browser.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Chromium with apt-get for the browser tests (a few minutes; output in var/apt-chromium.log)"
  mkdir -p var
  (apt-get update -qq && apt-get install -y -qq chromium) >var/apt-chromium.log 2>&1 \
    && echo "Chromium installed" \
    || echo "could not install chromium (see var/apt-chromium.log): browser tests will be skipped"
fi
