"""Celery tasks. Jobs are rows in the database; a message is a turn in its job's queue: the
worker claims the queue's fairest job (app.jobs.run_turn), atomically, so a redelivered
message (acks_late) never runs a job twice."""

from app.jobs import CELERY_TASK, STALE_AFTER_S, SWEEP_TASK, refresh_cached_models, run_turn, sweep
from workers.celery_app import app


@app.task(name=CELERY_TASK, bind=True, max_retries=None)
def run_job_task(self, job_id: int) -> str:
    # A message redelivered after its worker was killed (acks_late) re-claims the job once
    # its heartbeat is stale. While the heartbeat is fresh (the worker may be alive, or was
    # killed a moment ago) look again when it would be stale, instead of dropping the message.
    state = run_turn(job_id, stale_after=STALE_AFTER_S)
    if state == "busy":
        raise self.retry(countdown=STALE_AFTER_S)
    return state


@app.task(name=SWEEP_TASK)
def sweep_jobs_task() -> dict:
    result = sweep()
    refresh_cached_models()  # stale Dawid-Skene results get a job (app/leaderboards/annotators.py)
    return result
