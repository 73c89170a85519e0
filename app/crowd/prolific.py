"""Prolific: the study's URL on Prolific carries PROLIFIC_PID, STUDY_ID and SESSION_ID (the
submission's id); the done page links back to Prolific's completion URL with the code as `cc`.
What Proctor does on Prolific through its API (publishing, approving, bonuses) is in
app/crowd/prolific_api.py (the client) and app/crowd/service.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from app.crowd.base import CrowdPlatform

COMPLETE_URL = "https://app.prolific.com/submissions/complete"


def link_code(redirect_url: str) -> str | None:
    """The completion code a Prolific return link carries (its `cc`), if any."""
    values = parse_qs(urlsplit(redirect_url).query).get("cc") if redirect_url else None
    return values[0] if values else None


def with_code(redirect_url: str, code: str) -> str:
    """The return link with `cc` set to the study's code (added when the link has none)."""
    parts = urlsplit(redirect_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "cc"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("cc", code)])))


class Prolific(CrowdPlatform):
    name = "prolific"
    label = "Prolific"
    worker_param = "PROLIFIC_PID"
    other_params = ("SESSION_ID", "STUDY_ID")

    def entry_link(self, base: str, slug: str) -> str:
        # Prolific fills {{%NAME%}} in the study URL it sends a participant to.
        return f"{base}/s/{slug}?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}&SESSION_ID={{{{%SESSION_ID%}}}}"

    def way_back(self, redirect_url: str, code: str | None, remembered: Mapping[str, Any]) -> dict[str, str]:
        # The link carries the code the page shows, whatever `cc` the researcher's link had.
        return {"redirect": with_code(redirect_url, code) if redirect_url and code else "", "mturk_submit": ""}
