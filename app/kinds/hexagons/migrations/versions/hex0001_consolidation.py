"""The Hexagons kind's branch: admins' consolidation decisions on steps where an executor
disagreed with the instructor (app/kinds/hexagons/models.py; docs/kinds/hexagons.md).

Revision ID: hex0001
Revises: (the base of the hexagons branch; depends on the core's users, studies and items, 0001)
"""

from alembic import op

from app.migration_ops import create_table, integer, json, key, moment, string, text

revision = "hex0001"
down_revision = None
branch_labels = ("hexagons",)
depends_on = "0001"


def upgrade() -> None:
    create_table(
        "hexagons_consolidations",
        key("study_id", "studies", "CASCADE", index=True),
        key("item_id", "items", "CASCADE"),
        integer("step"),
        string("error_class", 32),
        text("note"),
        json("fixed_board", nullable=True),
        key("decided_by", "users", "SET NULL", nullable=True),
        moment("decided_at"),
        unique=[("item_id", "step")],
    )


def downgrade() -> None:
    op.drop_table("hexagons_consolidations")
