"""The command line as a user types it: the demo seeds a usable study; the checker counts."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select

from tests.nav_fixtures import connectivity_dir

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)


def test_tom_check_counts_disagreements(tmp_path):
    ok = run_cli("tom", "check", str(FIXTURE))
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.strip().splitlines()
    assert lines[-1].startswith("0 of ") and lines[-1].endswith("questions disagree with the rules")
    rows = list(csv.DictReader(io.StringIO(FIXTURE.read_text(encoding="utf-8"))))
    for r in rows[:3]:
        r["answer"] = "No" if r["answer"] == "Yes" else "Yes"
    bad = tmp_path / "flipped.csv"
    with bad.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = run_cli("tom", "check", str(bad))
    assert out.returncode == 1
    assert out.stdout.strip().splitlines()[-1] == f"3 of {len(rows)} questions disagree with the rules"
    for r in rows[:3]:
        assert r["question_id"] in out.stdout


def test_demo_seeds_a_live_study_with_a_leaderboard(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
           "STORAGE_URL": f"file://{tmp_path / 'blobs'}", "REDIS_URL": ""}
    out = run_cli("demo", "--no-serve", env=env)
    assert out.returncode == 0, out.stderr
    assert "researcher login: researcher@example.org  password: " in out.stdout
    assert "admin login:      admin@example.org  password: " in out.stdout
    assert "/s/" in out.stdout and "PROLIFIC_PID=" in out.stdout

    from app.db import get_sessionmaker
    from app.leaderboards.service import compute
    from app.studies.models import Study

    assert "worker entry (tom)" in out.stdout and "worker entry (navigation)" in out.stdout
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        study = s.scalar(select(Study).where(Study.kind == "tom"))
        assert study.state == "live"
        nav = s.scalar(select(Study).where(Study.kind == "navigation"))
        assert nav.title == "Demo: Navigation following" and nav.state == "live"
        assert (nav.bundle_size, nav.gold_rate, nav.annotations_per_item) == (6, 0.0, 3)
        assert "do not explore" in nav.instructions.lower()
        from app.studies.models import Item
        assert len(s.scalars(select(Item).where(Item.study_id == nav.id)).all()) == 12
        board = compute(s, study)
    types = {r["type"] for r in board["rows"]}
    assert {"agent", "annotator", "majority", "baseline"} <= types
    assert sum(r["type"] == "agent" for r in board["rows"]) == 2
    out = run_cli("export", str(study.id), "--out", str(tmp_path / "out"), env=env)
    assert out.returncode == 0, out.stderr
    assert "exporting" in out.stderr  # the progress bar
    lines = (tmp_path / "out" / "annotations.jsonl").read_text().splitlines()
    assert len(lines) > 0 and all('"worker": "w-' in line for line in lines)
    assert "demo-annotator" not in (tmp_path / "out" / "annotations.csv").read_text()
    assert run_cli("export", "999", env=env).returncode != 0
    # Running the demo again does not duplicate the study, and prints fresh passwords.
    again = run_cli("demo", "--no-serve", env=env)
    assert again.returncode == 0
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        assert len(s.scalars(select(Study)).all()) == 2  # one per kind


def test_nav_import_graphs(tmp_path):
    import pytest

    folder = ROOT.parent / "shared" / "data" / "r2r" / "connectivity"
    if not folder.is_dir():
        pytest.skip(f"the Matterport3D connectivity files are not at {folder}")
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'nav.db'}",
           "STORAGE_URL": f"file://{tmp_path / 'blobs'}", "REDIS_URL": ""}
    assert run_cli("migrate", env=env).returncode == 0
    out = run_cli("nav", "import-graphs", str(folder), env=env)
    assert out.returncode == 0, out.stderr
    n = len(list(folder.glob("*_connectivity.json")))
    assert n == 90 and f"imported {n} buildings" in out.stdout
    assert "importing buildings" in out.stderr  # the progress bar

    from app.db import get_sessionmaker
    from app.kinds.navigation.models import Environment

    with get_sessionmaker(env["DATABASE_URL"])() as s:
        envs = s.scalars(select(Environment)).all()
    assert len(envs) == 90 and all(e.source == "matterport" and e.n_viewpoints > 0 for e in envs)
    assert (tmp_path / "blobs" / "environments" / "17DRP5sb8fy" / "connectivity.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli("nav", "import-graphs", str(empty), env=env).returncode != 0


def test_nav_score_command(tmp_path):
    import json

    fx = ROOT / "tests" / "fixtures" / "nav"
    args = ["nav", "score", "--connectivity", str(connectivity_dir()),
            "--references", str(fx / "R2R_grid.json"), "--predictions", str(fx / "predictions_grid.json")]
    table = run_cli(*args)
    assert table.returncode == 0, table.stderr
    result = run_cli(*args, "--json")
    data = json.loads(result.stdout)
    assert set(data["mean"]) >= {"ne", "success", "spl", "ndtw", "sdtw", "path_length"}
    for scores in data["per_instruction"].values():
        assert 0.0 <= scores["ndtw"] <= 1.0 and scores["sdtw"] <= scores["ndtw"]
    preds = json.loads((fx / "predictions_grid.json").read_text())
    preds[0]["trajectory"][0][0] = "no-such-viewpoint"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(preds))
    out = run_cli("nav", "score", "--connectivity", str(connectivity_dir()),
                  "--references", str(fx / "R2R_grid.json"), "--predictions", str(bad))
    assert out.returncode == 2 and preds[0]["instr_id"] in out.stderr


def test_serve_starts_and_its_inprocess_worker_runs_jobs(tmp_path):
    """`proctor serve` as a user starts it: the page answers and a queued export gets done
    by the worker thread inside the web process."""
    import socket
    import time
    import urllib.request

    from app.db import get_sessionmaker
    from app.demo import ensure_user
    from app.jobs import Job, create_job
    from tests.conftest import create_tom_study

    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
           "STORAGE_URL": f"file://{tmp_path / 'blobs'}", "REDIS_URL": ""}
    assert run_cli("migrate", env=env).returncode == 0
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        owner = ensure_user(s, "r@example.org", "researcher", "pw-xxxxxxxx")
        study = create_tom_study(s, owner)
        job_id = create_job(s, "export", study_id=study.id).id
        s.commit()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                            cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        state = None
        for _ in range(150):
            time.sleep(0.2)
            try:
                ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200
            except OSError:
                continue
            with get_sessionmaker(env["DATABASE_URL"])() as s:
                state = s.get(Job, job_id).state
            if ok and state == "done":
                break
        assert state == "done", proc.stdout and proc.poll()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert "Traceback" not in out, out
