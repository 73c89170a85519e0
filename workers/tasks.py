"""Celery tasks. Jobs are rows in the database; a message is a turn in its job's queue: the
worker claims the queue's fairest job (app.jobs.run_turn), atomically, so a redelivered
message (acks_late) never runs a job twice."""

from app.jobs import (
    CELERY_TASK,
    STALE_AFTER_S,
    SWEEP_TASK,
    reclaim_returned,
    refresh_allow_lists,
    refresh_cached_models,
    refresh_priorities,
    run_turn,
    sweep,
)
from workers.celery_app import app


@app.task(name=CELERY_TASK)
def run_job_task(job_id: int) -> str:
    # A message redelivered after its worker was killed (acks_late, reject_on_worker_lost)
    # re-claims the job once its heartbeat is stale. While the heartbeat is fresh (the worker
    # may be alive, or was killed a moment ago) it answers "busy" and is dropped: the sweeper
    # (app.jobs.sweep) sends the job again once its heartbeat is stale. No retry with a
    # countdown: the worker would hold that message for 15 minutes as an ETA message, and a
    # broker outage meanwhile ended the worker for good (issue 26.1, docs/security.md row 3).
    return run_turn(job_id, stale_after=STALE_AFTER_S)


@app.task(name=SWEEP_TASK)
def sweep_jobs_task() -> dict:
    result = sweep()
    refresh_cached_models()  # stale Dawid-Skene results get a job (app/leaderboards/annotators.py)
    refresh_priorities()  # adaptive allocation's item priorities (app/leaderboards/adaptive.py)
    reclaim_returned()  # returned Prolific submissions' slots back to the pool (app/crowd/service.py)
    refresh_allow_lists()  # allow lists on Prolific kept as workers' records change (likewise)
    return result
