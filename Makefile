# The two commands a new user needs: `make demo` and `make test`.
.PHONY: setup demo test bench

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/proctor demo

test: setup
	.venv/bin/python -m pytest -q -ra

bench:
	.venv/bin/python bench/crowd.py --quick
