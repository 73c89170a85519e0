"""Crowd platforms (issue 31): a researcher's sealed API token per platform, a study's study on
a platform, and bonuses recorded from intent to payment (paid at most once).

Revision ID: 0019
Revises: 0018
"""

from alembic import op
import sqlalchemy as sa


revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _when() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "crowd_accounts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("token_sealed", sa.Text(), nullable=False),
        sa.Column("account_name", sa.String(255), nullable=False),
        _when(),
        sa.UniqueConstraint("user_id", "platform"),
    )
    op.create_index("ix_crowd_accounts_user_id", "crowd_accounts", ["user_id"])
    op.create_table(
        "platform_studies",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reward_cents", sa.Integer(), nullable=False),
        sa.Column("places", sa.Integer(), nullable=False),
        sa.Column("total_cost_cents", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        _when(),
        sa.UniqueConstraint("study_id", "platform"),
    )
    op.create_index("ix_platform_studies_study_id", "platform_studies", ["study_id"])
    op.create_table(
        "bonus_payments",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("studies.id", ondelete="CASCADE"), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("worker_id", sa.String(255), nullable=False),
        sa.Column("submission_id", sa.String(255), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=True),
        sa.Column("paid_before", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        _when(),
        sa.Column("paid_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("study_id", "platform", "key"),
    )
    op.create_index("ix_bonus_payments_study_id", "bonus_payments", ["study_id"])


def downgrade() -> None:
    op.drop_table("bonus_payments")
    op.drop_table("platform_studies")
    op.drop_table("crowd_accounts")
