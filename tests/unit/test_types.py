"""mypy --strict passes on the modules pyproject's [tool.mypy] lists (the statistics core
first): a call with the wrong type, a missing annotation or an Optional used as a value fails
the suite with mypy's own lines."""

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mypy() -> str:
    found = shutil.which("mypy", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    return found


def _cache_dir() -> str:
    """mypy's incremental cache, kept between runs and checkouts of this machine: a fresh
    clone's cold check took 42-73 s of CPU, a warm one 1 s. mypy checks again every file whose
    content is not what the cache holds (a wrong type in another checkout's copy was still
    found), and the cache is keyed by mypy's and Python's versions."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return str(base / "proctor" / f"mypy-{version('mypy')}-py{sys.version_info[0]}{sys.version_info[1]}")


def test_mypy_strict_finds_nothing():
    done = subprocess.run([_mypy(), "--cache-dir", _cache_dir()], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout


def test_mypy_would_catch_a_wrong_type(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(n: int) -> str:\n    return n\n")
    done = subprocess.run(
        [_mypy(), "--config-file", str(ROOT / "pyproject.toml"), str(bad)], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "Incompatible return value" in done.stdout
