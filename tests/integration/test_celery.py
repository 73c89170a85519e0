"""Exports through a real Celery worker process, over a real Redis, on PostgreSQL.

The test starts `celery -A workers.celery_app worker --pool=solo` as a subprocess with the
same DATABASE_URL, STORAGE_URL and SECRET_KEY as the test, asks for an export through the
API (which enqueues on Redis), waits for the job and reads the files the worker wrote.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from app.studies import assignment
from app.studies.models import Annotation
from tests.conftest import ROOT, create_tom_study, make_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

READY_TIMEOUT_S = 60
JOB_TIMEOUT_S = 60


class CeleryWorker:
    def __init__(self, env: dict, log_path: Path, command: list[str] | None = None):
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            command
            or [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers.celery_app",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-Q",
                "proctor.models,proctor.exports",
                "-n",
                f"proctor-test-{secrets.token_hex(3)}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float, count: int = 1) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.findall(pattern, self.log())
            if len(found) >= count:
                return found
            if self.proc.poll() is not None:
                pytest.fail(f"the Celery worker exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            time.sleep(0.2)
        pytest.fail(f"no {pattern!r} x{count} in the worker's log within {timeout} s:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # warm shutdown
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture
def celery_env(db_url, redis_server, tmp_path, monkeypatch):
    """PostgreSQL (truncated) + Redis for both this process and the worker."""
    from app.config import get_settings

    if not db_url.startswith("postgresql"):
        pytest.skip("the Celery worker needs a database another process can reach")
    import redis

    try:
        redis.Redis.from_url(redis_server).ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"Redis at {redis_server} does not answer: {exc}")
    monkeypatch.setenv("REDIS_URL", redis_server)
    get_settings.cache_clear()
    blobs = tmp_path / "blobs"
    blobs.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_server,
        "STORAGE_URL": f"file://{blobs}",
        "SECRET_KEY": os.environ["SECRET_KEY"],
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    return {"db_url": db_url, "redis_url": redis_server, "blobs": blobs, "env": env}


@pytest.fixture
def celery_worker(celery_env, tmp_path):
    worker = CeleryWorker(celery_env["env"], tmp_path / "celery-worker.log")
    try:
        worker.wait_for(r"\S+@\S+ ready\.", READY_TIMEOUT_S)
        yield worker
    finally:
        worker.stop()
        assert worker.proc.returncode is not None


def _seed(session) -> tuple:
    """A live study with an agent and five crowd workers' bundles (gold included)."""
    from app.studies import services

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.2)
    from app.studies.models import Item

    items = session.execute(
        select(Item.external_id, Item.reference).where(Item.study_id == study.id).order_by(Item.id)
    ).all()
    agent = services.register_agent(session, owner, "tom", "echo-agent")
    outputs = "\n".join(
        json.dumps({"question_id": ext, "answer": "Yes" if i % 3 else "No"}) for i, (ext, _) in enumerate(items[:400])
    )
    services.import_agent_outputs(session, study, agent, outputs.encode())
    raw_ids = []
    for w in range(5):
        platform = "mturk" if w == 4 else "prolific"
        ext = f"RAWWORKER{w}X{secrets.token_hex(4).upper()}"
        raw_ids.append((platform, ext))
        bundle = assignment.enter(session, study, platform, ext, f"ASSIGN{w}X{secrets.token_hex(3)}", "HIT")
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            answer = "Yes" if (a.item_id + w) % 2 else "No"
            assignment.submit(session, study, bundle.id, a.id, {"answer": answer}, f"k-{w}-{a.id}")
    return owner, study, raw_ids


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_export_runs_on_a_real_celery_worker(celery_env, celery_worker, db_url):
    from fastapi.testclient import TestClient

    from app import jobs
    from app.auth.models import User
    from app.auth.security import create_token
    from app.db import get_sessionmaker
    from app.leaderboards.service import compute
    from app.main import create_app

    session = get_sessionmaker(db_url)()
    owner, study, raw_ids = _seed(session)
    token = create_token(session, owner, "ci")
    session.commit()
    n_annotations = session.query(Annotation).filter_by(study_id=study.id).count()
    assert n_annotations == 50

    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(db_url)) as client:
        r = client.post(f"/api/v1/studies/{study.id}/exports", headers=headers)
        assert r.status_code == 202, r.text
        job_id = r.json()["job"]
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while True:
            state = client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()
            if state["state"] in ("done", "failed"):
                break
            assert time.monotonic() < deadline, (
                f"job {job_id} is still {state['state']} after {JOB_TIMEOUT_S} s; worker log:\n"
                + celery_worker.log()[-4000:]
            )
            time.sleep(0.25)
    assert state["state"] == "done", state["log"]
    assert set(state["files"]) == {
        "annotations.jsonl",
        "annotations.csv",
        "completions.csv",
        "scores.json",
        "scores.csv",
    }
    celery_worker.wait_for(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] succeeded in [\d.]+s: 'done'", 10)

    # The files the worker wrote, in the blob folder both processes share.
    folder = celery_env["blobs"] / "exports" / study.slug / str(job_id)
    files = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()}
    assert set(files) == set(state["files"])

    # annotations.jsonl: one line per annotation, workers by pseudonym only.
    lines = [json.loads(x) for x in files["annotations.jsonl"].splitlines()]
    assert len(lines) == n_annotations
    stored = {a.id: a for a in session.scalars(select(Annotation).where(Annotation.study_id == study.id))}
    assert sorted(x["annotation_id"] for x in lines) == sorted(stored)
    pseudonyms = dict(
        session.execute(
            select(User.id, User.pseudonym).where(User.id.in_({a.worker_id for a in stored.values()}))
        ).all()
    )
    expected = {assignment.pseudonym(p, ext) for p, ext in raw_ids}
    assert set(pseudonyms.values()) == expected
    for x in lines:
        a = stored[x["annotation_id"]]
        assert x["worker"] == pseudonyms[a.worker_id]
        assert x["response"] == a.response and x["is_gold"] == a.is_gold
    assert sum(x["is_gold"] for x in lines) == 10
    for name, text in files.items():
        if name == "completions.csv":
            continue  # the list to approve on the platform: by the platform's own ids (below)
        for _platform, ext in raw_ids:
            assert ext not in text, f"{name} contains the raw worker id {ext}"
        assert "ASSIGN" not in text, f"{name} contains a raw platform assignment id"
    completed = list(csv.DictReader(io.StringIO(files["completions.csv"])))
    assert sorted((r["platform"], r["platform_worker_id"]) for r in completed) == sorted(raw_ids)

    # scores.csv: the leaderboard's rows, as compute() makes them now.
    board = compute(session, study)
    rows = list(csv.DictReader(io.StringIO(files["scores.csv"])))
    overall = {(r["type"], r["name"]): r for r in rows if r["metric"] == "accuracy" and r["category"] == "all"}
    assert set(overall) == {(r["type"], r["name"]) for r in board["rows"]}
    assert {"agent", "annotator", "majority", "baseline"} <= {t for t, _ in overall}
    assert {n for t, n in overall if t == "annotator"} == expected
    for r in board["rows"]:
        row = overall[(r["type"], r["name"])]
        assert int(row["n"]) == r["accuracy"]["n"]
        assert float(row["mean"]) == pytest.approx(r["accuracy"]["mean"])
        assert row["method"] == r["accuracy"]["method"] != ""  # one shape, method included
        for cat in r["by_category"]:
            assert any(x["type"] == r["type"] and x["name"] == r["name"] and x["category"] == cat for x in rows)
    assert len(rows) > len(board["rows"])  # per-category and consistency rows too

    # A second delivery of the same job id is claimed by nobody: the worker skips it.
    session.expire_all()
    first = session.get(jobs.Job, job_id)
    started, finished, log = first.started_at, first.finished_at, first.log
    jobs.enqueue(job_id)
    celery_worker.wait_for(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] succeeded in [\d.]+s: 'skipped'", 30)
    session.expire_all()
    again = session.get(jobs.Job, job_id)
    assert (again.state, again.started_at, again.finished_at, again.log) == ("done", started, finished, log)
    assert log.count("exporting") == 1
    assert jobs.run_job(job_id) == "skipped"  # and so does any other caller
    assert len(re.findall(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] succeeded in [\d.]+s: 'done'", celery_worker.log())) == 1
    session.close()
