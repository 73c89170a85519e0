"""No job can hang (issue 10.3): a job the queue never got is withdrawn and the request says
so (503, Retry-After), a handler that fails to import fails its job with the reason, and a job
whose worker died is run again by the sweeper."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app import jobs
from app.agents.models import AgentArtifact
from app.config import get_settings
from app.storage import get_store
from tests.conftest import create_tom_study, login, make_user

UNREACHABLE = "redis://127.0.0.1:9/0"  # the discard port: nothing answers there


@pytest.fixture
def no_broker(monkeypatch):
    monkeypatch.setenv("REDIS_URL", UNREACHABLE)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_an_export_the_queue_cannot_take_is_withdrawn_with_503(app, client, session, no_broker):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="No broker")
    csrf = login(client, owner)
    r = client.post(f"/api/v1/studies/{study.id}/exports", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 503 and r.headers["Retry-After"] == "30"
    assert "the job queue cannot be reached" in r.json()["detail"]
    page = client.post(f"/studies/{study.id}/exports", data={"csrf_token": csrf})
    assert page.status_code == 503 and "Try again in a minute" in page.text
    assert session.scalar(select(func.count()).select_from(jobs.Job)) == 0


def test_an_upload_the_queue_cannot_check_is_withdrawn_with_503(app, client, session, no_broker):
    from tests.integration.test_api_roles import _listener_upload
    from app.studies import services

    owner = make_user(session, "researcher")
    agent = services.register_agent(session, owner, "navigation", "no-broker-agent")
    session.commit()
    csrf = login(client, owner)
    form, files = _listener_upload()
    r = client.post(f"/api/v1/agents/{agent.id}/artifacts", headers={"X-CSRF-Token": csrf}, data=form, files=files)
    assert r.status_code == 503, r.text
    assert session.scalar(select(func.count()).select_from(AgentArtifact)) == 0
    assert session.scalar(select(func.count()).select_from(jobs.Job)) == 0
    blobs = get_store().path(f"agents/{agent.id}")  # the local store's folder of the agent
    assert not blobs.exists() or not any(p.is_file() for p in blobs.rglob("*"))


def test_a_handler_that_fails_to_import_fails_its_job_with_the_reason(session):
    from app.kinds import get_kind, register_kind, unregister_kind

    example = get_kind("wordcount")

    class Broken(type(example)):
        name = "brokenjobs"
        jobs = {"tally": "proctor_wordcount.no_such_module:run_tally"}

        def routers(self):
            return []

        def cli(self):
            return None

    register_kind(Broken())
    try:
        job = jobs.create_job(session, "brokenjobs.tally")
        session.commit()
        assert jobs.run_job(job.id) == "failed"
        session.refresh(job)
        assert job.state == "failed" and "ModuleNotFoundError" in job.log
    finally:
        unregister_kind("brokenjobs")


def _stale(session, job, minutes: int = 30) -> None:
    from datetime import timedelta

    from app.db import utcnow

    job.heartbeat_at = job.started_at = utcnow() - timedelta(minutes=minutes)
    session.commit()


def test_a_job_whose_worker_died_is_run_again_and_given_up_after_three_deaths(session):
    """The in-process worker's sweeper: a running job with a stale heartbeat is run again; one
    whose worker has died MAX_ATTEMPTS times fails, saying so; a fresh one is left alone."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Sweep")
    died_once = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    died_often = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    alive = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    for job, attempts in ((died_once, 1), (died_often, jobs.MAX_ATTEMPTS), (alive, 1)):
        job.state, job.attempts = "running", attempts
    session.commit()
    _stale(session, died_once)
    _stale(session, died_often)
    from app.db import utcnow

    alive.heartbeat_at = alive.started_at = utcnow()
    session.commit()
    assert jobs.run_job(alive.id, stale_after=jobs.STALE_AFTER_S) == "busy"

    assert jobs.sweep() == {"failed": 1, "resent": 1}
    for job in (died_once, died_often, alive):
        session.refresh(job)
    assert (died_once.state, died_once.attempts) == ("done", 2)
    assert died_often.state == "failed"
    assert f"its worker stopped {jobs.MAX_ATTEMPTS} times" in died_often.log
    assert alive.state == "running"


def test_a_queued_job_nobody_claimed_is_sent_again(session):
    from datetime import timedelta

    from app.db import utcnow

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Lost message")
    lost = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    recent = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    lost.created_at = utcnow() - timedelta(minutes=10)
    session.commit()
    assert jobs.sweep() == {"failed": 0, "resent": 1}
    session.refresh(lost)
    session.refresh(recent)
    assert lost.state == "done" and recent.state == "queued"
