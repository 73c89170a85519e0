"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 18:21:16.718275
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("email", sa.String(length=255), nullable=True),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("platform", sa.String(length=16), nullable=True),
        sa.Column("external_id", sa.String(length=255), nullable=True),
        sa.Column("pseudonym", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
        sa.UniqueConstraint("platform", "external_id", name=op.f("uq_users_platform_external_id")),
        sa.UniqueConstraint("pseudonym", name=op.f("uq_users_pseudonym")),
    )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_users_role"), ["role"], unique=False)

    op.create_table(
        "agents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_agents_owner_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("owner_id", "name", "version", name=op.f("uq_agents_owner_id_name_version")),
    )
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agents_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_id"), ["user_id"], unique=False)

    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target_type", sa.String(length=32), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=False),
        sa.Column("detail", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["actor_id"], ["users.id"], name=op.f("fk_audit_log_actor_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_action"), ["action"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_log_actor_id"), ["actor_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_log_created_at"), ["created_at"], unique=False)

    op.create_table(
        "studies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("annotations_per_item", sa.Integer(), nullable=False),
        sa.Column("bundle_size", sa.Integer(), nullable=False),
        sa.Column("gold_rate", sa.Float(), nullable=False),
        sa.Column("lease_seconds", sa.Integer(), nullable=False),
        sa.Column("completion_code", sa.String(length=64), nullable=False),
        sa.Column("redirect_url", sa.String(length=1000), nullable=False),
        sa.Column("consent_text", sa.Text(), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("payment", sa.String(length=100), nullable=False),
        sa.Column("kind_settings", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_studies_owner_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_studies")),
        sa.UniqueConstraint("slug", name=op.f("uq_studies_slug")),
    )
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_studies_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_studies_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=255), nullable=False),
        sa.Column("payload", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("reference", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("cluster", sa.String(length=255), nullable=False),
        sa.Column("exclusion_group", sa.String(length=255), nullable=True),
        sa.Column("position", sa.Float(), nullable=False),
        sa.Column("n_active", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_items_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_items")),
        sa.UniqueConstraint("study_id", "external_id", name=op.f("uq_items_study_id_external_id")),
    )
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.create_index("ix_items_pick", ["study_id", "is_gold", "n_active", "position"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=True),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("params", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("result", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_jobs_owner_id_users")),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_jobs_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_study_id"), ["study_id"], unique=False)

    op.create_table(
        "participants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("reviewed_by", sa.Integer(), nullable=True),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["reviewed_by"], ["users.id"], name=op.f("fk_participants_reviewed_by_users")),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_participants_study_id_studies"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["worker_id"], ["users.id"], name=op.f("fk_participants_worker_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_participants")),
        sa.UniqueConstraint("study_id", "worker_id", name=op.f("uq_participants_study_id_worker_id")),
    )
    with op.batch_alter_table("participants", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_participants_study_id"), ["study_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_participants_worker_id"), ["worker_id"], unique=False)

    op.create_table(
        "agent_outputs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_agent_outputs_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["items.id"], name=op.f("fk_agent_outputs_item_id_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_agent_outputs_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_outputs")),
        sa.UniqueConstraint("agent_id", "item_id", name=op.f("uq_agent_outputs_agent_id_item_id")),
    )
    with op.batch_alter_table("agent_outputs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agent_outputs_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_agent_outputs_study_id"), ["study_id"], unique=False)

    op.create_table(
        "bundles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("participant_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("external_assignment_id", sa.String(length=255), nullable=False),
        sa.Column("hit_id", sa.String(length=255), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("gold_slots", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("n_done", sa.Integer(), nullable=False),
        sa.Column("consented_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["participant_id"], ["participants.id"], name=op.f("fk_bundles_participant_id_participants")
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_bundles_study_id_studies"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["worker_id"], ["users.id"], name=op.f("fk_bundles_worker_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bundles")),
        sa.UniqueConstraint(
            "study_id",
            "worker_id",
            "external_assignment_id",
            name=op.f("uq_bundles_study_id_worker_id_external_assignment_id"),
        ),
    )
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bundles_participant_id"), ["participant_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_bundles_study_id"), ["study_id"], unique=False)

    op.create_table(
        "assignments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("bundle_id", sa.Integer(), nullable=False),
        sa.Column("exclusion_group", sa.String(length=255), nullable=True),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("leased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["bundle_id"], ["bundles.id"], name=op.f("fk_assignments_bundle_id_bundles")),
        sa.ForeignKeyConstraint(
            ["item_id"], ["items.id"], name=op.f("fk_assignments_item_id_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_assignments_study_id_studies"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["worker_id"], ["users.id"], name=op.f("fk_assignments_worker_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignments")),
        sa.UniqueConstraint(
            "study_id", "worker_id", "exclusion_group", name=op.f("uq_assignments_study_id_worker_id_exclusion_group")
        ),
        sa.UniqueConstraint("worker_id", "item_id", name=op.f("uq_assignments_worker_id_item_id")),
    )
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_assignments_bundle_id"), ["bundle_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_assignments_item_id"), ["item_id"], unique=False)
        batch_op.create_index("ix_assignments_lease", ["state", "lease_expires_at"], unique=False)

    op.create_table(
        "annotations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.Column("response", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("client", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("idempotency_key", sa.String(length=64), nullable=False),
        sa.Column("excluded", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["assignment_id"], ["assignments.id"], name=op.f("fk_annotations_assignment_id_assignments")
        ),
        sa.ForeignKeyConstraint(
            ["item_id"], ["items.id"], name=op.f("fk_annotations_item_id_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_annotations_study_id_studies"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["worker_id"], ["users.id"], name=op.f("fk_annotations_worker_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_annotations")),
        sa.UniqueConstraint("assignment_id", name=op.f("uq_annotations_assignment_id")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_annotations_idempotency_key")),
    )
    with op.batch_alter_table("annotations", schema=None) as batch_op:
        batch_op.create_index("ix_annotations_study_item", ["study_id", "item_id"], unique=False)
        batch_op.create_index("ix_annotations_study_worker", ["study_id", "worker_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("annotations", schema=None) as batch_op:
        batch_op.drop_index("ix_annotations_study_worker")
        batch_op.drop_index("ix_annotations_study_item")

    op.drop_table("annotations")
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.drop_index("ix_assignments_lease")
        batch_op.drop_index(batch_op.f("ix_assignments_item_id"))
        batch_op.drop_index(batch_op.f("ix_assignments_bundle_id"))

    op.drop_table("assignments")
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bundles_study_id"))
        batch_op.drop_index(batch_op.f("ix_bundles_participant_id"))

    op.drop_table("bundles")
    with op.batch_alter_table("agent_outputs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agent_outputs_study_id"))
        batch_op.drop_index(batch_op.f("ix_agent_outputs_agent_id"))

    op.drop_table("agent_outputs")
    with op.batch_alter_table("participants", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_participants_worker_id"))
        batch_op.drop_index(batch_op.f("ix_participants_study_id"))

    op.drop_table("participants")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_study_id"))
        batch_op.drop_index(batch_op.f("ix_jobs_state"))

    op.drop_table("jobs")
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index("ix_items_pick")

    op.drop_table("items")
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_studies_owner_id"))
        batch_op.drop_index(batch_op.f("ix_studies_kind"))

    op.drop_table("studies")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_log_created_at"))
        batch_op.drop_index(batch_op.f("ix_audit_log_actor_id"))
        batch_op.drop_index(batch_op.f("ix_audit_log_action"))

    op.drop_table("audit_log")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_id"))

    op.drop_table("api_tokens")
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agents_owner_id"))

    op.drop_table("agents")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_users_role"))

    op.drop_table("users")
