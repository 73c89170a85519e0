"""SQLite waits for the disk at each commit unless told otherwise (SQLITE_SYNCHRONOUS,
app/config.py): an acknowledged answer survives a power cut by default; the demo and the tests
choose "normal" for rows made to be thrown away."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.config import get_settings
from app.db import get_engine

LEVELS = {"full": 2, "normal": 1}  # what PRAGMA synchronous answers


@pytest.mark.parametrize("setting", [None, "full", "normal"])
def test_each_connection_takes_the_setting(monkeypatch, tmp_path, setting):
    if setting is None:
        monkeypatch.delenv("SQLITE_SYNCHRONOUS", raising=False)  # the tests set "normal"
    else:
        monkeypatch.setenv("SQLITE_SYNCHRONOUS", setting)
    get_settings.cache_clear()
    try:
        engine = get_engine(f"sqlite:///{tmp_path / 'p.db'}")
        with engine.connect() as c:
            assert c.execute(text("PRAGMA synchronous")).scalar() == LEVELS[setting or "full"]
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        engine.dispose()
    finally:
        get_settings.cache_clear()


def test_another_value_is_refused(monkeypatch):
    from pydantic import ValidationError

    monkeypatch.setenv("SQLITE_SYNCHRONOUS", "off")
    get_settings.cache_clear()
    try:
        with pytest.raises(ValidationError, match="sqlite_synchronous"):
            get_settings()
    finally:
        get_settings.cache_clear()
