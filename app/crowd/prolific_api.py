"""Prolific's API (https://docs.prolific.com/api-reference), the calls Proctor makes: who the
token belongs to, a study's cost, studies made and moved through their states, submissions
read and approved or rejected, bonuses set up and paid. Every call is reported to `on_call`
(the service writes it to the audit log). No retries here: the caller decides what a failed
call means (a bonus's pay call is not idempotent)."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import ssl
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from app.config import get_settings

# The reasons Prolific accepts for a rejection (the submission transition's rejection_category).
REJECTION_CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)
# A rejection's message to the participant must be at least this long (Prolific refuses less).
MIN_REJECTION_MESSAGE = 100
STUDY_ACTIONS = ("PUBLISH", "PAUSE", "START", "STOP")
# A submission in these states gave its place back on Prolific: the worker returned the study
# or ran out of time (the submission object's statuses).
GONE_STATUSES = ("RETURNED", "TIMED-OUT")
# A study's filters that keep a participant group's members out of it, or admit only them.
BLOCKLIST_FILTER = "participant_group_blocklist"
ALLOWLIST_FILTER = "participant_group_allowlist"
# The hook Prolific calls when a submission's status changes (its body: resource_id, the
# submission; participant_id; status), signed as HOOK_SIGNATURE says (the Verifying page).
SUBMISSION_HOOK = "submission.status.change"
HOOK_SIGNATURE = "X-Prolific-Request-Signature"
HOOK_TIMESTAMP = "X-Prolific-Request-Timestamp"


class ProlificError(Exception):
    """A call that did not succeed. `refused`: Prolific answered and said no (a 4xx: nothing
    was done); `sent` False: the request never left (no connection). Otherwise the outcome is
    unknown (no answer, or a 5xx)."""

    def __init__(self, message: str, status: int | None = None, sent: bool = True):
        super().__init__(message)
        self.status = status
        self.sent = sent

    @property
    def refused(self) -> bool:
        return self.status is not None and 400 <= self.status < 500


Recorder = Callable[[str, str, int | None], None]  # method, path, status (None: no answer)


@functools.lru_cache(maxsize=4)
def _tls(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The TLS context httpx makes for a client (certifi's CA bundle, or SSL_CERT_FILE /
    SSL_CERT_DIR's, the arguments here), made once: loading the bundle for every client was
    most of the CPU of a Prolific call from a page (~25 ms). A context is safe to share."""
    return httpx.create_ssl_context()


