"""Each generation run is an agent run (core 0016, app/runs): its row there names the speaker
and listeners it ran and its own run's id. Runs whose job the core's migration did not find
(it may run before nav0004 renamed the job) get their row here.

Revision ID: nav0005
Revises: nav0004
"""

import json

import sqlalchemy as sa
from alembic import op

from app.runs.backfill import as_agent_run

revision = "nav0005"
down_revision = "nav0004"
branch_labels = None
depends_on = "0016"

FIELDS = ("n", "k", "m", "metric", "design", "max_len", "seed", "batch_size", "top_p")


def upgrade() -> None:
    c = op.get_bind()
    rows = (
        c.execute(
            sa.text(
                f"SELECT id, study_id, owner_id, job_id, created_at, speaker_artifact_id, "
                f"listener_artifact_ids, {', '.join(FIELDS)} FROM generation_runs "
                f"WHERE job_id IS NOT NULL ORDER BY id"
            )
        )
        .mappings()
        .all()
    )
    for g in rows:
        listeners = g["listener_artifact_ids"]
        if isinstance(listeners, str):  # SQLite hands JSON back as text
            listeners = json.loads(listeners)
        as_agent_run(
            c,
            "navigation",
            g["job_id"],
            g["owner_id"],
            g["created_at"],
            study_id=g["study_id"],
            artifact_ids=[g["speaker_artifact_id"], *(listeners or [])],
            params={**{f: g[f] for f in FIELDS}, "generation_run": g["id"]},
        )


def downgrade() -> None:
    pass  # the rows stay agent runs; core 0016's downgrade removes the table
