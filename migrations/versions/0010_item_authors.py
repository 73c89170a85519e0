"""items: the worker who wrote an item (e.g. the instructor of a procedure sent to
verification), who is never assigned it

Revision ID: 0010
Revises: 0009
"""

from alembic import op
import sqlalchemy as sa


revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("author_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key("fk_items_author_id_users", "users", ["author_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_constraint("fk_items_author_id_users", type_="foreignkey")
        batch_op.drop_column("author_id")
