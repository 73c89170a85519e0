"""navigation: per-viewpoint panoramas of a building

Revision ID: 0003
Revises: 0002
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing buildings get an empty map, so the column can be NOT NULL at once.
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "panoramas",
                sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
                server_default=sa.text("'{}'"),
                nullable=False,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.drop_column("panoramas")
