"""Buildings that navigation studies run in: a connectivity graph (and, for generated houses,
a semantics sidecar; for any building, optional panoramas) in the blob store, one row per scan."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

ENVIRONMENT_SOURCES = ("generated", "matterport")


class Environment(Base):
    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(primary_key=True)
    scan: Mapped[str] = mapped_column(String(64), unique=True)
    # "generated" (app.kinds.navigation.house) or "matterport" (a released connectivity file).
    source: Mapped[str] = mapped_column(String(16))
    connectivity_key: Mapped[str] = mapped_column(String(255))
    semantics_key: Mapped[str | None] = mapped_column(String(255))
    n_viewpoints: Mapped[int] = mapped_column()
    # Viewpoint id -> blob key of its equirectangular panorama (app.kinds.navigation.panoramas).
    panoramas: Mapped[dict] = mapped_column(default=dict, server_default=text("'{}'"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
