"""What the kinds' Alembic revisions share: a table with an integer id, its columns in one line
each, its keys and indexes named by app.db's convention (NAMING), and a job's rename.

Revisions that use these are written once and never change: these helpers make exactly the DDL
the revisions spelled out before (the migration tests compare the result with the models on
SQLite and PostgreSQL). Change what one emits only by adding a new helper."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# JSONB on PostgreSQL, as app.db.JSONType.
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
Col = sa.Column[Any]


def integer(name: str, nullable: bool = False) -> Col:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def key(name: str, parent: str, ondelete: str, nullable: bool = False, index: bool = False) -> Col:
    """An integer column holding a row id of `parent`; create_table makes its foreign key (and
    its index, where `index`)."""
    return sa.Column(
        name, sa.Integer(), nullable=nullable, info={"parent": parent, "ondelete": ondelete, "index": index}
    )


def string(name: str, length: int, nullable: bool = False) -> Col:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def text(name: str) -> Col:
    return sa.Column(name, sa.Text(), nullable=False)


def json(name: str, nullable: bool = False) -> Col:
    return sa.Column(name, JSON, nullable=nullable)


def moment(name: str, nullable: bool = False) -> Col:
    """A timezone-aware time (app.db.UTCDateTime's column)."""
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def create_table(table: str, *columns: Col, unique: Iterable[Sequence[str]] = ()) -> None:
    """`table` with an integer id first, then `columns`, the keys' foreign keys, and `unique`:
    the column lists unique together."""
    keys = [c for c in columns if "parent" in c.info]
    op.create_table(
        table,
        sa.Column("id", sa.Integer(), nullable=False),
        *columns,
        *(
            sa.ForeignKeyConstraint(
                [c.name],
                [f"{c.info['parent']}.id"],
                name=op.f(f"fk_{table}_{c.name}_{c.info['parent']}"),
                ondelete=c.info["ondelete"],
            )
            for c in keys
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
        *(sa.UniqueConstraint(*names, name=op.f(f"uq_{table}_{'_'.join(names)}")) for names in unique),
    )
    indexed = [c.name for c in keys if c.info["index"]]
    if indexed:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for name in indexed:
                batch_op.create_index(batch_op.f(f"ix_{table}_{name}"), [name], unique=False)


def rename_jobs(renames: Iterable[tuple[str, str]]) -> None:
    """Stored jobs (old task name, new) keep their state and history under the new name, so a
    queued or running one is still found by its handler."""
    for old, new in renames:
        op.execute(sa.text("UPDATE jobs SET task = :new WHERE task = :old").bindparams(old=old, new=new))
