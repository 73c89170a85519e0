"""Admins' classifications of failed continuations with the error types of the paper's
appendix A.3 (app/kinds/sts/failures.py).

Revision ID: sts0003
Revises: sts0002
"""

from alembic import op

from app.migration_ops import create_table, key, moment, string, text

revision = "sts0003"
down_revision = "sts0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "sts_failure_reviews",
        key("study_id", "studies", "CASCADE", index=True),
        key("item_id", "items", "CASCADE"),
        string("error_type", 32),
        text("note"),
        key("reviewer_id", "users", "SET NULL", nullable=True),
        moment("updated_at"),
        unique=[("item_id",)],
    )


def downgrade() -> None:
    op.drop_table("sts_failure_reviews")
