"""agent_runs: one row per run of an agent's model over a target, for every kind (app/runs).

Runs from before are found through their jobs ("<kind>.generate"): each gets a row with the
job's kind, study, owner and params; a kind's own migration fills in what only it knows (its
agent, artifacts, target).

Revision ID: 0016
Revises: 0015
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "agent_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=True),
        sa.Column("target", json, nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=True),
        sa.Column("artifact_ids", json, nullable=False),
        sa.Column("params", json, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_agent_runs_agent_id_agents"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_agent_runs_job_id_jobs"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_agent_runs_owner_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_agent_runs_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_runs")),
        sa.UniqueConstraint("job_id", name=op.f("uq_agent_runs_job_id")),
    )
    op.create_index(op.f("ix_agent_runs_kind"), "agent_runs", ["kind"], unique=False)
    op.create_index(op.f("ix_agent_runs_study_id"), "agent_runs", ["study_id"], unique=False)
    op.create_index(op.f("ix_agent_runs_owner_id"), "agent_runs", ["owner_id"], unique=False)
    # The generation jobs already stored, by the one name every kind gives them.
    op.execute(
        sa.text(
            "INSERT INTO agent_runs (kind, study_id, target, agent_id, artifact_ids, params, job_id, owner_id, "
            "created_at) SELECT substr(task, 1, length(task) - length('.generate')), study_id, '{}', NULL, '[]', "
            "params, id, owner_id, created_at FROM jobs WHERE task LIKE '%.generate' ORDER BY id"
        )
    )


def downgrade() -> None:
    op.drop_index("ix_agent_runs_owner_id", table_name="agent_runs")
    op.drop_index("ix_agent_runs_study_id", table_name="agent_runs")
    op.drop_index("ix_agent_runs_kind", table_name="agent_runs")
    op.drop_table("agent_runs")