class ProlificClient:
    def __init__(
        self,
        token: str,
        base_url: str | None = None,
        on_call: Recorder | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        settings = get_settings()
        self.base_url = (base_url or settings.prolific_api_url).rstrip("/")
        self.on_call = on_call
        self._http = httpx.Client(
            base_url=self.base_url + "/",
            headers={"Authorization": f"Token {token}", "Accept": "application/json"},
            timeout=settings.prolific_timeout_s,
            verify=_tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ProlificClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One call; the answer's JSON (None for an empty body)."""
        return _json(self.request(method, path, body))

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        """One call; the answer, once it is known to be a success."""
        try:
            r = self._http.request(method, path.lstrip("/"), json=body)
        except httpx.HTTPError as exc:
            if self.on_call:
                self.on_call(method, path, None)
            sent = not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
            raise ProlificError(f"Prolific did not answer ({type(exc).__name__}: {exc})", sent=sent) from exc
        if self.on_call:
            self.on_call(method, path, r.status_code)
        if r.status_code >= 400:
            raise ProlificError(f"Prolific answered {r.status_code}: {_detail(r)}", r.status_code)
        return r

    # ---- the account --------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        return dict(self.call("GET", "users/me/"))

    # ---- studies --------------------------------------------------------------------------

    def cost(self, reward_cents: int, places: int) -> int:
        """What a study would cost, fees and tax included, in cents of the account's currency."""
        got = self.call("POST", "study-cost-calculator/", {"reward": reward_cents, "total_available_places": places})
        return round(float(got["total_cost"]))

    def create_study(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("POST", "studies/", body))

    def get_study(self, study_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"studies/{study_id}/"))

    def transition_study(self, study_id: str, action: str) -> dict[str, Any]:
        return dict(self.call("POST", f"studies/{study_id}/transition/", {"action": action}))

    # ---- submissions ----------------------------------------------------------------------

    def submissions(self, study_id: str) -> list[dict[str, Any]]:
        got = self.call("GET", f"studies/{study_id}/submissions/")
        return list(got["results"])

    def submission(self, submission_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"submissions/{submission_id}/"))

    def approve(self, study_id: str, submission_ids: Sequence[str]) -> None:
        self.call("POST", "submissions/bulk-approve/", {"study_id": study_id, "submission_ids": list(submission_ids)})

    def reject(self, submission_id: str, message: str, category: str) -> dict[str, Any]:
        body = {"action": "REJECT", "message": message, "rejection_category": category}
        return dict(self.call("POST", f"submissions/{submission_id}/transition/", body))

    # ---- participant groups (allow and block lists) -----------------------------------------

    def workspace(self) -> str:
        """The account's first workspace: a participant group is made in one."""
        got = self.call("GET", "workspaces/")
        results = list(got["results"])
        if not results:
            raise ProlificError("the account has no workspace to keep a participant group in", 400)
        return str(results[0]["id"])

    def create_group(self, workspace_id: str, name: str, description: str = "") -> dict[str, Any]:
        body = {"workspace_id": workspace_id, "name": name, "description": description}
        return dict(self.call("POST", "participant-groups/", body))

    def add_to_group(self, group_id: str, participant_ids: Sequence[str]) -> None:
        """Members already there are ignored (Prolific's documented behaviour)."""
        self.call("POST", f"participant-groups/{group_id}/participants/", {"participant_ids": list(participant_ids)})

    def group_members(self, group_id: str) -> list[str]:
        got = self.call("GET", f"participant-groups/{group_id}/participants/")
        return [str(m["participant_id"]) for m in got.get("results") or []]

    def remove_from_group(self, group_id: str, participant_ids: Sequence[str]) -> None:
        self.call("DELETE", f"participant-groups/{group_id}/participants/", {"participant_ids": list(participant_ids)})

    # ---- hooks ------------------------------------------------------------------------------

    def hook_secret(self, workspace_id: str) -> str:
        """A new secret for the workspace's hooks (it replaces the one before)."""
        return str(self.call("POST", "hooks/secrets/", {"workspace_id": workspace_id})["value"])

    def subscribe(self, workspace_id: str, event_type: str, target_url: str) -> str:
        """Subscribe target_url to the event and confirm it (with the X-Hook-Secret Prolific
        answers the subscription with); the subscription's id."""
        body = {"event_type": event_type, "target_url": target_url, "workspace_id": workspace_id}
        r = self.request("POST", "hooks/subscriptions/", body)
        got = _json(r)
        made = (got.get("results") or [got])[0] if isinstance(got, dict) else {}
        sub_id = str(made.get("id") or got.get("id"))
        self.call("POST", f"hooks/subscriptions/{sub_id}/", {"secret": r.headers.get("X-Hook-Secret", "")})
        return sub_id

    # ---- messages ---------------------------------------------------------------------------

    def send_message(self, study_id: str, participant_id: str, body: str) -> None:
        """A message to a participant, the study its reason (Prolific shows it in their inbox)."""
        self.call("POST", "messages/", {"recipient_id": participant_id, "body": body, "study_id": study_id})

    # ---- bonuses: set up, then pay (the pay call is NOT idempotent) ----------------------

    def create_bonus(self, study_id: str, rows: Sequence[tuple[str, int]]) -> dict[str, Any]:
        """Set up bonuses (participant id, cents) without paying them; the answer has their `id`."""
        csv = "\n".join(f"{who},{cents // 100}.{cents % 100:02d}" for who, cents in rows)
        return dict(self.call("POST", "submissions/bonus-payments/", {"study_id": study_id, "csv_bonuses": csv}))

    def pay_bonus(self, bonus_id: str) -> None:
        self.call("POST", f"bulk-bonus-payments/{bonus_id}/pay/")


def _json(r: httpx.Response) -> Any:
    if not r.content:
        return None
    try:
        return r.json()
    except ValueError:
        return r.text


def hook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """What Prolific signs a hook with: base64 of the HMAC-SHA256, under the workspace's hook
    secret, of the timestamp header followed by the body."""
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def _detail(r: httpx.Response) -> str:
    try:
        got = r.json()
    except ValueError:
        return r.text[:300]
    if isinstance(got, dict):
        err = got.get("error", got)
        if isinstance(err, dict):
            detail = err.get("detail", err)
            return str(detail)[:300]
    return str(got)[:300]
