"""The word-count kind's branch: its tallies table.

Revision ID: wc0001
Revises: (base of the wordcount branch; depends on the core's studies table, 0001)
"""

import sqlalchemy as sa
from alembic import op

revision = "wc0001"
down_revision = None
branch_labels = ("wordcount",)
depends_on = "0001"


def upgrade() -> None:
    op.create_table(
        "wordcount_tallies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item", sa.String(length=255), nullable=False),
        sa.Column("answers", sa.Integer(), nullable=False),
        sa.Column("right", sa.Integer(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], ondelete="CASCADE", name="fk_wordcount_tallies_study_id_studies"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_wordcount_tallies"),
        sa.UniqueConstraint("study_id", "item", name="uq_wordcount_tallies_study_id"),
    )
    op.create_index("ix_wordcount_tallies_study_id", "wordcount_tallies", ["study_id"])


def downgrade() -> None:
    op.drop_index("ix_wordcount_tallies_study_id", table_name="wordcount_tallies")
    op.drop_table("wordcount_tallies")
