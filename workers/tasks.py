"""Celery tasks. Jobs are rows in the database; a task only runs one by id, so a redelivered
message (acks_late) finds the job claimed and does nothing twice."""

from app.jobs import CELERY_TASK, run_job
from workers.celery_app import app


@app.task(name=CELERY_TASK)
def run_job_task(job_id: int) -> str:
    return run_job(job_id)
