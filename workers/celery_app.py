"""Celery application: `celery -A workers.celery_app worker`."""

import functools
import logging

import kombu.transport.redis
from celery import Celery, bootsteps

from app.config import get_settings
from app.jobs import CONSUMER_BEAT_S, CONSUMER_KEY, CONSUMER_TTL_S, SWEEP_TASK, celery_queue
from app.models import load_models

load_models()  # every table (the kinds' too) before a job opens a session

log = logging.getLogger(__name__)

settings = get_settings()
BROKER_URL = settings.redis_url or "redis://127.0.0.1:6379/0"
app = Celery("proctor", broker=BROKER_URL, include=["workers.tasks"])
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_reject_on_worker_lost=True,
    broker_connection_retry_on_startup=True,
    # No broker outage ends a worker (issue 26.1): it reconnects for as long as
    # Redis is away (None: forever; Celery's default gives up after 100 tries), and
    # a job running meanwhile runs on (its state is its row, not its message).
    broker_connection_retry=True,
    broker_connection_max_retries=None,
    # A Redis that answers errors (out of memory under maxmemory and noeviction, a read-only
    # replica, MISCONF) is treated as a lost connection too: Celery's default takes them for
    # unrecoverable and the main process exited (issue 26, round 13).
    broker_channel_error_retry=True,
    worker_cancel_long_running_tasks_on_connection_loss=False,
    # A job past its time fails with the reason (the soft limit raises inside it);
    # the hard limit ends a handler that ignores it.
    task_soft_time_limit=settings.job_time_limit_s,
    task_time_limit=settings.job_time_limit_s + 60,
    # `proctor worker --beat` (one per deployment) runs the sweeper every minute,
    # in the short jobs' queue so it never waits behind a model.
    beat_schedule={"sweep-jobs": {"task": SWEEP_TASK, "schedule": 60.0}},
    task_routes={SWEEP_TASK: {"queue": celery_queue("exports")}},
    task_default_queue=celery_queue("models"),
)


def _restore_or_leave(restore):
    """kombu (5.7 and before, celery/kombu#970) hands the unacknowledged messages back to Redis
    when the connection drops, through a channel whose connection may already be gone: an
    AttributeError ('NoneType' object has no attribute 'hostname') that ends the worker's main
    process (issue 26.1). Leaving them is safe: they stay in Redis's unacked set (restored
    after the visibility timeout when Redis kept them), and a job's truth is its row, which the
    sweeper (app.jobs.sweep) sends again when nobody claims or runs it."""

    @functools.wraps(restore)
    def guarded(self, client=None):
        try:
            return restore(self, client)
        except Exception as exc:  # noqa: BLE001 - the worker must outlive the broker
            log.warning(
                "could not hand %d unacknowledged message(s) back to the broker (%r); "
                "the sweeper sends their jobs again",
                len(self._delivered),
                exc,
            )
            self._delivered.clear()
            return None

    return guarded


if not getattr(kombu.transport.redis.QoS.restore_unacked, "__wrapped__", None):
    kombu.transport.redis.QoS.restore_unacked = _restore_or_leave(kombu.transport.redis.QoS.restore_unacked)


class QueueMarks(bootsteps.StartStopStep):
    """Marks each queue this worker reads in Redis (app.jobs.CONSUMER_KEY) every
    CONSUMER_BEAT_S seconds, so the pages can say when a queue has no worker
    (app.jobs.queues_without_worker). Restarted with the consumer after a broker outage."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, c, **kwargs):
        super().__init__(c, **kwargs)
        self.tref = None

    def start(self, c):
        self.mark(c)
        self.tref = c.timer.call_repeatedly(CONSUMER_BEAT_S, self.mark, (c,), priority=10)

    def stop(self, c):
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    shutdown = stop

    def mark(self, c):
        import redis

        names = [q.name.removeprefix(celery_queue("")) for q in c.task_consumer.queues]
        try:
            client = redis.Redis.from_url(BROKER_URL, socket_timeout=1, socket_connect_timeout=1)
            try:
                pipe = client.pipeline()
                for name in names:
                    pipe.set(CONSUMER_KEY.format(queue=name), c.hostname, ex=CONSUMER_TTL_S)
                pipe.execute()
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - the consumer notices the outage itself
            log.info("could not mark the queues %s as read: %s", names, exc)


app.steps["consumer"].add(QueueMarks)
