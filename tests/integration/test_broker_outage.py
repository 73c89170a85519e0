"""A broker outage never ends a worker for good (issue 26.1).

A real prefork Celery worker (the models queue) over a Redis of this test's own (started and
stopped here; the shared one on 6379 is never touched) runs a job whose handler sleeps. The
test SIGKILLs the worker's child mid-job, so the message comes back (acks_late,
reject_on_worker_lost) to a job that is still "running" with a fresh heartbeat; then stops
Redis for 8 s and starts it again on the same port. The worker's main process must still be
alive, and the job, once the sweeper sends it again (its heartbeat gone stale), finishes once.

Before the fix the redelivered message was retried with a 15-minute countdown, which the
worker held as an ETA message; when Redis went away kombu's restore of that message raised
`AttributeError: 'NoneType' object has no attribute 'hostname'` and the main process exited.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import jobs
from tests.conftest import ROOT, make_user

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SLEEPY = "test.sleepy"  # a core job of this test's own, in the models queue (the default)
SLEEPY_HANDLER = "tests.integration.test_broker_outage:sleepy"


def sleepy(session, job, progress) -> dict:
    """The job: note its start (with the child's pid), sleep reporting progress, note its end."""
    marks = Path(job.params["marks"])
    with marks.open("a") as f:
        f.write(f"start {os.getpid()}\n")
    steps = int(job.params.get("steps", 8))
    for i in range(steps):
        time.sleep(0.5)
        progress(i + 1, steps)
    with marks.open("a") as f:
        f.write("finish\n")
    return {"steps": steps}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnRedis:
    """A throwaway redis-server on its own port, stopped and started by the test."""

    def __init__(self, port: int, log: Path):
        self.port, self.log, self.proc = port, log, None

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--logfile",
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=0.5).ping()
                return
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # an outage, not a shutdown
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def own_redis(tmp_path):
    if subprocess.run(["which", "redis-server"], capture_output=True).returncode:
        pytest.skip("redis-server is not installed")
    server = OwnRedis(_free_port(), tmp_path / "redis.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sleepy_job(monkeypatch):
    monkeypatch.setitem(jobs.CORE_HANDLERS, SLEEPY, SLEEPY_HANDLER)


def _worker_command() -> list[str]:
    """`proctor worker --queues models` as it runs in production (prefork, gossip, mingle and
    heartbeats on), with the test's job added to the handlers before Celery starts."""
    boot = (
        f"import sys; import app.jobs as j; j.CORE_HANDLERS[{SLEEPY!r}] = {SLEEPY_HANDLER!r}; "
        "from celery.__main__ import main; "
        "sys.argv = ['celery', '-A', 'workers.celery_app', 'worker', '--loglevel=INFO', "
        "'--concurrency=1', '-Q', 'proctor.models']; main()"
    )
    return [sys.executable, "-c", boot]


def _wait(predicate, timeout: float, what: str, worker) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if worker.proc.poll() is not None:
            pytest.fail(
                f"the worker exited with {worker.proc.returncode} while waiting for {what}:\n{worker.log()[-6000:]}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout} s:\n{worker.log()[-6000:]}")
        time.sleep(0.2)


def _setup(db_url, own_redis, tmp_path, monkeypatch):
    """This process and the worker's environment on the test's Redis; the marks file."""
    from app.config import get_settings

    url = f"redis://127.0.0.1:{own_redis.port}/0"
    monkeypatch.setenv("REDIS_URL", url)
    get_settings.cache_clear()
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": url,
        "STORAGE_URL": f"file://{blobs}",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    marks = tmp_path / "marks.txt"
    marks.touch()
    return env, marks


def _outage(own_redis, worker, seconds: float = 8) -> None:
    """Redis goes away for `seconds` and comes back, empty, on the same port; the worker's
    main process must live through it and connect again."""
    own_redis.stop()
    time.sleep(seconds)
    own_redis.start()
    # The worker connects again (before the fix it exited: wait_for fails on an exit), and
    # lives on after it; waited for, not a fixed 8 s.
    worker.wait_for(r"Connected to redis://", 30, count=2)
    assert worker.proc.poll() is None, f"the worker exited with {worker.proc.returncode}:\n{worker.log()[-6000:]}"


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_worker_survives_a_killed_child_and_a_redis_outage_and_the_job_finishes_once(
    db_url, own_redis, sleepy_job, tmp_path, monkeypatch
):
    from datetime import timedelta

    from app.db import get_sessionmaker, utcnow
    from tests.integration.test_celery import CeleryWorker

    env, marks = _setup(db_url, own_redis, tmp_path, monkeypatch)
    session = get_sessionmaker(db_url)()
    owner = make_user(session, "researcher")
    job = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks=str(marks), steps=20)
    session.commit()

    worker = CeleryWorker(env, tmp_path / "worker.log", _worker_command())
    try:
        worker.wait_for(r"\S+@\S+ ready\.", 60)
        jobs.submit(session, job)
        _wait(lambda: "start" in marks.read_text(), 30, "start of the job", worker)
        child = int(marks.read_text().split()[1])
        assert child != worker.proc.pid
        os.kill(child, signal.SIGKILL)  # the child dies mid-job; the main process lives
        worker.wait_for(r"WorkerLostError|Process .* exited", 30)
        # The message comes back to a job still "running" with a fresh heartbeat: the worker
        # takes it and answers "busy" (it must not keep it as a retry with an ETA).
        worker.wait_for(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] (succeeded in [\d.]+s: 'busy'|retry)", 60)
        time.sleep(1)

        _outage(own_redis, worker)

        # Fifteen minutes later (the heartbeat made stale here) the sweeper sends it again.
        session.expire_all()
        stuck = session.get(jobs.Job, job.id)
        assert (stuck.state, stuck.attempts) == ("running", 1)
        stuck.heartbeat_at = stuck.started_at = utcnow() - timedelta(seconds=jobs.STALE_AFTER_S + 60)
        session.commit()
        assert jobs.sweep() == {"failed": 0, "resent": 1}

        def ended():
            session.expire_all()
            return session.get(jobs.Job, job.id).state not in ("queued", "running")

        _wait(ended, 60, "end of the job", worker)
        assert worker.proc.poll() is None
    finally:
        worker.stop()
    session.expire_all()
    done = session.get(jobs.Job, job.id)
    assert (done.state, done.attempts, done.result) == ("done", 2, {"steps": 20}), done.log
    lines = marks.read_text().splitlines()
    assert [x.split()[0] for x in lines] == ["start", "start", "finish"], lines  # finished once
    session.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_worker_survives_a_redis_outage_while_a_job_runs_and_the_job_finishes_once(
    db_url, own_redis, sleepy_job, tmp_path, monkeypatch
):
    """The commoner outage: Redis goes away while a long job runs (its message unacknowledged,
    acks_late). The worker lives, the job runs on to "done", once, and a later job runs too."""
    from app.db import get_sessionmaker
    from tests.integration.test_celery import CeleryWorker

    env, marks = _setup(db_url, own_redis, tmp_path, monkeypatch)
    session = get_sessionmaker(db_url)()
    owner = make_user(session, "researcher")
    job = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks=str(marks), steps=50)
    session.commit()

    worker = CeleryWorker(env, tmp_path / "worker.log", _worker_command())
    try:
        worker.wait_for(r"\S+@\S+ ready\.", 60)
        _marks_cleared()
        assert jobs.queues_without_worker() == ["exports"]  # it reads models only
        jobs.submit(session, job)
        _wait(lambda: "start" in marks.read_text(), 30, "start of the job", worker)
        _outage(own_redis, worker)

        def marked_again() -> bool:  # the queue marks come back as the consumer restarts
            _marks_cleared()
            return jobs.queues_without_worker() == ["exports"]

        _wait(marked_again, 30, "the queue marks after reconnecting", worker)

        def ended(job_id):
            def check():
                session.expire_all()
                return session.get(jobs.Job, job_id).state not in ("queued", "running")

            return check

        _wait(ended(job.id), 60, "end of the job", worker)
        later = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks=str(marks), steps=1)
        jobs.submit(session, later)
        _wait(ended(later.id), 60, "end of a later job", worker)
        assert worker.proc.poll() is None
    finally:
        worker.stop()
    session.expire_all()
    assert [session.get(jobs.Job, j.id).state for j in (job, later)] == ["done", "done"]
    assert session.get(jobs.Job, job.id).attempts == 1
    assert [x.split()[0] for x in marks.read_text().splitlines()] == ["start", "finish", "start", "finish"]
    session.close()


