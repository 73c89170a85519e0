"""Recordings made in a play study name their player: sts_recordings.actor is "human:<worker
pseudonym>" for them (a pseudonym is up to 32 characters), so the column grows from 16 to 64.

Revision ID: sts0002
Revises: sts0001
"""

import sqlalchemy as sa
from alembic import op

revision = "sts0002"
down_revision = "sts0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sts_recordings", schema=None) as batch_op:
        batch_op.alter_column(
            "actor", existing_type=sa.String(length=16), type_=sa.String(length=64), existing_nullable=False
        )


def downgrade() -> None:
    # A play's actor does not fit the old column: it is cut to "human", what it was before.
    op.execute("UPDATE sts_recordings SET actor = 'human' WHERE actor LIKE 'human:%'")
    with op.batch_alter_table("sts_recordings", schema=None) as batch_op:
        batch_op.alter_column(
            "actor", existing_type=sa.String(length=64), type_=sa.String(length=16), existing_nullable=False
        )
