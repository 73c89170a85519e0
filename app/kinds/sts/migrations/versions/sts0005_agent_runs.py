"""Each generation run is an agent run (core 0016, app/runs): its row there names its suite
version (the target), its agent and its own run's id.

Runs whose job the core's migration did not find get their row here.

Revision ID: sts0005
Revises: sts0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "sts0005"
down_revision = "sts0004"
branch_labels = None
depends_on = "0016"

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
RUNS = sa.table("agent_runs", sa.column("id"), sa.column("kind"), sa.column("study_id"), sa.column("target", JSON),
                sa.column("agent_id"), sa.column("artifact_ids", JSON), sa.column("params", JSON),
                sa.column("job_id"), sa.column("owner_id"), sa.column("created_at"))


def upgrade() -> None:
    c = op.get_bind()
    rows = c.execute(sa.text(
        "SELECT g.id, g.agent_id, g.owner_id, g.job_id, g.created_at, g.continuations, g.seed, g.batch_size, "
        "v.suite_id, v.number FROM sts_generation_runs g JOIN sts_suite_versions v ON v.id = g.version_id "
        "WHERE g.job_id IS NOT NULL ORDER BY g.id")).mappings().all()
    for g in rows:
        values = {"target": {"suite_id": g["suite_id"], "version": g["number"]}, "agent_id": g["agent_id"],
                  "study_id": None, "params": {"continuations": g["continuations"], "seed": g["seed"],
                                               "batch_size": g["batch_size"], "generation_run": g["id"]}}
        found = c.execute(sa.select(RUNS.c.id).where(RUNS.c.job_id == g["job_id"])).scalar()
        if found is None:
            c.execute(RUNS.insert().values(kind="sts", artifact_ids=[], job_id=g["job_id"], owner_id=g["owner_id"],
                                           created_at=g["created_at"], **values))
        else:
            c.execute(RUNS.update().where(RUNS.c.id == found).values(**values))


def downgrade() -> None:
    pass  # the rows stay agent runs; core 0016's downgrade removes the table
