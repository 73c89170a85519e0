# The two commands a new user needs: `make demo` and `make test`.
.PHONY: setup demo test bench mutants

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

# Mutation testing of the four modules (docs/testing.md); slow, not part of CI.
mutants: setup
	.venv/bin/python -m pip install -q -e '.[mutants]'
	.venv/bin/python scripts/mutants.py
