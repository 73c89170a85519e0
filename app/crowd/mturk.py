"""Amazon Mechanical Turk: an ExternalQuestion HIT opens the entry link in a frame on MTurk's
site with workerId, assignmentId and hitId; the done page posts the assignment back to
MTurk's externalSubmit. Entry and completion only (MTurk has been reported closed to new
requesters since July 2026)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.crowd.base import CrowdPlatform, bundle_code

# The assignmentId MTurk sends while a worker only previews the HIT.
PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Where an ExternalQuestion HIT posts its completion; only these two are MTurk's own.
SUBMIT_HOSTS = ("https://www.mturk.com", "https://workersandbox.mturk.com")


class MTurk(CrowdPlatform):
    name = "mturk"
    label = "MTurk"
    worker_param = "workerId"
    other_params = ("assignmentId", "hitId")
    # ExternalQuestion shows the pages in a frame on the worker's site; externalSubmit may
    # redirect on within MTurk, and form-action follows redirects: every MTurk host is named.
    framers = ("https://worker.mturk.com", "https://workersandbox.mturk.com", "https://www.mturk.com")
    preview = (("assignmentId", PREVIEW),)

    def entry_link(self, base: str, slug: str) -> str:
        return f"{base}/s/{slug}?workerId=...&assignmentId=...&hitId=..."

    def remember(self, params: Mapping[str, str]) -> dict[str, str]:
        submit_to = params.get("turkSubmitTo", "")
        return {"turk_submit_to": submit_to} if submit_to in SUBMIT_HOSTS else {}

    def completion_code(self, study_code: str, bundle_id: int) -> str:
        # One per bundle: a shared code proves nothing here, and the requester matches it to
        # the assignment.
        return bundle_code(bundle_id)

    def way_back(self, redirect_url: str, code: str | None, remembered: Mapping[str, Any]) -> dict[str, str]:
        submit_to = remembered.get("turk_submit_to", "")
        return {"redirect": "", "mturk_submit": f"{submit_to}/mturk/externalSubmit" if submit_to and code else ""}
