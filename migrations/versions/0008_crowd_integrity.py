"""studies: caps per worker and per address; bundles: the browser that opened them, the
address (an HMAC) and the consent text's version the worker agreed to

Revision ID: 0008
Revises: 0007
"""

from alembic import op
import sqlalchemy as sa


revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_bundles_per_worker", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("max_open_bundles_per_ip", sa.Integer(), server_default="100", nullable=False))
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("consent_version", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("browser_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("ip_hash", sa.String(length=32), nullable=True))
        batch_op.create_index("ix_bundles_study_ip", ["study_id", "ip_hash", "finished_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.drop_index("ix_bundles_study_ip")
        batch_op.drop_column("ip_hash")
        batch_op.drop_column("browser_hash")
        batch_op.drop_column("consent_version")
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.drop_column("max_open_bundles_per_ip")
        batch_op.drop_column("max_bundles_per_worker")
