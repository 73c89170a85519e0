"""mypy --strict passes on the modules pyproject's [tool.mypy] lists (the statistics core
first): a call with the wrong type, a missing annotation or an Optional used as a value fails
the suite with mypy's own lines."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mypy() -> str:
    found = shutil.which("mypy", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    return found


def test_mypy_strict_finds_nothing():
    done = subprocess.run([_mypy()], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout


def test_mypy_would_catch_a_wrong_type(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(n: int) -> str:\n    return n\n")
    done = subprocess.run(
        [_mypy(), "--config-file", str(ROOT / "pyproject.toml"), str(bad)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "Incompatible return value" in done.stdout
