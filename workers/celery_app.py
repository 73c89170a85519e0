"""Celery application: `celery -A workers.celery_app worker`."""

from celery import Celery

from app.config import get_settings
from app.jobs import SWEEP_TASK, celery_queue
from app.models import load_models

load_models()  # every table (the kinds' too) before a job opens a session

settings = get_settings()
app = Celery("proctor", broker=settings.redis_url or "redis://127.0.0.1:6379/0",
             include=["workers.tasks"])
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1,
                task_reject_on_worker_lost=True, broker_connection_retry_on_startup=True,
                # A job past its time fails with the reason (the soft limit raises inside it);
                # the hard limit ends a handler that ignores it.
                task_soft_time_limit=settings.job_time_limit_s,
                task_time_limit=settings.job_time_limit_s + 60,
                # `proctor worker --beat` (one per deployment) runs the sweeper every minute,
                # in the short jobs' queue so it never waits behind a model.
                beat_schedule={"sweep-jobs": {"task": SWEEP_TASK, "schedule": 60.0}},
                task_routes={SWEEP_TASK: {"queue": celery_queue("exports")}},
                task_default_queue=celery_queue("models"))
