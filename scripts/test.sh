#!/usr/bin/env bash
# `make test`: the whole suite (SQLite and PostgreSQL, Redis, a Celery worker, Chromium) with
# coverage measured in this process and in every Python subprocess it starts (the CLI,
# `proctor serve`, the Celery worker), then the coverage summary: the whole tree, and line and
# branch coverage of the four modules pinned in docs/testing.md.
set -uo pipefail
cd "$(dirname "$0")/.."
# Bytecode kept (where the environment says not to write it): the suite starts some hundreds
# of Python processes (the CLI, servers, workers), each of which would otherwise compile the
# modules it imports again.
unset PYTHONDONTWRITEBYTECODE
mkdir -p var/coverage
rm -f var/coverage/.coverage*
# Three processes (pytest-xdist; most of a test's time is a wait on the servers, workers and
# browsers it starts, so three keep two cores busier than two), each file kept whole in one of
# them (its module fixtures made once), longest files first (tests/conftest.py: SLOW_FILES);
# PROCTOR_TEST_PROCESSES=0 runs everything in this one process. The API fuzzing runs in a
# process of its own, beside them (schemathesis gives its per-operation tests one node id, and
# xdist runs one test per node id: 27 of its 137 tests); it uses the CPU the others leave while
# they wait on the processes they start. Its coverage goes to a file of its own
# (COVERAGE_FILE), combined below, and its Redis database is one no other process uses (the
# test processes count down from 15: three use 15, 14 and 13).
FUZZ=tests/integration/test_api_fuzz.py
if [ "$#" -eq 0 ]; then
  mkdir -p var/coverage/fuzz
  rm -f var/coverage/fuzz/.coverage*
  COVERAGE_FILE=var/coverage/fuzz/.coverage PROCTOR_TEST_REDIS=redis://127.0.0.1:6379/12 \
    .venv/bin/python -m pytest -q -ra --cov --cov-report= "$FUZZ" >var/fuzz.log 2>&1 &
  fuzz_pid=$!
  .venv/bin/python -m pytest -q -ra --durations=25 --cov --cov-report= \
    -n "${PROCTOR_TEST_PROCESSES:-3}" --dist loadfile --no-loadscope-reorder --ignore="$FUZZ"
  status=$?
  wait "$fuzz_pid"
  fuzz=$?
  echo
  echo "== the API fuzzing ($FUZZ, run beside the rest) =="
  cat var/fuzz.log
  [ "$status" -eq 0 ] && status=$fuzz
else  # a part of the suite, as given
  .venv/bin/python -m pytest -q -ra --durations=25 --cov --cov-report= "$@"
  status=$?
fi
# Late subprocess files, if any, then the fuzzing's (--append: onto what pytest-cov combined).
.venv/bin/python -m coverage combine -q --append >/dev/null 2>&1 || true
[ -f var/coverage/fuzz/.coverage ] && .venv/bin/python -m coverage combine -q --append var/coverage/fuzz/.coverage >/dev/null 2>&1
echo
echo "== coverage (lines and branches; subprocesses included) =="
.venv/bin/python -m coverage report --skip-covered --sort=cover | tail -n 40
echo
echo "== the four modules under mutation testing (docs/testing.md) =="
.venv/bin/python -m coverage report --show-missing \
  --include='app/kinds/navigation/metrics.py,app/kinds/tom/rules.py,app/leaderboards/stats.py,app/studies/assignment.py'
exit $status
