"""`PROCTOR_TEST_TIMES` and `scripts/test_times.py` (docs/testing.md): a run writes each file's
seconds, and the script sums them, most CPU first."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "test_times.py"


def _sum(folder) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(folder)], capture_output=True, text=True, cwd=ROOT)


def test_the_rows_of_two_processes_are_summed_most_cpu_first(tmp_path):
    (tmp_path / "gw0-1.tsv").write_text("tests/a.py\t10.00\t4.00\t3\ntests/b.py\t2.00\t6.50\t1\n")
    (tmp_path / "gw1-2.tsv").write_text("tests/a.py\t1.00\t1.00\t2\n")
    out = _sum(tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert rows == [
        ["6.5", "2.0", "1", "tests/b.py"],
        ["5.0", "11.0", "5", "tests/a.py"],
        ["11.5", "13.0", "6", "all", "2", "files"],
    ]


def test_a_bad_row_is_named_by_file_and_line(tmp_path):
    (tmp_path / "gw0-1.tsv").write_text("tests/a.py\t1\t1\t1\ntests/b.py\tslow\t1\t1\n")
    out = _sum(tmp_path)
    assert out.returncode == 1 and "gw0-1.tsv:2: not a row" in out.stderr, out.stderr
    assert "no *.tsv" in _sum(tmp_path / "none").stderr


def test_a_run_writes_its_files_seconds(tmp_path):
    (tmp_path / "test_sleepy.py").write_text(
        "import time\n\ndef test_one():\n    time.sleep(0.3)\n\ndef test_two():\n    sum(range(3_000_000))\n"
    )
    env = {**os.environ, "PROCTOR_TEST_TIMES": str(tmp_path / "times"), "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    # This conftest's hooks, on a file of two tests outside the suite.
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest", "--no-cov",
         "-o", "addopts=", str(tmp_path / "test_sleepy.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    (tsv,) = (tmp_path / "times").glob("main-*.tsv")
    name, wall, cpu, n = tsv.read_text().split("\t")
    assert name.endswith("test_sleepy.py") and int(n) == 2
    assert float(wall) >= 0.3 and float(cpu) > 0
