"""Issue 26, round 13: the list tried again from a fresh clone.

Item 1 (broker and database outages other than a plain Redis stop): a Redis of the test's
own (tests/integration/test_broker_outage.py's OwnRedis; the shared one is never touched)
that answers errors, e.g. out of memory under `maxmemory` with `noeviction`.
"""

from __future__ import annotations

import time

import pytest

from app import jobs
from tests.conftest import make_user
from tests.integration.test_broker_outage import (  # noqa: F401 - fixtures
    SLEEPY,
    _setup,
    _wait,
    _worker_command,
    own_redis,
    sleepy_job,
)


def _ended(session, job_id):
    def check() -> bool:
        session.expire_all()
        return session.get(jobs.Job, job_id).state not in ("queued", "running")

    return check


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_worker_outlives_a_redis_that_answers_out_of_memory(db_url, own_redis, sleepy_job, tmp_path, monkeypatch):  # noqa: F811
    """Redis full (`maxmemory` reached, `noeviction`) refuses writes with OOM errors, the
    acknowledgement of a finished job's message among them. Before the fix the worker's main
    process took that for an unrecoverable error and exited ("Unrecoverable error:
    server:OutOfMemoryError"): the job queued behind it waited for a worker that was gone.
    Now the consumer reconnects as after a lost connection, and once Redis has room again the
    waiting job runs, and the first one is not run again."""
    import redis

    from app.db import get_sessionmaker
    from tests.integration.test_celery import CeleryWorker

    env, marks = _setup(db_url, own_redis, tmp_path, monkeypatch)
    session = get_sessionmaker(db_url)()
    owner = make_user(session, "researcher")
    first = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks=str(marks), steps=10)
    second = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks=str(marks), steps=1)
    session.commit()
    worker = CeleryWorker(env, tmp_path / "worker.log", _worker_command())
    broker = redis.Redis(port=own_redis.port)
    try:
        worker.wait_for(r"\S+@\S+ ready\.", 60)
        jobs.submit(session, first)
        _wait(lambda: "start" in marks.read_text(), 30, "start of the first job", worker)
        jobs.submit(session, second)
        # Redis fills up: every write is refused with OOM until it has room again.
        broker.config_set("maxmemory-policy", "noeviction")
        broker.config_set("maxmemory", str(int(broker.info("memory")["used_memory"]) // 2))
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            broker.set("probe", "x")
        # Meanwhile a new job cannot be queued: withdrawn, and the request answers 503.
        third = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks=str(marks), steps=1)
        with pytest.raises(jobs.BrokerUnavailable):
            jobs.submit(session, third)
        assert session.get(jobs.Job, third.id) is None
        _wait(_ended(session, first.id), 30, "end of the first job", worker)
        time.sleep(8)  # its acknowledgement is refused meanwhile
        assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()[-6000:]}"
        broker.config_set("maxmemory", "0")  # room again
        _wait(_ended(session, second.id), 90, "end of the second job", worker)
        assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()[-6000:]}"
    finally:
        worker.stop()
    session.expire_all()
    assert [(session.get(jobs.Job, j.id).state, session.get(jobs.Job, j.id).attempts) for j in (first, second)] == [
        ("done", 1),
        ("done", 1),
    ]
    assert [x.split()[0] for x in marks.read_text().splitlines()] == ["start", "finish", "start", "finish"]
    session.close()
