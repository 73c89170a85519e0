"""For a kind's migration that makes its runs from before agent_runs existed into agent runs
(nav0005, sts0005): one row per run's job, added or filled in. Written against the table as
migration 0016 made it (its own table clause, not the model), so later changes to the model do
not change what those migrations did."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
RUNS = sa.table(
    "agent_runs",
    sa.column("id"),
    sa.column("kind"),
    sa.column("study_id"),
    sa.column("target", JSON),
    sa.column("agent_id"),
    sa.column("artifact_ids", JSON),
    sa.column("params", JSON),
    sa.column("job_id"),
    sa.column("owner_id"),
    sa.column("created_at"),
)


def as_agent_run(conn: Any, kind: str, job_id: int, owner_id: int | None, created_at: Any, **values: Any) -> None:
    """The job's agent run gets `values`; when core 0016 found no such run (its job had
    another name then), it is added."""
    found = conn.execute(sa.select(RUNS.c.id).where(RUNS.c.job_id == job_id)).scalar()
    if found is not None:
        conn.execute(RUNS.update().where(RUNS.c.id == found).values(**values))
        return
    row = {"study_id": None, "target": {}, "agent_id": None, "artifact_ids": [], "params": {}, **values}
    conn.execute(RUNS.insert().values(kind=kind, job_id=job_id, owner_id=owner_id, created_at=created_at, **row))
