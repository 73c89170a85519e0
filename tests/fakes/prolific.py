"""A local fake of Prolific's API (https://docs.prolific.com/api-reference), written from its
documentation, served on loopback for the contract tests: Proctor's tests never call the real
service. It keeps what the real one would (studies, submissions, bonuses and what was paid),
checks what the documentation says is checked (the token, a study's required fields, the
states a study and a submission move through, a rejection's category and message, bonuses
only for the study's participants), and pays a bulk bonus AGAIN on every pay call, as the
documentation warns the real one does.

Hooks: a secret made (hooks/secrets/), a subscription made and confirmed with the X-Hook-Secret
its answer carried, the fake calls the subscription's target_url whenever a submission's
status changes, signed as the documentation's Verifying page says, through `deliver` (the
test's client: the fake never opens a socket to Proctor); every hook sent is kept in `sent`.

For the tests: `join` and `complete` play a participant; `fail(op, when)` makes the next call
of an operation fail: refused ("refuse": a 400, nothing done), before doing anything
("before": a 503) or after doing it with the answer lost ("after": a 502, as a dropped
connection would leave it); `pay_later` holds
payments back until `settle()` (the real API pays "in the following minutes")."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

REJECTION_CATEGORIES = {
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK", "LOW_EFFORT",
    "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
}  # fmt: skip
# Where a study may go from each state, by action (the study object's statuses).
STUDY_MOVES = {
    ("UNPUBLISHED", "PUBLISH"): "ACTIVE",
    ("ACTIVE", "PAUSE"): "PAUSED",
    ("PAUSED", "START"): "ACTIVE",
    ("ACTIVE", "STOP"): "AWAITING REVIEW",
    ("PAUSED", "STOP"): "AWAITING REVIEW",
}
STUDY_FIELDS = (
    "name", "description", "external_study_url", "completion_codes", "estimated_completion_time", "reward",
    "total_available_places",
)  # fmt: skip
FEE_RATE = Decimal("0.3333")  # the fake's service fee on rewards and bonuses (no VAT)


def _id() -> str:
    return secrets.token_hex(12)  # 24 hex characters, as Prolific's ids are


def _err(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "detail": detail}}, status_code=status)


@dataclass
class FakeProlific:
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # participant groups
    messages: list[dict[str, Any]] = field(default_factory=list)  # sent to participants
    hook_secrets: dict[str, str] = field(default_factory=dict)  # workspace -> its one secret
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)
    deliver: Any = None  # (url, headers, body bytes) -> None: how a hook reaches its target
    sent: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    workspace_id: str = field(default_factory=_id)
    calls: list[tuple[str, str]] = field(default_factory=list)
    faults: dict[str, str] = field(default_factory=dict)
    pay_later: bool = False
    pending: list[tuple[str, int]] = field(default_factory=list)  # (submission, cents) to pay on settle()
    url: str = ""

    # ---- what the tests do ----------------------------------------------------------------

    def add_token(self, token: str, email: str = "researcher@example.org") -> None:
        self.tokens[token] = {"id": _id(), "email": email, "name": "A. Researcher", "user_type": "researcher"}

    def join(self, study_id: str, participant: str) -> str:
        """A participant starts the study: a submission (its id is the SESSION_ID Prolific
        puts in the study URL)."""
        study = self.studies[study_id]
        assert study["status"] == "ACTIVE", f"participants join active studies, not {study['status']} ones"
        assert self.eligible(study_id, participant), f"{participant} is blocked from {study_id}"
        sid = _id()
        self.submissions[sid] = {
            "id": sid,
            "study_id": study_id,
            "participant": participant,
            "status": "ACTIVE",
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "completed_at": None,
            "entered_code": None,
            "bonus_payments": [],
        }
        return sid

    def eligible(self, study_id: str, participant: str) -> bool:
        """Whether the study's filters let the participant in (a blocklist group's members are
        kept out: the group as it is now, as Prolific updates published studies)."""
        for f in self.studies[study_id].get("filters") or []:
            within = any(participant in self.groups[g]["participants"] for g in f["selected_values"])
            if f.get("filter_id") == "participant_group_blocklist" and within:
                return False
            if f.get("filter_id") == "participant_group_allowlist" and not within:
                return False
        return True

    def give_back(self, submission_id: str, status: str = "RETURNED") -> None:
        """The participant returns the study (RETURNED) or runs out of time (TIMED-OUT); the
        subscribed hooks are called."""
        assert status in ("RETURNED", "TIMED-OUT")
        sub = self.submissions[submission_id]
        sub["status"] = status
        event = {
            "resource_id": submission_id,
            "event_type": "submission.status.change",
            "participant_id": sub["participant"],
            "status": status,
        }
        for hook in self.subscriptions.values():
            if hook["event_type"] == event["event_type"] and hook["is_enabled"] and hook["confirmed"]:
                self.send_hook(hook, event)

    def send_hook(self, hook: dict[str, Any], event: dict[str, Any], at: float | None = None) -> None:
        """Sign and deliver `event` as sent at `at` (a UNIX time; now when left out: a delivery
        captured earlier and replayed, or held up on its way, has an older one)."""
        body = json.dumps(event).encode()
        timestamp = str(int(time.time() if at is None else at))
        secret = self.hook_secrets[hook["workspace_id"]]
        signature = base64.b64encode(hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest())
        headers = {
            "Content-Type": "application/json",
            "X-Prolific-Request-Signature": signature.decode(),
            "X-Prolific-Request-Timestamp": timestamp,
            "X-Event-ID": _id(),
        }
        self.sent.append((hook["target_url"], headers, body))
        if self.deliver is not None:
            self.deliver(hook["target_url"], headers, body)

    def complete(self, submission_id: str, code: str) -> None:
        self.submissions[submission_id].update(status="AWAITING REVIEW", entered_code=code)

    def fail(self, op: str, when: str = "before") -> None:
        self.faults[op] = when

    def settle(self) -> None:
        for sid, cents in self.pending:
            self.submissions[sid]["bonus_payments"].append(cents)
        self.pending.clear()

    def paid(self, participant: str) -> list[int]:
        """Every bonus paid to the participant, in cents (the fake's ledger)."""
        return [c for s in self.submissions.values() if s["participant"] == participant for c in s["bonus_payments"]]

    def pay_calls(self) -> int:
        return sum(1 for m, p in self.calls if m == "POST" and p.endswith("/pay/"))

    # ---- the API --------------------------------------------------------------------------

    def app(self) -> Starlette:
        def route(path: str, op: str, handler: Any, method: str) -> Route:
            async def endpoint(request: Request) -> Response:
                self.calls.append((request.method, request.url.path))
                auth = request.headers.get("authorization", "")
                if not auth.startswith("Token ") or auth[6:] not in self.tokens:
                    return _err(401, "Invalid token.")
                when = self.faults.pop(op, None)
                if when == "before":
                    return _err(503, "Service unavailable (the fake's fault, before doing anything)")
                if when == "refuse":
                    return _err(400, "Refused (the fake's fault, e.g. a balance too low)")
                body = await request.json() if method in ("POST", "DELETE") and await request.body() else {}
                answer: Response = handler(request, body)
                if when == "after" and answer.status_code < 400:
                    return _err(502, "Bad gateway (the fake did it, then lost the answer)")
                return answer

            return Route(f"/api/v1/{path}", endpoint, methods=[method])

        return Starlette(
            routes=[
                route("users/me/", "me", self._me, "GET"),
                route("study-cost-calculator/", "cost", self._cost, "POST"),
                route("studies/", "create_study", self._create_study, "POST"),
                route("studies/{id}/", "get_study", self._get_study, "GET"),
                route("studies/{id}/transition/", "transition_study", self._transition_study, "POST"),
                route("studies/{id}/submissions/", "submissions", self._submissions, "GET"),
                route("submissions/bulk-approve/", "bulk_approve", self._bulk_approve, "POST"),
                route("submissions/bonus-payments/", "create_bonus", self._create_bonus, "POST"),
                route("submissions/{id}/", "submission", self._submission, "GET"),
                route("submissions/{id}/transition/", "transition_submission", self._transition_submission, "POST"),
                route("bulk-bonus-payments/{id}/pay/", "pay", self._pay, "POST"),
                route("workspaces/", "workspaces", self._workspaces, "GET"),
                route("messages/", "message", self._message, "POST"),
                route("participant-groups/", "create_group", self._create_group, "POST"),
                route("participant-groups/{id}/participants/", "add_to_group", self._add_to_group, "POST"),
                route("participant-groups/{id}/participants/", "group_members", self._group_members, "GET"),
                route("participant-groups/{id}/participants/", "remove_from_group", self._remove_from_group, "DELETE"),
                route("hooks/secrets/", "hook_secret", self._hook_secret, "POST"),
                route("hooks/subscriptions/", "subscribe", self._subscribe, "POST"),
                route("hooks/subscriptions/{id}/", "confirm", self._confirm, "POST"),
            ]
        )

    def _me(self, request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse(self.tokens[request.headers["authorization"][6:]])

    def _cost(self, request: Request, body: dict[str, Any]) -> Response:
        try:
            rewards = Decimal(body["reward"]) * Decimal(body["total_available_places"])
        except (KeyError, TypeError, InvalidOperation):
            return _err(400, "reward and total_available_places are required numbers")
        return JSONResponse({"total_cost": float((rewards * (1 + FEE_RATE)).quantize(Decimal("1")))})

    def _create_study(self, request: Request, body: dict[str, Any]) -> Response:
        missing = [f for f in STUDY_FIELDS if f not in body]
        if missing:
            return _err(400, f"missing fields: {', '.join(missing)}")
        if not body["completion_codes"] or not all(c.get("code") for c in body["completion_codes"]):
            return _err(400, "completion_codes needs at least one code")
        if "{{%PROLIFIC_PID%}}" not in body["external_study_url"]:
            return _err(400, "the study URL must carry {{%PROLIFIC_PID%}} (url_parameters)")
        for f in body.get("filters") or []:
            if f.get("filter_id") in ("participant_group_blocklist", "participant_group_allowlist") and not all(
                g in self.groups for g in f.get("selected_values") or [None]
            ):
                return _err(400, f"{f['filter_id']} names no participant group of yours")
        sid = _id()
        self.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
        return JSONResponse(self.studies[sid], status_code=201)

    def _get_study(self, request: Request, body: dict[str, Any]) -> Response:
        study = self.studies.get(request.path_params["id"])
        return JSONResponse(study) if study else _err(404, "Not found.")

    def _transition_study(self, request: Request, body: dict[str, Any]) -> Response:
        study = self.studies.get(request.path_params["id"])
        if study is None:
            return _err(404, "Not found.")
        to = STUDY_MOVES.get((study["status"], body.get("action", "")))
        if to is None:
            return _err(400, f"cannot {body.get('action')} a study that is {study['status']}")
        study["status"] = to
        return JSONResponse(study)

    def _submissions(self, request: Request, body: dict[str, Any]) -> Response:
        sid = request.path_params["id"]
        return JSONResponse({"results": [s for s in self.submissions.values() if s["study_id"] == sid]})

    def _submission(self, request: Request, body: dict[str, Any]) -> Response:
        sub = self.submissions.get(request.path_params["id"])
        return JSONResponse(sub) if sub else _err(404, "Not found.")

    def _decide(self, sub: dict[str, Any], action: str) -> str | None:
        if sub["status"] != "AWAITING REVIEW":
            return f"submission {sub['id']} is {sub['status']}, not awaiting review"
        sub["status"] = "APPROVED" if action == "APPROVE" else "REJECTED"
        return None

    def _transition_submission(self, request: Request, body: dict[str, Any]) -> Response:
        sub = self.submissions.get(request.path_params["id"])
        if sub is None:
            return _err(404, "Not found.")
        action = body.get("action")
        if action not in ("APPROVE", "REJECT"):
            return _err(400, "action is APPROVE or REJECT")
        if action == "REJECT":
            if body.get("rejection_category") not in REJECTION_CATEGORIES:
                return _err(400, "rejection_category is required")
            if len(str(body.get("message", ""))) < 100:
                return _err(400, "the rejection message must be at least 100 characters")
        refused = self._decide(sub, action)
        return _err(400, refused) if refused else JSONResponse(sub)

    def _bulk_approve(self, request: Request, body: dict[str, Any]) -> Response:
        study = body.get("study_id")
        ids = body.get("submission_ids") or []
        subs = [self.submissions.get(i) for i in ids]
        if study not in self.studies or not ids or any(s is None or s["study_id"] != study for s in subs):
            return _err(400, "study_id and submission_ids of that study are required")
        for s in subs:
            assert s is not None
            if (refused := self._decide(s, "APPROVE")) is not None:
                return _err(400, refused)
        return JSONResponse("The request to bulk approve has been made successfully.")

    def _create_bonus(self, request: Request, body: dict[str, Any]) -> Response:
        study = body.get("study_id")
        if study not in self.studies:
            return _err(400, "unknown study_id")
        rows: list[tuple[str, int]] = []
        for line in str(body.get("csv_bonuses", "")).strip().splitlines():
            who, _, amount = line.partition(",")
            try:
                cents = int((Decimal(amount) * 100).to_integral_exact())
            except InvalidOperation:
                return _err(400, f"bad amount on the line {line!r}")
            took_part = [
                s["id"]
                for s in self.submissions.values()
                if s["study_id"] == study and who in (s["participant"], s["id"])
            ]
            if not took_part:
                return _err(400, f"{who} did not take part in the study")
            rows.append((took_part[0], cents))
        if not rows:
            return _err(400, "csv_bonuses is empty")
        bid = _id()
        amount = sum(c for _, c in rows)
        fees = float((amount * FEE_RATE).quantize(Decimal("0.01")))
        self.bonuses[bid] = {"id": bid, "study": study, "rows": rows}
        return JSONResponse(
            {"id": bid, "study": study, "amount": amount, "fees": fees, "vat": 0, "total_amount": amount + fees},
            status_code=201,
        )

    def _pay(self, request: Request, body: dict[str, Any]) -> Response:
        bonus = self.bonuses.get(request.path_params["id"])
        if bonus is None:
            return _err(404, "Not found.")
        for sid, cents in bonus["rows"]:  # again on every call: the real endpoint is not idempotent
            if self.pay_later:
                self.pending.append((sid, cents))
            else:
                self.submissions[sid]["bonus_payments"].append(cents)
        return JSONResponse(f"Bulk bonus payment with ID {bonus['id']} is being processed asynchronously.", 202)

    def _message(self, request: Request, body: dict[str, Any]) -> Response:
        missing = [f for f in ("recipient_id", "body", "study_id") if not body.get(f)]
        if missing:
            return _err(400, f"missing fields: {', '.join(missing)}")
        if not any(
            s["study_id"] == body["study_id"] and s["participant"] == body["recipient_id"]
            for s in self.submissions.values()
        ):
            return _err(400, "the recipient did not take part in the study")
        self.messages.append({k: body[k] for k in ("recipient_id", "body", "study_id")})
        return Response(status_code=204)

    def _workspaces(self, request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse({"results": [{"id": self.workspace_id, "title": "My workspace"}]})

    def _create_group(self, request: Request, body: dict[str, Any]) -> Response:
        if not body.get("name"):
            return _err(400, "name is required")
        if body.get("workspace_id") != self.workspace_id and not body.get("organisation_id"):
            return _err(400, "Either a workspace or organisation ID must be specified.")
        gid = _id()
        self.groups[gid] = {
            "id": gid,
            "name": body["name"],
            "description": body.get("description", ""),
            "workspace_id": body.get("workspace_id"),
            "participants": list(dict.fromkeys(body.get("participant_ids") or [])),
            "is_deleted": False,
        }
        return JSONResponse(self._group_out(gid), status_code=201)

    def _group_out(self, gid: str) -> dict[str, Any]:
        g = self.groups[gid]
        return {**{k: v for k, v in g.items() if k != "participants"}, "participant_count": len(g["participants"])}

    def _add_to_group(self, request: Request, body: dict[str, Any]) -> Response:
        group = self.groups.get(request.path_params["id"])
        if group is None:
            return _err(404, "Not found.")
        added = []
        for pid in body.get("participant_ids") or []:
            if pid not in group["participants"]:  # members already there are ignored
                group["participants"].append(pid)
            added.append({"participant_id": pid, "datetime_created": time.strftime("%Y-%m-%dT%H:%M:%SZ")})
        return JSONResponse({"results": added})

    def _group_members(self, request: Request, body: dict[str, Any]) -> Response:
        group = self.groups.get(request.path_params["id"])
        if group is None:
            return _err(404, "Not found.")
        return JSONResponse({"results": [{"participant_id": p} for p in group["participants"]]})

    def _remove_from_group(self, request: Request, body: dict[str, Any]) -> Response:
        group = self.groups.get(request.path_params["id"])
        if group is None:
            return _err(404, "Not found.")
        gone = set(body.get("participant_ids") or [])
        group["participants"] = [p for p in group["participants"] if p not in gone]
        return Response(status_code=204)

    def _hook_secret(self, request: Request, body: dict[str, Any]) -> Response:
        if body.get("workspace_id") != self.workspace_id:
            return _err(400, "workspace_id names no workspace of yours")
        self.hook_secrets[self.workspace_id] = secrets.token_urlsafe(32)  # replaces the one before
        return JSONResponse(
            {"id": _id(), "value": self.hook_secrets[self.workspace_id], "workspace_id": self.workspace_id}, 201
        )

    def _subscribe(self, request: Request, body: dict[str, Any]) -> Response:
        missing = [f for f in ("event_type", "target_url", "workspace_id") if not body.get(f)]
        if missing:
            return _err(400, f"missing fields: {', '.join(missing)}")
        if body["workspace_id"] not in self.hook_secrets:
            return _err(400, "create a secret for the workspace before subscribing")
        sid, confirm = _id(), secrets.token_hex(16)
        self.subscriptions[sid] = {
            "id": sid,
            "event_type": body["event_type"],
            "target_url": body["target_url"],
            "workspace_id": body["workspace_id"],
            "is_enabled": body.get("is_enabled", True),
            "confirmed": False,
            "confirm": confirm,
        }
        out = {k: v for k, v in self.subscriptions[sid].items() if k not in ("confirmed", "confirm")}
        return JSONResponse({"results": [out]}, 201, headers={"X-Hook-Secret": confirm})

    def _confirm(self, request: Request, body: dict[str, Any]) -> Response:
        hook = self.subscriptions.get(request.path_params["id"])
        if hook is None:
            return _err(404, "Not found.")
        if body.get("secret") != hook["confirm"]:
            return _err(400, "secret is not the X-Hook-Secret of the subscription")
        hook["confirmed"] = True
        return JSONResponse({k: v for k, v in hook.items() if k not in ("confirmed", "confirm")})


class Served:
    """The fake on a loopback port, in a thread, for as long as the `with` lasts."""

    def __init__(self, fake: FakeProlific):
        self.fake = fake
        self.server = uvicorn.Server(uvicorn.Config(fake.app(), host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> FakeProlific:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the fake Prolific did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.fake.url = f"http://127.0.0.1:{port}/api/v1"
        return self.fake

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
