"""The STS kind's branch: recordings, versioned suites of scenarios, the agents' continuations,
generation runs and personal tags (app/kinds/sts/models.py; docs/kinds/sts.md).

Revision ID: sts0001
Revises: (the base of the sts branch; depends on the core's users, agents and jobs, 0001)
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "sts0001"
down_revision = None
branch_labels = ("sts",)
depends_on = "0001"

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sts_recordings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=255), nullable=True),
        sa.Column("level", sa.String(length=64), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("mission", sa.Text(), nullable=False),
        sa.Column("actions", JSON, nullable=False),
        sa.Column("actor", sa.String(length=16), nullable=False),
        sa.Column("success_step", sa.Integer(), nullable=True),
        sa.Column("n_actions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_sts_recordings_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_recordings")),
        sa.UniqueConstraint("owner_id", "external_id", name=op.f("uq_sts_recordings_owner_id_external_id")),
    )
    with op.batch_alter_table("sts_recordings", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_recordings_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "sts_suites",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_sts_suites_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_suites")),
        sa.UniqueConstraint("owner_id", "name", name=op.f("uq_sts_suites_owner_id_name")),
    )
    with op.batch_alter_table("sts_suites", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_suites_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "sts_suite_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["suite_id"], ["sts_suites.id"], name=op.f("fk_sts_suite_versions_suite_id_sts_suites"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_suite_versions")),
        sa.UniqueConstraint("suite_id", "number", name=op.f("uq_sts_suite_versions_suite_id_number")),
    )
    with op.batch_alter_table("sts_suite_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_suite_versions_suite_id"), ["suite_id"], unique=False)

    op.create_table(
        "sts_generation_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("continuations", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_sts_generation_runs_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_sts_generation_runs_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_sts_generation_runs_owner_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["sts_suite_versions.id"],
            name=op.f("fk_sts_generation_runs_version_id_sts_suite_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_generation_runs")),
    )
    with op.batch_alter_table("sts_generation_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_generation_runs_version_id"), ["version_id"], unique=False)

    op.create_table(
        "sts_scenarios",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite_id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("recording_id", sa.Integer(), nullable=False),
        sa.Column("takeover", sa.Integer(), nullable=False),
        sa.Column("continuation", sa.Integer(), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("tags", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["recording_id"],
            ["sts_recordings.id"],
            name=op.f("fk_sts_scenarios_recording_id_sts_recordings"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["suite_id"], ["sts_suites.id"], name=op.f("fk_sts_scenarios_suite_id_sts_suites"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["sts_suite_versions.id"],
            name=op.f("fk_sts_scenarios_version_id_sts_suite_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_scenarios")),
        sa.UniqueConstraint(
            "suite_id",
            "recording_id",
            "takeover",
            "continuation",
            name=op.f("uq_sts_scenarios_suite_id_recording_id_takeover_continuation"),
        ),
    )
    with op.batch_alter_table("sts_scenarios", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_scenarios_recording_id"), ["recording_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sts_scenarios_suite_id"), ["suite_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sts_scenarios_version_id"), ["version_id"], unique=False)

    op.create_table(
        "sts_continuations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("actions", JSON, nullable=False),
        sa.Column("success_step", sa.Integer(), nullable=True),
        sa.Column("end", sa.String(length=16), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_sts_continuations_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["sts_scenarios.id"],
            name=op.f("fk_sts_continuations_scenario_id_sts_scenarios"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_continuations")),
        sa.UniqueConstraint(
            "scenario_id", "agent_id", "index", name=op.f("uq_sts_continuations_scenario_id_agent_id_index")
        ),
    )
    with op.batch_alter_table("sts_continuations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_continuations_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sts_continuations_scenario_id"), ["scenario_id"], unique=False)

    op.create_table(
        "sts_scenario_tags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["sts_scenarios.id"],
            name=op.f("fk_sts_scenario_tags_scenario_id_sts_scenarios"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_sts_scenario_tags_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sts_scenario_tags")),
        sa.UniqueConstraint("scenario_id", "user_id", "tag", name=op.f("uq_sts_scenario_tags_scenario_id_user_id_tag")),
    )
    with op.batch_alter_table("sts_scenario_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sts_scenario_tags_scenario_id"), ["scenario_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sts_scenario_tags_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sts_scenario_tags", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_scenario_tags_user_id"))
        batch_op.drop_index(batch_op.f("ix_sts_scenario_tags_scenario_id"))

    op.drop_table("sts_scenario_tags")
    with op.batch_alter_table("sts_continuations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_continuations_scenario_id"))
        batch_op.drop_index(batch_op.f("ix_sts_continuations_agent_id"))

    op.drop_table("sts_continuations")
    with op.batch_alter_table("sts_scenarios", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_scenarios_version_id"))
        batch_op.drop_index(batch_op.f("ix_sts_scenarios_suite_id"))
        batch_op.drop_index(batch_op.f("ix_sts_scenarios_recording_id"))

    op.drop_table("sts_scenarios")
    with op.batch_alter_table("sts_generation_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_generation_runs_version_id"))

    op.drop_table("sts_generation_runs")
    with op.batch_alter_table("sts_suite_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_suite_versions_suite_id"))

    op.drop_table("sts_suite_versions")
    with op.batch_alter_table("sts_suites", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_suites_owner_id"))

    op.drop_table("sts_suites")
    with op.batch_alter_table("sts_recordings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sts_recordings_owner_id"))

    op.drop_table("sts_recordings")
