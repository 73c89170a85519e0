"""What every crowd platform answers: who a link's parameters name, and how a worker is sent
back with their code. One module per platform implements this; the core asks the registry
(app/crowd/__init__.py), never names a platform. What a platform can do besides through its
API (Prolific: studies, reviews, bonuses) is its own service (app/crowd/service.py)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.config import get_settings


@dataclass(frozen=True)
class Entry:
    """Who entered, as the platform's link says: the worker's id on that platform, the id of
    this piece of work (MTurk's assignment, Prolific's session: what its submission is), and
    the id of the posting it belongs to (MTurk's HIT, Prolific's study)."""

    platform: str
    worker_id: str
    assignment_id: str = ""
    hit_id: str = ""


class CrowdPlatform:
    """Entry and completion: the part every platform has. A subclass sets the names and
    overrides what differs; the defaults are a platform that shows the study's code and links
    nowhere (a lab's own participants)."""

    name: str = ""  # stored as User.platform (16 characters at most): never change it
    label: str = ""  # how a worker calls it: "Return the task on {label}"
    # The link's parameter that names the worker, and the others it may carry, in the order
    # the entry link's help shows them.
    worker_param: str = ""
    other_params: tuple[str, ...] = ()
    # Sites that may frame the crowd's pages or receive their completion form (the CSP).
    framers: tuple[str, ...] = ()
    # (parameter, value) pairs that mark a link as a preview of the task (the API's schema
    # says so too: app/studies/crowd_api.py).
    preview: tuple[tuple[str, str], ...] = ()

    def identify(self, params: Mapping[str, str]) -> Entry | None:
        """The entry this link's parameters name, or None when they are not this platform's."""
        worker = params.get(self.worker_param)
        if not worker:
            return None
        assignment, hit = ([params.get(p, "") for p in self.other_params] + ["", ""])[:2]
        return Entry(self.name, worker, assignment, hit)

    def is_preview(self, params: Mapping[str, str]) -> bool:
        """Whether the link is a preview of the task (nothing entered, nothing stored)."""
        return any(params.get(name) == value for name, value in self.preview)

    def entry_link(self, base: str, slug: str) -> str:
        """The link a researcher gives the platform, with its placeholders."""
        return f"{base}/s/{slug}?{self.worker_param}=..."

    def remember(self, params: Mapping[str, str]) -> dict[str, str]:
        """What the worker's signed session keeps from the entry link for the end of the task."""
        return {}

    def completion_code(self, study_code: str, bundle_id: int) -> str:
        """The code a worker is shown and reports; the study's own by default."""
        return study_code

    def way_back(self, redirect_url: str, code: str | None, remembered: Mapping[str, Any]) -> dict[str, str]:
        """How the done page sends the worker back once the code is earned (`code` is None
        until then): a `redirect` link and/or an `mturk_submit` form target."""
        return {"redirect": "", "mturk_submit": ""}


def bundle_code(bundle_id: int) -> str:
    """A code of the bundle's own (an HMAC of its id): one per piece of work, where a code
    shared by the study's workers proves nothing."""
    key = get_settings().secret_key.encode()
    return hmac.new(key, f"proctor/bundle-code/{bundle_id}".encode(), hashlib.sha256).hexdigest()[:10].upper()
