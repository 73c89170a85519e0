"""Alembic environment: the URL comes from DATABASE_URL (or the caller's config)."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from app.config import get_settings
from app.models import load_models

config = context.config


def render_item(type_, obj, autogen_context):
    """Our UTC wrapper is stored as a plain timezone-aware DateTime."""
    if type_ == "type" and obj.__class__.__name__ == "UTCDateTime":
        return "sa.DateTime(timezone=True)"
    return False


target_metadata = load_models().metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or get_settings().database_url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or get_settings().database_url
    connectable = engine_from_config({"sqlalchemy.url": url}, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with connectable.connect() as connection:
        # Batch mode lets later migrations alter tables on SQLite too.
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True, render_item=render_item
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
