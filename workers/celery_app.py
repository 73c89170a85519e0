"""Celery application: `celery -A workers.celery_app worker`."""

from celery import Celery

from app.config import get_settings
from app.models import load_models

load_models()  # every table (the kinds' too) before a job opens a session

settings = get_settings()
app = Celery("proctor", broker=settings.redis_url or "redis://127.0.0.1:6379/0",
             include=["workers.tasks"])
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1,
                task_reject_on_worker_lost=True, broker_connection_retry_on_startup=True)
