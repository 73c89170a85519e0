# The two commands a new user needs: `make demo` and `make test`.
.PHONY: setup demo test bench mutants mutants-sample

setup:
	bash scripts/setup.sh

# `make demo PORT=8100` serves (and prints its links) on another port.
PORT ?= 8000
demo: setup
	.venv/bin/proctor demo --port $(PORT)

# The whole suite with coverage (subprocesses included), summarised at the end.
test: setup
	bash scripts/test.sh

bench:
	.venv/bin/python bench/crowd.py --quick

# Mutation testing of the four modules and the eight leaderboard modules (docs/testing.md);
# hours on two cores, not part of CI.
mutants: setup
	.venv/bin/python -m pip install -q -e '.[mutants]'
	.venv/bin/python scripts/mutants.py

# A fixed-seed random sample of the leaderboard modules' mutants, MUTANTS_N per module, with
# each module's kill rate and its 95% Wilson interval (SQLite only).
MUTANTS_N ?= 40
MUTANTS_SEED ?= 25
mutants-sample: setup
	.venv/bin/python -m pip install -q -e '.[mutants]'
	.venv/bin/python scripts/mutants.py --no-postgres --sample $(MUTANTS_N) --seed $(MUTANTS_SEED) \
		'app.kinds.*.leaderboard.*' 'app.leaderboards.service.*' 'app.leaderboards.rows.*' \
		'app.leaderboards.ranks.*' 'app.leaderboards.correction.*' 'app.leaderboards.judged.*'
