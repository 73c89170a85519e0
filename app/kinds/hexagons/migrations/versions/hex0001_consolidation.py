"""The Hexagons kind's branch: admins' consolidation decisions on steps where an executor
disagreed with the instructor (app/kinds/hexagons/models.py; docs/kinds/hexagons.md).

Revision ID: hex0001
Revises: (the base of the hexagons branch; depends on the core's users, studies and items, 0001)
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "hex0001"
down_revision = None
branch_labels = ("hexagons",)
depends_on = "0001"

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "hexagons_consolidations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("error_class", sa.String(length=32), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("fixed_board", JSON, nullable=True),
        sa.Column("decided_by", sa.Integer(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_hexagons_consolidations_study_id_studies"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["items.id"], name=op.f("fk_hexagons_consolidations_item_id_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["decided_by"], ["users.id"], name=op.f("fk_hexagons_consolidations_decided_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hexagons_consolidations")),
        sa.UniqueConstraint("item_id", "step", name=op.f("uq_hexagons_consolidations_item_id_step")),
    )
    with op.batch_alter_table("hexagons_consolidations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_hexagons_consolidations_study_id"), ["study_id"], unique=False)


def downgrade() -> None:
    op.drop_table("hexagons_consolidations")
