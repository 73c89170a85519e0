"""tests/conftest.py's untraced(): the simulation loops it wraps run without coverage's tracer,
here and in the processes they start, and tracing resumes after (under `make test`)."""

from __future__ import annotations

import os
import subprocess
import sys

import coverage
import pytest

from tests.conftest import untraced


def test_the_tracer_stops_inside_and_resumes_after():
    if coverage.Coverage.current() is None:
        pytest.skip("not under coverage (make test measures it)")
    before = sys.gettrace()
    assert before is not None
    with untraced():
        assert sys.gettrace() is None
        child = subprocess.run(
            [sys.executable, "-c", "import os; print('COVERAGE_PROCESS_CONFIG' in os.environ)"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert child.stdout.strip() == "False"
    assert sys.gettrace() is not None
    assert "COVERAGE_PROCESS_CONFIG" in os.environ
