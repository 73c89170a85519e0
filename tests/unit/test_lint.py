"""ruff's checks and formatter ([tool.ruff] in pyproject.toml) report nothing on the code and its tests: an
unused import, an undefined name, a name imported twice over another, or a likely bug found by
bugbear fails the suite with ruff's own lines."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINTED = ["app", "workers", "proctor_client", "bench", "scripts", "migrations", "tests"]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    done = subprocess.run(
        [ruff, "check", "--output-format", "concise", *LINTED], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_would_change_nothing():
    """The code is as `ruff format` writes it, so a diff shows only what changed."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    done = subprocess.run([ruff, "format", "--check", *LINTED], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_would_catch_an_undefined_name(tmp_path):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    try:\n        pass\n    except ValueError as exc:\n        pass\n    return exc\n")
    done = subprocess.run(
        [ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(bad)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "F821" in done.stdout
