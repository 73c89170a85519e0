"""generation runs: candidates, listener rollouts; job heartbeats

Revision ID: 0005
Revises: 0004
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "generation_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("speaker_artifact_id", sa.Integer(), nullable=False),
        sa.Column("listener_artifact_ids", JSON, nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("m", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=8), nullable=False),
        sa.Column("design", sa.String(length=16), nullable=False),
        sa.Column("max_len", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("paths", JSON, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("gamma", sa.Float(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["studies.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.ForeignKeyConstraint(["speaker_artifact_id"], ["agent_artifacts.id"]),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("generation_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_generation_runs_study_id"), ["study_id"], unique=False)
    op.create_table(
        "generation_candidates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("path_key", sa.String(length=255), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=False),
        sa.Column("speaker_score", sa.Float(), nullable=False),
        sa.Column("listener_score", sa.Float(), nullable=True),
        sa.Column("chosen", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["generation_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "path_key", "k"),
    )
    with op.batch_alter_table("generation_candidates", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_generation_candidates_run_id"), ["run_id"], unique=False)
    op.create_table(
        "generation_rollouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("listener", sa.Integer(), nullable=False),
        sa.Column("m", sa.Integer(), nullable=False),
        sa.Column("path", JSON, nullable=False),
        sa.Column("ndtw", sa.Float(), nullable=False),
        sa.Column("sdtw", sa.Float(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["candidate_id"], ["generation_candidates.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("candidate_id", "listener", "m"),
    )
    with op.batch_alter_table("generation_rollouts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_generation_rollouts_candidate_id"), ["candidate_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("generation_rollouts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_generation_rollouts_candidate_id"))
    op.drop_table("generation_rollouts")
    with op.batch_alter_table("generation_candidates", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_generation_candidates_run_id"))
    op.drop_table("generation_candidates")
    with op.batch_alter_table("generation_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_generation_runs_study_id"))
    op.drop_table("generation_runs")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("heartbeat_at")
