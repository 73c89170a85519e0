"""Buildings have owners: environments.owner_id.

The account that imported a building; only it or an admin may replace the building or its
panoramas. Buildings stored before the column existed have no owner, which means admins only
(nobody can tell who imported them). A deleted account leaves its buildings to the admins.

Revision ID: nav0003
Revises: nav0002
"""

import sqlalchemy as sa
from alembic import op

revision = "nav0003"
down_revision = "nav0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_environments_owner_id_users", "users", ["owner_id"], ["id"], ondelete="SET NULL"
        )


def downgrade() -> None:
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.drop_constraint("fk_environments_owner_id_users", type_="foreignkey")
        batch_op.drop_column("owner_id")
