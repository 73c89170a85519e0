"""The STS kind's branch: recordings, versioned suites of scenarios, the agents' continuations,
generation runs and personal tags (app/kinds/sts/models.py; docs/kinds/sts.md).

Revision ID: sts0001
Revises: (the base of the sts branch; depends on the core's users, agents and jobs, 0001)
"""

from alembic import op

from app.migration_ops import create_table, integer, json, key, moment, string, text

revision = "sts0001"
down_revision = None
branch_labels = ("sts",)
depends_on = "0001"

# Made in this order, dropped in the reverse (children first); a table takes its indexes along.
TABLES = (
    "sts_recordings",
    "sts_suites",
    "sts_suite_versions",
    "sts_generation_runs",
    "sts_scenarios",
    "sts_continuations",
    "sts_scenario_tags",
)


def upgrade() -> None:
    recordings, suites, versions, runs, scenarios, continuations, tags = TABLES
    create_table(
        recordings,
        key("owner_id", "users", "CASCADE", index=True),
        string("external_id", 255, nullable=True),
        string("level", 64),
        integer("seed"),
        text("mission"),
        json("actions"),
        string("actor", 16),
        integer("success_step", nullable=True),
        integer("n_actions"),
        moment("created_at"),
        unique=[("owner_id", "external_id")],
    )
    create_table(
        suites,
        key("owner_id", "users", "CASCADE", index=True),
        string("name", 255),
        text("description"),
        moment("created_at"),
        unique=[("owner_id", "name")],
    )
    create_table(
        versions,
        key("suite_id", suites, "CASCADE", index=True),
        integer("number"),
        string("state", 16),
        moment("published_at", nullable=True),
        moment("created_at"),
        unique=[("suite_id", "number")],
    )
    create_table(
        runs,
        key("version_id", versions, "CASCADE", index=True),
        key("agent_id", "agents", "CASCADE"),
        key("owner_id", "users", "SET NULL", nullable=True),
        key("job_id", "jobs", "SET NULL", nullable=True),
        *(integer(name) for name in ("continuations", "seed", "batch_size")),
        moment("created_at"),
    )
    create_table(
        scenarios,
        key("suite_id", suites, "CASCADE", index=True),
        key("version_id", versions, "CASCADE", index=True),
        key("recording_id", recordings, "RESTRICT", index=True),
        integer("takeover"),
        integer("continuation"),
        text("instruction"),
        string("category", 64),
        json("tags"),
        moment("created_at"),
        unique=[("suite_id", "recording_id", "takeover", "continuation")],
    )
    create_table(
        continuations,
        key("scenario_id", scenarios, "CASCADE", index=True),
        key("agent_id", "agents", "CASCADE", index=True),
        integer("index"),
        json("actions"),
        integer("success_step", nullable=True),
        string("end", 16),
        integer("seed", nullable=True),
        text("notes"),
        moment("created_at"),
        unique=[("scenario_id", "agent_id", "index")],
    )
    create_table(
        tags,
        key("scenario_id", scenarios, "CASCADE", index=True),
        key("user_id", "users", "CASCADE", index=True),
        string("tag", 64),
        moment("created_at"),
        unique=[("scenario_id", "user_id", "tag")],
    )


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
