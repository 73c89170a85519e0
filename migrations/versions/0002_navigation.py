"""navigation: environments, and the metrics a kind derives beside an annotation's score

Revision ID: 0002
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scan", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("connectivity_key", sa.String(length=255), nullable=False),
        sa.Column("semantics_key", sa.String(length=255), nullable=True),
        sa.Column("n_viewpoints", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("scan", name=op.f("uq_environments_scan")),
    )
    with op.batch_alter_table("annotations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("scores", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("annotations", schema=None) as batch_op:
        batch_op.drop_column("scores")
    op.drop_table("environments")
