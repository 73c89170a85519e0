"""Common-ToM's own migration branch begins: consistency clusters per proposition.

The paper counts a proposition as consistent when every question about it is answered right,
across time: questions group per (dialogue, eno), not per (dialogue, eno, sno). Items stored
before this change carry the cluster "cid:eno:sno"; this drops the ":sno" so existing studies'
leaderboards use the paper's grouping too. Nothing else about the items changes.

Revision ID: tom0001
Revises: (the base of the tom branch; depends on core 0001)
"""

import sqlalchemy as sa
from alembic import op

revision = "tom0001"
down_revision = None
branch_labels = ("tom",)
depends_on = "0001"

KIND = "tom"
BATCH = 5000


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "SELECT items.id, items.cluster FROM items JOIN studies ON studies.id = items.study_id "
            "WHERE studies.kind = :kind AND items.cluster LIKE '%:%:%'"
        ),
        {"kind": KIND},
    ).all()
    update = sa.text("UPDATE items SET cluster = :cluster WHERE id = :id")
    changes = [{"id": i, "cluster": c.rsplit(":", 1)[0]} for i, c in rows]
    for start in range(0, len(changes), BATCH):
        conn.execute(update, changes[start : start + BATCH])


def downgrade() -> None:
    # The time step (sno) is not kept elsewhere in the row's columns; the finer grouping can be
    # rebuilt only by re-importing. Leave the clusters as they are.
    pass
