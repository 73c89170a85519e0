"""Admins' classifications of failed continuations with the error types of the paper's
appendix A.3 (app/kinds/sts/failures.py).

Revision ID: sts0003
Revises: sts0002
"""

import sqlalchemy as sa
from alembic import op

revision = "sts0003"
down_revision = "sts0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sts_failure_reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("error_type", sa.String(length=32), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_sts_failure_reviews_study_id_studies"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["items.id"], name=op.f("fk_sts_failure_reviews_item_id_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["reviewer_id"], ["users.id"], name=op.f("fk_sts_failure_reviews_reviewer_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_failure_reviews")),
        sa.UniqueConstraint("item_id", name=op.f("uq_sts_failure_reviews_item_id")),
    )
    with op.batch_alter_table("sts_failure_reviews", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_failure_reviews_study_id"), ["study_id"], unique=False)


def downgrade() -> None:
    op.drop_table("sts_failure_reviews")