def _marks_cleared():
    jobs._consumers_cache.clear()


def test_the_pages_say_when_a_queue_has_no_worker(app, client, session, own_redis, monkeypatch):
    """The exports card and an agent's uploads say when their queue has no worker (no mark in
    Redis for CONSUMER_TTL_S); a worker's mark silences them; an unreachable Redis neither
    fails nor slows the page."""
    import redis

    from app.config import get_settings
    from app.studies import services
    from tests.conftest import create_tom_study, login
    from tests.integration.test_api_roles import _listener_upload

    url = f"redis://127.0.0.1:{own_redis.port}/0"
    monkeypatch.setenv("REDIS_URL", url)
    get_settings.cache_clear()
    _marks_cleared()
    broker = redis.Redis(port=own_redis.port)
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Nobody reads")
    agent = services.register_agent(session, owner, "navigation", "waiting-listener")
    session.commit()
    csrf = login(client, owner)
    r = client.post(f"/api/v1/studies/{study.id}/exports", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 202, r.text
    form, files = _listener_upload()
    r = client.post(f"/api/v1/agents/{agent.id}/artifacts", headers={"X-CSRF-Token": csrf}, data=form, files=files)
    assert r.status_code in (201, 202), r.text

    card = client.get(f"/studies/{study.id}/exports").text
    assert 'id="no-worker-exports"' in card and "No worker is reading the exports queue" in card
    assert "No worker is reading the exports queue" in client.get(f"/studies/{study.id}").text
    uploads = client.get(f"/agents/{agent.id}/artifacts").text
    assert "No worker is reading the models queue" in uploads
    assert "No worker is reading the models queue" in client.get("/agents").text
    # A generation run waits in the models queue too: its section (and the study page) says so.
    from tests.integration.test_a3ds_captioners import study_of

    drafted = study_of(session, owner, "Captions nobody makes")
    r = client.post(
        f"/api/v1/a3ds/studies/{drafted.id}/generations", json={"speaker": "short"}, headers={"X-CSRF-Token": csrf}
    )
    assert r.status_code == 202, r.text
    runs = client.get(f"/a3ds/studies/{drafted.id}/generations").text
    assert 'id="no-worker-models"' in runs and "these runs wait until one starts" in runs
    assert "No worker is reading the models queue" in client.get(f"/studies/{drafted.id}").text

    # A worker's marks (workers/celery_app.py QueueMarks) silence them.
    for queue in ("exports", "models"):
        broker.set(jobs.CONSUMER_KEY.format(queue=queue), "w@host", ex=jobs.CONSUMER_TTL_S)
    _marks_cleared()
    assert jobs.queues_without_worker() == []
    assert "No worker is reading" not in client.get(f"/studies/{study.id}/exports").text
    assert "No worker is reading" not in client.get(f"/agents/{agent.id}/artifacts").text
    assert "No worker is reading" not in client.get(f"/a3ds/studies/{drafted.id}/generations").text

    # One queue's mark gone: only that one is named. Cached for a while (one read per 15 s).
    broker.delete(jobs.CONSUMER_KEY.format(queue="models"))
    assert jobs.queues_without_worker() == []  # still cached
    _marks_cleared()
    assert jobs.queues_without_worker() == ["models"]

    # Redis away: the page still answers, at once, saying nothing it cannot know.
    own_redis.stop()
    _marks_cleared()
    started = time.monotonic()
    r = client.get(f"/studies/{study.id}/exports")
    assert r.status_code == 200 and "No worker is reading" not in r.text
    assert time.monotonic() - started < 1.5
    own_redis.start()


def test_compose_restarts_every_long_running_service():
    """A worker that dies (it exits non-zero) comes back under compose's restart policy."""
    import yaml

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name, service in services.items():
        if name != "migrate":  # one-shot
            assert service.get("restart") == "unless-stopped", name
