"""Each generation run is an agent run (core 0016, app/runs): its row there names its suite
version (the target), its agent and its own run's id; runs whose job the core's migration did
not find get their row here.

Revision ID: sts0005
Revises: sts0004
"""

import sqlalchemy as sa
from alembic import op

from app.runs.backfill import as_agent_run

revision = "sts0005"
down_revision = "sts0004"
branch_labels = None
depends_on = "0016"


def upgrade() -> None:
    c = op.get_bind()
    rows = (
        c.execute(
            sa.text(
                "SELECT g.id, g.agent_id, g.owner_id, g.job_id, g.created_at, g.continuations, g.seed, g.batch_size, "
                "v.suite_id, v.number FROM sts_generation_runs g JOIN sts_suite_versions v ON v.id = g.version_id "
                "WHERE g.job_id IS NOT NULL ORDER BY g.id"
            )
        )
        .mappings()
        .all()
    )
    for g in rows:
        as_agent_run(
            c,
            "sts",
            g["job_id"],
            g["owner_id"],
            g["created_at"],
            study_id=None,
            agent_id=g["agent_id"],
            target={"suite_id": g["suite_id"], "version": g["number"]},
            params={
                "continuations": g["continuations"],
                "seed": g["seed"],
                "batch_size": g["batch_size"],
                "generation_run": g["id"],
            },
        )


def downgrade() -> None:
    pass  # the rows stay agent runs; core 0016's downgrade removes the table
