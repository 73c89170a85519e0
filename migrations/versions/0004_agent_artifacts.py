"""agents: uploaded model artifacts (TorchScript or safetensors + config), versioned

Revision ID: 0004
Revises: 0003
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_artifacts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("blob_key", sa.String(length=500), nullable=False),
        sa.Column("config", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("validated_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("agent_id", "version"),
    )
    with op.batch_alter_table("agent_artifacts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agent_artifacts_agent_id"), ["agent_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("agent_artifacts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agent_artifacts_agent_id"))
    op.drop_table("agent_artifacts")
