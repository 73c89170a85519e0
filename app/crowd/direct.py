"""A lab's own participants: the researcher hands each one a link with an id of the lab's
choosing (`participant`); the done page shows the study's completion code and links nowhere."""

from __future__ import annotations

from app.crowd.base import CrowdPlatform


class Direct(CrowdPlatform):
    name = "direct"
    label = ""  # the done page says "your platform"
    worker_param = "participant"

    def entry_link(self, base: str, slug: str) -> str:
        return f"{base}/s/{slug}?participant=..."
