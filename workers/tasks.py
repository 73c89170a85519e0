"""Celery tasks. Jobs are rows in the database; a task only runs one by id, so a redelivered
message (acks_late) finds the job claimed and does nothing twice."""

from app.jobs import CELERY_TASK, STALE_AFTER_S, run_job
from workers.celery_app import app


@app.task(name=CELERY_TASK)
def run_job_task(job_id: int) -> str:
    # A message redelivered after its worker was killed (acks_late) re-claims the job once
    # its heartbeat is stale; a live worker's job is left alone.
    return run_job(job_id, stale_after=STALE_AFTER_S)
