"""Engine, sessions and the declarative Base shared by every domain's models."""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import JSON, DateTime, MetaData, create_engine, event, inspect
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.types import TypeDecorator

from app.config import get_settings

T = TypeVar("T")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


# JSONB on PostgreSQL: comparable and indexable, so responses can be grouped in SQL.
JSONType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict: JSONType, list: JSONType, datetime: UTCDateTime}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class StampedRow:
    """A mixin for a table (a Base subclass) whose rows have an integer id, its first column,
    and the time each was made, its last (sort_order: the table's own columns stand between)."""

    id: Mapped[int] = mapped_column(primary_key=True, sort_order=-1)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, sort_order=1)


@lru_cache
def get_engine(url: str | None = None) -> Engine:
    url = url or get_settings().database_url
    size, timeout = get_settings().db_pool_size, get_settings().db_pool_timeout
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=size,
            max_overflow=0,
            pool_timeout=timeout,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout=30000")
            # Turning a new file to WAL takes it whole, and SQLite answers "locked" at once,
            # without waiting, when another process (a test's live server) opens it meanwhile.
            for attempt in range(100):
                try:
                    cur.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 99:
                        raise
                    time.sleep(0.05)
            cur.execute(f"PRAGMA synchronous={get_settings().sqlite_synchronous.upper()}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(
        url,
        pool_size=size,
        max_overflow=0,
        pool_timeout=timeout,
        pool_pre_ping=True,
        connect_args=pg_connect_args(url),
    )


def pg_connect_args(url: str) -> dict[str, int]:
    """libpq's limits on a PostgreSQL connection (DB_CONNECT_TIMEOUT_S and the TCP ones, see
    app/config.py), unless the URL's query sets them: a server that takes the connection and
    never answers fails the connect in seconds, not psycopg's 130, and one whose host left the
    network mid-statement ends the connection within DB_TCP_USER_TIMEOUT_S. None bounds a
    statement on a live server: a long leaderboard query runs on."""
    from sqlalchemy.engine import make_url

    settings = get_settings()
    idle = max(1, settings.db_keepalive_idle_s)
    args = {
        "connect_timeout": settings.db_connect_timeout_s,
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": max(1, idle // 2),
        "keepalives_count": 3,
        "tcp_user_timeout": settings.db_tcp_user_timeout_s * 1000,
    }
    given = make_url(url).query
    return {k: v for k, v in args.items() if k not in given}


# A row's text holds no U+0000 on either backend (issue 26, round 17): PostgreSQL refuses it
# where SQLite stored it, and a form's text (an agent's name, a token's; a navigation study's
# Likert questions, kept in its settings' JSON) reaches a row without the JSON body check.
# Refused before the flush as PostgreSQL refuses it, so that every route answers alike on both
# (app/error_pages.py: a 422). A changed row's changed values only: one stored before stays
# editable. JSON as it will be written (json.dumps, in C: 40 ms for the largest answer, a
# navigation trace of 20,000 poses).
@event.listens_for(Session, "before_flush")
def _no_nul_in_text(session: Session, _context: Any, _instances: Any) -> None:
    from app.jsonsafe import unstorable_escape_line

    for row in (*session.new, *session.dirty):
        state = inspect(row)
        changed = state.dict if state.pending else state.committed_state
        for column in state.mapper.column_attrs:
            value = state.dict.get(column.key) if column.key in changed else None
            if (isinstance(value, str) and "\x00" in value) or (
                isinstance(value, (dict, list)) and unstorable_escape_line(json.dumps(value)) is not None
            ):
                nul = ValueError(f"{column.key}: text fields cannot contain NUL (0x00) bytes (or lone surrogates)")
                raise DataError(None, None, nul)


@lru_cache
def get_sessionmaker(url: str | None = None) -> sessionmaker[Session]:
    # Every table must be known before the first query: the process's entry point (create_app,
    # the CLI, the Celery app, Alembic) loads them with app.models.load_models().
    return sessionmaker(get_engine(url), expire_on_commit=False)


def is_sqlite(session: Session) -> bool:
    return session.get_bind().dialect.name == "sqlite"


# SQLite has no row locks: the embedded default serialises writes that must not race
# (assignment, submit) inside its single process with this lock.
SQLITE_WRITE_LOCK = threading.RLock()


@contextmanager
def serialised_writes(session: Session) -> Iterator[None]:
    """Hold the SQLite write lock (a no-op on PostgreSQL, which has row locks)."""
    if is_sqlite(session):
        with SQLITE_WRITE_LOCK:
            yield
    else:
        yield


def a_race(exc: BaseException) -> bool:
    """A unique key taken or a lock conflict (a deadlock among them): the step, run again,
    sees the winner's row."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    return isinstance(exc, (IntegrityError, OperationalError))


# A PostgreSQL that takes connections and refuses every write (SQLSTATE 25006): a hot standby a
# failover pointed the app at for a while, or a database set `default_transaction_read_only`.
# An outage like a stopped server (issue 26, round 14: it answered 500, and a job's end was not
# written).
READ_ONLY_SQLSTATE = "25006"


def read_only(exc: BaseException) -> bool:
    """The database refused a write for being read-only (psycopg's error, or SQLAlchemy's)."""
    orig = getattr(exc, "orig", None) or exc
    return getattr(orig, "sqlstate", None) == READ_ONLY_SQLSTATE


def unavailable(exc: BaseException) -> bool:
    """The database cannot take the statement now: gone (OperationalError), no free pooled
    connection (a pool timeout), or read-only."""
    from sqlalchemy.exc import OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    return isinstance(exc, (OperationalError, PoolTimeout)) or read_only(exc)


def lost_a_race(exc: BaseException) -> bool:
    """PostgreSQL aborted the transaction for a deadlock or a serialisation failure (nothing of
    it stored): run again, it can succeed."""
    return getattr(getattr(exc, "orig", None), "sqlstate", None) in ("40P01", "40001")


def retrying(
    fn: Callable[[], T],
    session: Session,
    attempts: int = 5,
    retry_if: Callable[[BaseException], bool] = a_race,
    pause: float = 0.005,
) -> T:
    """fn() then commit, the whole of it run again (after a short random pause) when it fails
    with an error `retry_if` accepts, `attempts` times in all. Any failure is rolled back while
    the SQLite lock is still held."""
    for attempt in range(attempts):
        with serialised_writes(session):
            try:
                result = fn()
                session.commit()
                return result
            except BaseException as exc:
                session.rollback()
                if attempt == attempts - 1 or not retry_if(exc):
                    raise
        time.sleep(pause * (attempt + 1) * random.random())
    raise ValueError(f"attempts must be at least 1, not {attempts}")


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    session = get_sessionmaker(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
