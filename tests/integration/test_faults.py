"""The fault run (bench/faults.py) in small: 8 workers answer a live study over HTTP
while PostgreSQL stops and starts, the web server's processes are killed with SIGKILL and
started again, and Redis stops and starts. Every answer the server acknowledged is stored, none
twice, and every fault was seen: 503s while the database was down, connection errors while the
web server was, and the rate limiter counting in-process while Redis was (the crowd itself sees
nothing of a Redis outage, by design). Servers of its own: it never touches the shared ones."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "bench" / "faults.py"


def _faults_module():
    spec = importlib.util.spec_from_file_location("bench_faults", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.postgres
@pytest.mark.redis
def test_no_answer_is_lost_or_doubled_through_restarts_and_kills(tmp_path):
    _, _, why = _faults_module().find_binaries()
    if why:
        pytest.skip(f"the fault run needs servers of its own: {why}")
    out = tmp_path / "faults.json"
    # --seconds 12: the three faults back to back (3 s before the first, 2 s between), each
    # down 3 s and settling 3 s after; the run lasts as long as they take (~30 s).
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--workers", "8", "--seconds", "12", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=540,
    )
    report = done.stdout[-4000:] + done.stderr[-4000:]
    assert out.exists(), report
    figures = json.loads(out.read_text())
    result = figures["result"]
    assert result["acknowledged"] > 0, report
    assert result["lost"] == 0 and result["duplicated"] == 0, report
    assert figures["broken_invariants"] == [] and figures["unresolved"] == 0, report
    assert result["stored"] == result["acknowledged_distinct"], report
    # Nothing answered 500 (a fresh web process's first requests once did: see test_rate_limit).
    assert not [k for k in figures["refused"] if " 500:" in k], report
    assert done.returncode == 0, report

    windows = figures["windows"]
    pg = next(w for name, w in windows.items() if name.startswith("postgres"))
    web = next(w for name, w in windows.items() if name.startswith("web"))
    redis = next(w for name, w in windows.items() if name.startswith("redis"))
    assert pg["down_seen"] and web["down_seen"] and redis["down_seen"], report
    assert pg["errors"].get("503", 0) > 0, report  # the database's outage, as the API says it
    assert web["errors"].get("connection", 0) > 0, report  # no server to connect to
    assert redis["rate_limiter_fell_back"] > 0, report  # the limiter noticed Redis was gone ...
    assert redis["errors"] == {}, report  # ... and the crowd did not
    assert windows["outside the faults"]["errors"] == {}, report
