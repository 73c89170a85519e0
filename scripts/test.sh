#!/usr/bin/env bash
# `make test`: the whole suite (SQLite and PostgreSQL, Redis, a Celery worker, Chromium) with
# coverage measured in this process and in every Python subprocess it starts (the CLI,
# `proctor serve`, the Celery worker), then the coverage summary: the whole tree, and line and
# branch coverage of the four modules pinned in docs/testing.md.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/coverage
rm -f var/coverage/.coverage*
# Two processes (pytest-xdist), each file kept whole in one of them (its module fixtures made
# once), longest files first (tests/conftest.py: SLOW_FILES); PROCTOR_TEST_PROCESSES=0 runs
# everything in this one process. The API fuzzing runs after, in one process: schemathesis
# gives its per-operation tests one node id, and xdist runs one test per node id (27 of its
# 137 tests).
FUZZ=tests/integration/test_api_fuzz.py
if [ "$#" -eq 0 ]; then
  .venv/bin/python -m pytest -q -ra --durations=25 --cov --cov-report= \
    -n "${PROCTOR_TEST_PROCESSES:-2}" --dist loadfile --no-loadscope-reorder --ignore="$FUZZ"
  status=$?
  .venv/bin/python -m pytest -q -ra --cov --cov-append --cov-report= "$FUZZ"
  fuzz=$?
  [ "$status" -eq 0 ] && status=$fuzz
else  # a part of the suite, as given
  .venv/bin/python -m pytest -q -ra --durations=25 --cov --cov-report= "$@"
  status=$?
fi
.venv/bin/python -m coverage combine -q >/dev/null 2>&1 || true  # late subprocess files, if any
echo
echo "== coverage (lines and branches; subprocesses included) =="
.venv/bin/python -m coverage report --skip-covered --sort=cover | tail -n 40
echo
echo "== the four modules under mutation testing (docs/testing.md) =="
.venv/bin/python -m coverage report --show-missing \
  --include='app/kinds/navigation/metrics.py,app/kinds/tom/rules.py,app/leaderboards/stats.py,app/studies/assignment.py'
exit $status
