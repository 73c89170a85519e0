"""studies: the contact and estimated time workers see with the consent text (and the payment)

Revision ID: 0009
Revises: 0008
"""

from alembic import op
import sqlalchemy as sa


revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.add_column(sa.Column("contact", sa.String(length=255), server_default="", nullable=False))
        batch_op.add_column(sa.Column("estimated_minutes", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.drop_column("estimated_minutes")
        batch_op.drop_column("contact")
