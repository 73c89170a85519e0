"""The navigation kind's tables carry its name, as every kind's do (sts_*, hexagons_*):
environments -> navigation_environments, generation_runs -> navigation_generation_runs,
generation_candidates -> navigation_generation_candidates, generation_rollouts ->
navigation_generation_rollouts.

Each table is made anew under its new name and its rows copied, so that its keys, indexes and
constraints carry the new name on both backends (a rename keeps the old ones on PostgreSQL and
in SQLite's stored table definition). Ids are kept; PostgreSQL's id sequences go on after the
largest. After nav0005 (which reads generation_runs) and so after core 0016.

Revision ID: nav0006
Revises: nav0005
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "nav0006"
down_revision = "nav0005"
branch_labels = None
depends_on = None

# app.db's naming convention, as it stands at this revision.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
OLD = ("environments", "generation_runs", "generation_candidates", "generation_rollouts")
NEW = tuple(f"navigation_{name}" for name in OLD)
TZ = sa.DateTime(timezone=True)


def _tables(names: tuple[str, ...]) -> list[sa.Table]:
    """The four tables as they are at this revision, under `names` (OLD's order), parents first."""
    env, runs, candidates, rollouts = names
    md = sa.MetaData(naming_convention=NAMING)
    for core in ("users", "studies", "agent_artifacts", "jobs"):  # what their keys refer to, as it is
        sa.Table(core, md, sa.Column("id", sa.Integer, primary_key=True))
    col = sa.Column
    return [
        sa.Table(
            env,
            md,
            col("id", sa.Integer, primary_key=True),
            col("scan", sa.String(64), nullable=False, unique=True),
            col("source", sa.String(16), nullable=False),
            col("connectivity_key", sa.String(255), nullable=False),
            col("semantics_key", sa.String(255)),
            col("n_viewpoints", sa.Integer, nullable=False),
            col("panoramas", JSON, nullable=False, server_default=sa.text("'{}'")),
            col("owner_id", sa.Integer, sa.ForeignKey("users.id", ondelete="SET NULL")),
            col("created_at", TZ, nullable=False),
        ),
        sa.Table(
            runs,
            md,
            col("id", sa.Integer, primary_key=True),
            col("study_id", sa.Integer, sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False, index=True),
            col("owner_id", sa.Integer, sa.ForeignKey("users.id")),
            col("speaker_artifact_id", sa.Integer, sa.ForeignKey("agent_artifacts.id"), nullable=False),
            col("listener_artifact_ids", JSON, nullable=False),
            *(col(c, sa.Integer, nullable=False) for c in ("n", "k", "m")),
            col("metric", sa.String(8), nullable=False),
            col("design", sa.String(16), nullable=False),
            *(col(c, sa.Integer, nullable=False) for c in ("max_len", "seed", "batch_size")),
            col("top_p", sa.Float, nullable=False, server_default=sa.text("1.0")),
            col("paths", JSON, nullable=False),
            col("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="SET NULL")),
            col("gamma", sa.Float),
            col("state", sa.String(16), nullable=False),
            col("created_at", TZ, nullable=False),
        ),
        sa.Table(
            candidates,
            md,
            col("id", sa.Integer, primary_key=True),
            col("run_id", sa.Integer, sa.ForeignKey(f"{runs}.id", ondelete="CASCADE"), nullable=False, index=True),
            col("path_key", sa.String(255), nullable=False),
            col("k", sa.Integer, nullable=False),
            col("role", sa.String(16), nullable=False),
            col("instruction", sa.Text, nullable=False),
            col("speaker_score", sa.Float, nullable=False),
            col("listener_score", sa.Float),
            col("chosen", sa.Boolean, nullable=False),
            sa.UniqueConstraint("run_id", "path_key", "k"),
        ),
        sa.Table(
            rollouts,
            md,
            col("id", sa.Integer, primary_key=True),
            col(
                "candidate_id",
                sa.Integer,
                sa.ForeignKey(f"{candidates}.id", ondelete="CASCADE"),
                nullable=False,
                index=True,
            ),
            col("listener", sa.Integer, nullable=False),
            col("m", sa.Integer, nullable=False),
            col("path", JSON, nullable=False),
            col("ndtw", sa.Float, nullable=False),
            col("sdtw", sa.Float, nullable=False),
            col("success", sa.Boolean, nullable=False),
            sa.UniqueConstraint("candidate_id", "listener", "m"),
        ),
    ]


def _move(old: tuple[str, ...], new: tuple[str, ...]) -> None:
    c = op.get_bind()
    made = _tables(new)
    for table, source in zip(made, old):
        table.create(c)
        columns = ", ".join(col.name for col in table.columns)
        c.execute(sa.text(f"INSERT INTO {table.name} ({columns}) SELECT {columns} FROM {source}"))
        if c.dialect.name == "postgresql":  # the next id follows the largest copied one
            c.execute(
                sa.text(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                    f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"
                )
            )
    for source in reversed(old):  # children first
        op.drop_table(source)


def upgrade() -> None:
    _move(OLD, NEW)


def downgrade() -> None:
    _move(NEW, OLD)
