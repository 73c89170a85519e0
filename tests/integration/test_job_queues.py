"""Two queues and a fair order (issue 10.1): a model job never holds up an export, and one
researcher's many jobs never starve another's one."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

from app import jobs
from app.db import utcnow
from app.kinds import KindError, get_kind, register_kind
from tests.conftest import create_tom_study, make_user


def _jobs(session, study, owners_in_order, task="export"):
    made = []
    for owner in owners_in_order:
        made.append(jobs.create_job(session, task, study_id=study.id, owner_id=owner.id))
    session.commit()
    return made


def _owner_of(session, job_id, names):
    return names[session.get(jobs.Job, job_id).owner_id]


def _finish(session, job_id):
    job = session.get(jobs.Job, job_id)
    job.state, job.finished_at = "done", utcnow()
    session.commit()


def test_one_worker_serves_researchers_in_turn_not_first_come(session):
    """A asks for three exports, then B for one, then C for two. One worker taking jobs one
    by one runs A, B, C, A, C, A (first come would be A, A, A, B, C, C)."""
    a, b, c = (make_user(session, "researcher") for _ in range(3))
    study = create_tom_study(session, a, title="Fair")
    names = {a.id: "A", b.id: "B", c.id: "C"}
    _jobs(session, study, [a, a, a, b, c, c])
    order = []
    while (job_id := jobs.claim_next("exports")) is not None:
        session.expire_all()
        order.append(_owner_of(session, job_id, names))
        _finish(session, job_id)
    assert order == ["A", "B", "C", "A", "C", "A"]


def test_a_researcher_with_a_job_running_waits_behind_one_with_none(session):
    """Two workers: while A's first job runs, the next free worker takes B's job although A's
    second is older; then, with one job each running, the oldest waiting owner goes."""
    a, b = make_user(session, "researcher"), make_user(session, "researcher")
    study = create_tom_study(session, a, title="Fair running")
    names = {a.id: "A", b.id: "B"}
    a1, a2, a3, b1, b2 = _jobs(session, study, [a, a, a, b, b])
    first = jobs.claim_next("exports")
    second = jobs.claim_next("exports")
    assert (first, second) == (a1.id, b1.id)
    _finish(session, first)  # A now has none running, B one: A goes next
    assert jobs.claim_next("exports") == a2.id
    session.expire_all()
    assert [_owner_of(session, j.id, names) for j in (a3, b2)] == ["A", "B"]
    assert {session.get(jobs.Job, j.id).state for j in (a3, b2)} == {"queued"}


def test_each_queue_takes_only_its_own_jobs(session):
    """Exports (and a kind's declared aggregation jobs) wait in "exports"; model jobs, and a
    job whose kind is gone, in "models", so the models worker claims and fails it."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Queues")
    export = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    tally = jobs.create_job(session, "wordcount.tally", study_id=study.id, owner_id=owner.id)
    validate = jobs.create_job(session, "navigation.validate", study_id=study.id, owner_id=owner.id)
    gone = jobs.Job(task="hexagons.consolidate", params={}, owner_id=owner.id)
    session.add(gone)
    session.commit()
    assert jobs.queues()["export"] == "exports" and jobs.queues()["wordcount.tally"] == "exports"
    assert jobs.queues()["navigation.validate"] == "models"
    taken = {"exports": set(), "models": set()}
    for queue in taken:
        while (job_id := jobs.claim_next(queue)) is not None:
            taken[queue].add(job_id)
    assert taken == {"exports": {export.id, tally.id}, "models": {validate.id, gone.id}}


def test_the_in_process_worker_runs_everything_fairly(session):
    """The embedded worker (no Redis) takes both queues in one thread, fairest first, and a
    job of an uninstalled kind fails with the reason instead of waiting forever."""
    a, b = make_user(session, "researcher"), make_user(session, "researcher")
    study = create_tom_study(session, a, title="In process")
    a1, a2, b1 = _jobs(session, study, [a, a, b])
    gone = jobs.Job(task="hexagons.consolidate", params={}, owner_id=a.id)
    session.add(gone)
    session.commit()
    assert jobs.run_queued_once() == 4
    session.expire_all()
    runs = sorted((a1, a2, b1), key=lambda j: session.get(jobs.Job, j.id).started_at)
    assert [j.id for j in runs] == [a1.id, b1.id, a2.id]
    assert {session.get(jobs.Job, j.id).state for j in (a1, a2, b1)} == {"done"}
    assert session.get(jobs.Job, gone.id).state == "failed"


def test_a_kind_cannot_name_a_queue_that_does_not_exist():
    example = get_kind("wordcount")

    class Misplaced(type(example)):
        name = "misplaced"
        job_queues = {"tally": "gpu-fast-lane"}

    with pytest.raises(KindError, match="the queues are models, exports"):
        register_kind(Misplaced())

    class Stray(type(example)):
        name = "stray"
        job_queues = {"train": "models"}

    with pytest.raises(KindError, match="'train', which is not one of its jobs"):
        register_kind(Stray())


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_an_exports_worker_runs_an_export_while_a_model_job_waits_for_its_own(
    db_url, redis_server, tmp_path, monkeypatch
):
    """`proctor worker --queues exports` (a real Celery worker over Redis) runs an export
    queued after a model job; the model job's message waits in proctor.models untouched."""
    import redis
    from fastapi.testclient import TestClient

    from app.auth.security import create_token
    from app.config import get_settings
    from app.db import get_sessionmaker
    from app.main import create_app
    from tests.integration.test_celery import CeleryWorker

    try:
        broker = redis.Redis.from_url(redis_server)
        broker.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"Redis at {redis_server} does not answer: {exc}")
    broker.delete("proctor.models", "proctor.exports")
    monkeypatch.setenv("REDIS_URL", redis_server)
    get_settings.cache_clear()
    blobs = tmp_path / "blobs"
    blobs.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_server,
        "STORAGE_URL": f"file://{blobs}",
        "PYTHONUNBUFFERED": "1",
    }
    session = get_sessionmaker(db_url)()
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Two queues")
    token = create_token(session, owner, "ci")
    model_job = jobs.create_job(session, "navigation.validate", study_id=study.id, owner_id=owner.id, artifact_id=0)
    jobs.submit(session, model_job)
    assert broker.llen("proctor.models") == 1
    proctor = str(Path(sys.executable).parent / "proctor")
    worker = CeleryWorker(
        env, tmp_path / "exports-worker.log", [proctor, "worker", "--queues", "exports", "--concurrency", "1"]
    )
    try:
        worker.wait_for(r"\S+@\S+ ready\.", 60)
        assert "proctor.exports" in worker.log() and "proctor.models" not in worker.log()
        with TestClient(create_app(db_url)) as client:
            r = client.post(f"/api/v1/studies/{study.id}/exports", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 202, r.text
            export_id = r.json()["job"]
        worker.wait_for(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] succeeded in [\d.]+s: 'done'", 60)
    finally:
        worker.stop()
    session.expire_all()
    assert session.get(jobs.Job, export_id).state == "done"
    assert session.get(jobs.Job, model_job.id).state == "queued"
    assert broker.llen("proctor.models") == 1  # its turn is still waiting for a models worker
    broker.delete("proctor.models")
    session.close()


def test_the_worker_command_refuses_an_unknown_queue(monkeypatch):
    from click.testing import CliRunner

    from app.cli import main
    from app.config import get_settings

    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/15")
    monkeypatch.setenv("SECRET_KEY", secrets.token_urlsafe(40))
    get_settings.cache_clear()
    result = CliRunner().invoke(main, ["worker", "--queues", "models,gpu"])
    get_settings.cache_clear()
    assert result.exit_code == 2
    assert "'models,gpu': name one or more of models, exports" in result.output
