"""Prolific from inside Proctor, with the researcher's own token: store and check the token,
price a study and make it on Prolific, move it through its states, carry the review queue's
decisions to its submissions, and pay bonuses once. Every call to Prolific is in the audit log
(action `prolific.call`, with the method, path and answer), beside what it was for."""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import CursorResult, and_, case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import audit, jsonsafe
from app.auth.models import User
from app.crowd import sealed
from app.crowd.models import BonusPayment, CrowdAccount, CrowdBlock, PlatformStudy
from app.crowd.prolific_api import (
    ALLOWLIST_FILTER,
    BLOCKLIST_FILTER,
    GONE_STATUSES,
    HOOK_SIGNATURE,
    HOOK_TIMESTAMP,
    MIN_REJECTION_MESSAGE,
    SUBMISSION_HOOK,
    ProlificClient,
    ProlificError,
    hook_signature,
)
from app.db import get_sessionmaker, utcnow
from app.errors import Conflict, InputError, Missing
from app.quality import service as quality
from app.studies.models import Annotation, Bundle, Participant, Study

PLATFORM = "prolific"
log = logging.getLogger("proctor.prolific")


class Unreachable(InputError):
    """Prolific did not answer, or answered with a failure of its own: nothing is known to have
    been done (a bonus's pay call excepted: see pay_bonus)."""

    status_code = 502


def _failed(exc: ProlificError, doing: str) -> InputError:
    if exc.refused:
        return Conflict(f"Prolific refused to {doing}: {exc}")
    return Unreachable(f"could not {doing}: {exc}; try again")


# ---- the token ------------------------------------------------------------------------------


def store_token(session: Session, user: User, token: str, base_url: str | None = None) -> CrowdAccount:
    """Check the token with Prolific (whose account it is) and keep it sealed; one per researcher."""
    token = token.strip()
    if not token:
        raise InputError("give the API token from Prolific's settings", field="token")
    if not (token.isascii() and token.isprintable()) or " " in token:
        # It goes in a header: Prolific's tokens are letters, digits and a few marks.
        raise InputError("a Prolific token is printable ASCII without spaces: copy it again", field="token")
    with ProlificClient(token, base_url, on_call=_recorder(session, user.id, "user", user.id)) as client:
        try:
            me = client.me()
        except ProlificError as exc:
            session.commit()  # the audit of the call
            if exc.refused:
                raise InputError("Prolific does not accept this token", field="token") from exc
            raise _failed(exc, "check the token") from exc
    name = str(me.get("email") or me.get("name") or me.get("id") or "")[:255]
    account = session.scalar(
        select(CrowdAccount).where(CrowdAccount.user_id == user.id, CrowdAccount.platform == PLATFORM)
    )
    if account is None:
        account = CrowdAccount(user_id=user.id, platform=PLATFORM, token_sealed="")
        session.add(account)
    account.token_sealed = sealed.seal(token)
    account.account_name = name
    account.created_at = utcnow()
    audit.record(session, user.id, "prolific.token", "user", user.id, account=name)
    session.commit()
    return account


def account_of(session: Session, user: User) -> CrowdAccount | None:
    return session.scalar(
        select(CrowdAccount).where(CrowdAccount.user_id == user.id, CrowdAccount.platform == PLATFORM)
    )


def token_of(session: Session, user: User) -> str:
    account = account_of(session, user)
    if account is None:
        raise Conflict("no Prolific token stored: PUT /api/v1/prolific/token first")
    try:
        return sealed.unseal(account.token_sealed)
    except sealed.Unreadable as exc:
        raise Conflict(str(exc)) from exc


def _recorder(session: Session, actor_id: int, target_type: str, target_id: object) -> Any:
    def record(method: str, path: str, status: int | None) -> None:
        audit.record(
            session, actor_id, "prolific.call", target_type, target_id, method=method, path=path, status=status
        )

    return record


@contextmanager
def client(session: Session, user: User, target_type: str, target_id: object) -> Iterator[ProlificClient]:
    """A client on the researcher's token whose every call goes to the audit log."""
    with ProlificClient(token_of(session, user), on_call=_recorder(session, user.id, target_type, target_id)) as c:
        yield c


def check(session: Session, user: User) -> dict[str, Any]:
    """Whose account the stored token opens, as Prolific says."""
    with client(session, user, "user", user.id) as c:
        try:
            me = c.me()
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "read the account") from exc
    session.commit()
    return {"id": me.get("id"), "email": me.get("email"), "name": me.get("name")}


# ---- studies ---------------------------------------------------------------------------------


def _check_study_terms(reward_cents: int, places: int) -> None:
    if reward_cents < 1:
        raise InputError("the reward is a number of cents, at least 1", field="reward_cents")
    if places < 1:
        raise InputError("places is the number of participants, at least 1", field="places")


def cost(session: Session, study: Study, user: User, reward_cents: int, places: int) -> int:
    """Prolific's price for the study, fees and tax included, in cents (nothing is made)."""
    _check_study_terms(reward_cents, places)
    with client(session, user, "study", study.id) as c:
        try:
            total = c.cost(reward_cents, places)
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "price the study") from exc
    session.commit()
    return total


def platform_study(session: Session, study: Study) -> PlatformStudy | None:
    return session.scalar(
        select(PlatformStudy).where(PlatformStudy.study_id == study.id, PlatformStudy.platform == PLATFORM)
    )


def create_study(
    session: Session, study: Study, user: User, reward_cents: int, places: int, entry_link: str
) -> PlatformStudy:
    """The study as a draft on Prolific (its URL the study's Prolific entry link, its code the
    study's), priced first; one per study."""
    _check_study_terms(reward_cents, places)
    if platform_study(session, study) is not None:
        raise Conflict("this study is on Prolific already")
    body = {
        "name": study.title,
        "internal_name": f"proctor:{study.slug}",
        "description": study.instructions or study.title,
        "external_study_url": entry_link,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {"code": study.completion_code, "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}
        ],
        "estimated_completion_time": study.estimated_minutes or 10,
        "reward": reward_cents,
        "total_available_places": places,
        "device_compatibility": ["desktop"],
    }
    account = account_of(session, user)
    filters: list[dict[str, Any]] = []
    if account is not None and account.block_group_id:
        # The workers this researcher blocked (block_worker) cannot take it.
        filters.append({"filter_id": BLOCKLIST_FILTER, "selected_values": [account.block_group_id]})
    with client(session, user, "study", study.id) as c:
        try:
            if account is not None and account.allow_rule:
                # Only the workers whose records meet the rule now may take it.
                _sync_allow_list(session, c, account)
                filters.append({"filter_id": ALLOWLIST_FILTER, "selected_values": [account.allow_group_id]})
            if filters:
                body["filters"] = filters
            total = c.cost(reward_cents, places)
            made = c.create_study(body)
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "make the study") from exc
    row = PlatformStudy(
        study_id=study.id,
        platform=PLATFORM,
        external_id=str(made["id"]),
        status=str(made.get("status", "UNPUBLISHED")),
        reward_cents=reward_cents,
        places=places,
        total_cost_cents=total,
        created_by=user.id,
    )
    session.add(row)
    audit.record(session, user.id, "prolific.study", "study", study.id, prolific_id=row.external_id, cost=total)
    session.commit()
    return row


ACTIONS = {"publish": "PUBLISH", "pause": "PAUSE", "start": "START", "stop": "STOP"}


def transition(session: Session, study: Study, user: User, action: str) -> PlatformStudy:
    """Publish, pause, start again or stop the study on Prolific. Publishing or starting needs
    the study live here: workers sent from Prolific would find it shut."""
    row = platform_study(session, study)
    if row is None:
        raise Conflict("this study is not on Prolific: make it there first")
    if action not in ACTIONS:
        raise InputError(f"one of {', '.join(ACTIONS)}", field="action")
    if action in ("publish", "start") and study.state != "live":
        raise Conflict(f"the study is {study.state} here: make it live before workers come from Prolific")
    with client(session, user, "study", study.id) as c:
        try:
            got = c.transition_study(row.external_id, ACTIONS[action])
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, f"{action} the study") from exc
    row.status = str(got.get("status", row.status))
    audit.record(session, user.id, f"prolific.{action}", "study", study.id, prolific_id=row.external_id)
    session.commit()
    return row


# ---- the review queue's decisions -------------------------------------------------------------

# Prolific shows this to a rejected participant, after the reviewer's own reason.
REJECTION_TEXT = (
    "Your submission was reviewed against the study's quality checks (items with known answers "
    "and the review of your answers) and did not meet them."
)


def prolific_work(session: Session, study: Study) -> list[tuple[str, str, str, str]]:
    """(participant id, submission id, review status, reason) of the study's Prolific workers."""
    from app.auth.models import User as Worker

    rows = session.execute(
        select(Worker.external_id, Bundle.external_assignment_id, Participant.status, Participant.reason)
        .join(Bundle, Bundle.participant_id == Participant.id)
        .join(Worker, Worker.id == Participant.worker_id)
        .where(Participant.study_id == study.id, Worker.platform == PLATFORM)
        .order_by(Bundle.id)
    )
    return [(str(w), str(s), st, r) for w, s, st, r in rows if s]


def carry_reviews(session: Session, study: Study, user: User, category: str = "FAILED_CHECK") -> dict[str, Any]:
    """Approve on Prolific the submissions of workers approved here, reject those rejected here
    (with the review's reason); only submissions awaiting review on Prolific are touched, so
    running it again changes nothing."""
    from app.crowd.prolific_api import REJECTION_CATEGORIES

    if category not in REJECTION_CATEGORIES:
        raise InputError(f"one of {', '.join(REJECTION_CATEGORIES)}", field="rejection_category")
    row = platform_study(session, study)
    if row is None:
        raise Conflict("this study is not on Prolific: make it there first")
    ours = prolific_work(session, study)
    approved: list[str] = []
    rejected: list[str] = []
    with client(session, user, "study", study.id) as c:
        try:
            waiting = {s["id"] for s in c.submissions(row.external_id) if s.get("status") == "AWAITING REVIEW"}
            approve = [sub for _, sub, status, _ in ours if status == "approved" and sub in waiting]
            if approve:
                c.approve(row.external_id, approve)
                approved = approve
            for _, sub, status, reason in ours:
                if status == "rejected" and sub in waiting:
                    message = f"{reason.strip()} {REJECTION_TEXT}".strip() if reason.strip() else REJECTION_TEXT
                    c.reject(sub, message.ljust(MIN_REJECTION_MESSAGE), category)
                    rejected.append(sub)
        except ProlificError as exc:
            audit.record(session, user.id, "prolific.review", "study", study.id, approved=approved, rejected=rejected)
            session.commit()
            raise _failed(exc, "carry the review's decisions") from exc
    audit.record(session, user.id, "prolific.review", "study", study.id, approved=approved, rejected=rejected)
    session.commit()
    return {"approved": approved, "rejected": rejected}


def _storable(text: str, field: str) -> None:
    """InputError for text no row holds (U+0000, a lone surrogate), before Prolific is called
    with it: what is sent is stored or audited after the call (round 17 of issue 26: a form's
    message with a U+0000 was sent, then refused by PostgreSQL's audit row, so never audited)."""
    if jsonsafe.unstorable_text(text, field) is not None:
        raise InputError("holds U+0000 (NUL) or a lone surrogate, which no text column holds", field=field)


def _worker_of(session: Session, study: Study, worker_id: str) -> None:
    """Missing unless `worker_id` is one of the study's Prolific workers."""
    if worker_id not in {w for w, _, _, _ in prolific_work(session, study)}:
        raise Missing(f"no Prolific worker {worker_id!r} in this study", field="worker_id")


# ---- the block list --------------------------------------------------------------------------


def block_worker(session: Session, study: Study, user: User, worker_id: str, reason: str = "") -> CrowdBlock:
    """Add a worker of the study to the researcher's block list on Prolific (a participant
    group, made with the first worker blocked): studies made on Prolific afterwards keep its
    members out (create_study's filter; Prolific also updates the studies published with it).
    Blocking a worker twice adds them once."""
    worker_id = worker_id.strip()
    _storable(reason, "reason")
    account = account_of(session, user)
    if account is None:
        raise Conflict("no Prolific token stored: PUT /api/v1/prolific/token first")
    _worker_of(session, study, worker_id)
    blocked = session.scalar(
        select(CrowdBlock).where(
            CrowdBlock.user_id == user.id, CrowdBlock.platform == PLATFORM, CrowdBlock.worker_id == worker_id
        )
    )
    if blocked is not None:
        return blocked
    with client(session, user, "study", study.id) as c:
        try:
            if not account.block_group_id:
                group = c.create_group(
                    c.workspace(), "Proctor: blocked workers", "Workers blocked from Proctor's review page"
                )
                account.block_group_id = str(group["id"])
                audit.record(session, user.id, "prolific.group", "user", user.id, prolific_id=account.block_group_id)
                session.commit()  # the group is kept even if adding the worker fails
            c.add_to_group(account.block_group_id, [worker_id])
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "block the worker") from exc
    blocked = CrowdBlock(user_id=user.id, platform=PLATFORM, worker_id=worker_id, study_id=study.id, reason=reason)
    session.add(blocked)
    audit.record(session, user.id, "prolific.block", "study", study.id, worker=worker_id, reason=reason)
    try:
        session.commit()
    except IntegrityError:  # blocked by another request at the same moment: added once there
        session.rollback()
    return blocked


def blocked_workers(session: Session, user: User) -> set[str]:
    return set(
        session.scalars(
            select(CrowdBlock.worker_id).where(CrowdBlock.user_id == user.id, CrowdBlock.platform == PLATFORM)
        )
    )


# ---- the allow list, fed by the workers' records ----------------------------------------------

# A rule's terms: gold accuracy at least `min_gold_accuracy` over at least `min_gold_items` gold
# items on this instance, and, when `no_rejections`, no review here rejected. Optional speed
# terms (rules kept before them lack them, and mean no speed term): a median of at least
# `min_median_seconds` per item, and at most `max_fast_share` of the items implausibly fast.
ALLOW_RULE = ("min_gold_accuracy", "min_gold_items", "no_rejections", "min_median_seconds", "max_fast_share")


def allow_rule(
    min_gold_accuracy: float,
    min_gold_items: int,
    no_rejections: bool,
    min_median_seconds: float = 0.0,
    max_fast_share: float = 1.0,
) -> dict[str, Any]:
    """A rule, checked: InputError naming the term that is out of range."""
    if not 0.0 <= min_gold_accuracy <= 1.0:
        raise InputError("the gold accuracy is a fraction from 0 to 1", field="min_gold_accuracy")
    if not 0 <= min_gold_items <= 100_000:
        raise InputError("the gold items are a count from 0 to 100000", field="min_gold_items")
    if not 0.0 <= min_median_seconds <= 86_400.0:
        raise InputError("the median time is seconds from 0 to 86400", field="min_median_seconds")
    if not 0.0 <= max_fast_share <= 1.0:
        raise InputError("the share of fast items is a fraction from 0 to 1", field="max_fast_share")
    return {
        "min_gold_accuracy": float(min_gold_accuracy),
        "min_gold_items": int(min_gold_items),
        "no_rejections": bool(no_rejections),
        "min_median_seconds": float(min_median_seconds),
        "max_fast_share": float(max_fast_share),
    }


def meets(record: dict[str, Any], rule: dict[str, Any]) -> bool:
    """Whether a worker's record (records()) meets the rule."""
    if record["gold"] < max(rule["min_gold_items"], 1):
        return False  # no gold item seen: nothing is known of their accuracy
    if record["gold_right"] < rule["min_gold_accuracy"] * record["gold"]:
        return False
    if rule["no_rejections"] and record["rejected"]:
        return False
    # Whoever has a gold item has a time (the gold check above), so median_s is set here.
    if record["median_s"] < rule.get("min_median_seconds", 0.0):
        return False
    return bool(record["fast_share"] <= rule.get("max_fast_share", 1.0))


def _own_workers(session: Session, user_id: int) -> list[str]:
    """The Prolific ids of the workers who took part in this researcher's studies."""
    return sorted(
        str(w)
        for w in session.scalars(
            select(User.external_id)
            .join(Participant, Participant.worker_id == User.id)
            .join(Study, Study.id == Participant.study_id)
            .where(Study.owner_id == user_id, User.platform == PLATFORM)
            .distinct()
        )
    )


def _allowed(session: Session, account: CrowdAccount) -> list[str]:
    """The workers whose records here meet the account's rule now, sorted."""
    rule = account.allow_rule or {}
    record = records(session, _own_workers(session, account.user_id))
    return sorted(w for w, r in record.items() if meets(r, rule))


def _sync_allow_list(session: Session, c: ProlificClient, account: CrowdAccount) -> dict[str, list[str]]:
    """Make the allow list's members on Prolific the workers whose records meet the rule now
    (made with the first sync): those who meet it added, those who no longer do taken out."""
    wanted = _allowed(session, account)
    if not account.allow_group_id:
        group = c.create_group(
            c.workspace(), "Proctor: allowed workers", "Workers whose records on Proctor meet a rule"
        )
        account.allow_group_id = str(group["id"])
        audit.record(
            session, account.user_id, "prolific.group", "user", account.user_id, prolific_id=account.allow_group_id
        )
        session.commit()  # the group is kept even if a later step fails
    members = set(c.group_members(account.allow_group_id))
    added = [w for w in wanted if w not in members]
    removed = sorted(members - set(wanted))
    if added:
        c.add_to_group(account.allow_group_id, added)
    if removed:
        c.remove_from_group(account.allow_group_id, removed)
    audit.record(session, account.user_id, "prolific.allow", "user", account.user_id, added=added, removed=removed)
    account.allow_members = wanted
    return {"members": wanted, "added": added, "removed": removed}


def set_allow_rule(session: Session, user: User, rule: dict[str, Any] | None) -> dict[str, Any]:
    """Keep the rule (None: no allow list for later studies) and bring the allow list on
    Prolific up to date with it; the studies made there afterwards admit only its members (the
    list is brought up to date again as each is made)."""
    account = account_of(session, user)
    if account is None:
        raise Conflict("no Prolific token stored: PUT /api/v1/prolific/token first")
    account.allow_rule = rule
    account.allow_members = None  # kept again with the next sync
    if rule is None:
        audit.record(session, user.id, "prolific.allow", "user", user.id, rule=None)
        session.commit()
        return {"rule": None, "members": [], "added": [], "removed": []}
    with client(session, user, "user", user.id) as c:
        try:
            done = _sync_allow_list(session, c, account)
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "update the allow list") from exc
    session.commit()
    return {"rule": rule, **done}


# An account whose sync failed is tried at the next round, then after 1, 3, 7 ... minutes (at
# most an hour) while it keeps failing: each try is calls to Prolific and an audit row, and a
# revoked token fails every time. Kept by the sweeper's process; a restart tries at once.
_REFRESH_FAILED: dict[int, tuple[int, float]] = {}  # account id -> (failures in a row, not before)
REFRESH_MAX_WAIT_S = 3600.0


def refresh_allow_lists(now: float | None = None) -> list[dict[str, Any]]:
    """The allow lists kept as the workers' records change: each account's rule applied to the
    records as they are now, and Prolific called (its group's members read, then added to or
    taken from) only where the rule picks other workers than at the last sync. Run with the
    sweeper, every minute. An account whose token is gone or unreadable, or that Prolific does
    not answer for, waits for a later round (logged; _REFRESH_FAILED). [{"user", "added",
    "removed"}] of those changed."""
    now = time.time() if now is None else now
    changed: list[dict[str, Any]] = []
    with get_sessionmaker()() as s:
        accounts = s.scalars(
            select(CrowdAccount).where(CrowdAccount.platform == PLATFORM).order_by(CrowdAccount.id)
        ).all()
        for account in accounts:
            user = s.get(User, account.user_id)
            if not account.allow_rule or user is None or _allowed(s, account) == account.allow_members:
                continue
            failures, not_before = _REFRESH_FAILED.get(account.id, (0, 0.0))
            if now < not_before:
                continue
            try:
                with client(s, user, "user", user.id) as c:
                    done = _sync_allow_list(s, c, account)
            except (ProlificError, InputError, sealed.Unreadable) as exc:
                s.commit()  # the audit of the calls made
                wait = min(60.0 * (2**failures - 1), REFRESH_MAX_WAIT_S)
                _REFRESH_FAILED[account.id] = (failures + 1, now + wait)
                log.warning("allow list of user %s (tried again in %.0f s): %s", account.user_id, wait, exc)
                continue
            _REFRESH_FAILED.pop(account.id, None)
            s.commit()
            changed.append({"user": user.id, "added": done["added"], "removed": done["removed"]})
    return changed


# ---- hooks: returned and timed-out submissions freed the moment Prolific says so -----------------


def subscribe_hooks(session: Session, user: User, base: str) -> dict[str, str]:
    """Have Prolific call this instance (at `base`) whenever a submission's status changes,
    the secret it signs with made anew and kept sealed; the subscription's id and its URL."""
    account = account_of(session, user)
    if account is None:
        raise Conflict("no Prolific token stored: PUT /api/v1/prolific/token first")
    target_url = f"{base}/api/v1/prolific/hooks/{account.id}"
    with client(session, user, "user", user.id) as c:
        try:
            workspace = c.workspace()
            account.hook_secret_sealed = sealed.seal(c.hook_secret(workspace))
            session.commit()  # the secret Prolific now signs with, whatever follows
            sub_id = c.subscribe(workspace, SUBMISSION_HOOK, target_url)
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "subscribe to Prolific's hooks") from exc
    audit.record(session, user.id, "prolific.hooks", "user", user.id, subscription=sub_id, target=target_url)
    session.commit()
    return {"subscription": sub_id, "target_url": target_url}


class BadSignature(InputError):
    status_code = 401


# How far a hook's timestamp may be from now. Prolific documents no window (its "Verifying"
# page signs the timestamp and says nothing of its age): ours, so that a delivery captured and
# sent again later is refused. Behind (the delivery's way here) and ahead (clocks apart).
HOOK_MAX_AGE_S = 300
HOOK_MAX_AHEAD_S = 60


def hook_fresh(timestamp: str, now: float) -> bool:
    """Whether a hook's timestamp (UNIX seconds; milliseconds read as such) is within the
    window of `now`."""
    try:
        sent = float(timestamp)
    except ValueError:
        return False
    if sent > 1e11:  # milliseconds: seconds are 10 digits until the year 5138
        sent /= 1000
    return -HOOK_MAX_AHEAD_S <= now - sent <= HOOK_MAX_AGE_S


def receive_hook(session: Session, account_id: int, headers: Any, body: bytes) -> list[str]:
    """A hook from Prolific for this account: checked against its signature, then a submission
    returned or timed out ends its task here and frees its item at once (the sweeper's polling,
    reclaim_all, stays as the net for a hook lost). Prolific delivers a hook at least once: a
    second delivery finds the task ended and frees nothing. The submissions freed."""
    from app.studies import assignment

    account = session.get(CrowdAccount, account_id)
    if account is None or account.platform != PLATFORM or not account.hook_secret_sealed:
        raise Missing("no Prolific hooks are expected here")
    try:
        secret = sealed.unseal(account.hook_secret_sealed)
    except sealed.Unreadable as exc:
        raise Conflict(str(exc)) from exc
    timestamp, signature = headers.get(HOOK_TIMESTAMP, ""), headers.get(HOOK_SIGNATURE, "")
    # As bytes: a header may hold any latin-1 character, which compare_digest refuses in a str.
    expected = hook_signature(secret, timestamp, body).encode()
    if not (timestamp and signature) or not hmac.compare_digest(expected, signature.encode("latin-1", "replace")):
        raise BadSignature(f"the hook's {HOOK_SIGNATURE} does not match its body and timestamp")
    if not hook_fresh(timestamp, time.time()):
        # Signed by Prolific but out of the window (replayed, or held up): taken and ignored,
        # so a sender that retries on an error does not retry it forever; the sweeper's
        # polling frees the slot if it should be.
        log.warning(
            "Prolific hook for account %s ignored: its %s is more than %s s old or %s s ahead",
            account_id, HOOK_TIMESTAMP, HOOK_MAX_AGE_S, HOOK_MAX_AHEAD_S,
        )  # fmt: skip
        return []
    try:
        event = json.loads(body)
    except ValueError:
        raise InputError("the hook's body is not JSON") from None
    if not isinstance(event, dict) or event.get("event_type") != SUBMISSION_HOOK:
        return []  # an event Proctor did not subscribe to: nothing to do
    if event.get("status") not in GONE_STATUSES:
        return []
    submission = str(event.get("resource_id") or "")
    bundles = session.execute(
        select(Bundle.id, Bundle.study_id)
        .join(User, User.id == Bundle.worker_id)
        .join(PlatformStudy, and_(PlatformStudy.study_id == Bundle.study_id, PlatformStudy.platform == PLATFORM))
        .where(
            Bundle.external_assignment_id == submission,
            User.platform == PLATFORM,
            PlatformStudy.created_by == account.user_id,
        )
    ).all()
    freed = [submission for bundle_id, _ in bundles if assignment.give_back(session, bundle_id)]
    for _, study_id in bundles[:1]:
        audit.record(
            session, account.user_id, "prolific.hook", "study", study_id,
            submission=submission, status=event.get("status"), event=headers.get("X-Event-ID"), freed=bool(freed),
        )  # fmt: skip
    session.commit()
    return freed


# ---- messages ---------------------------------------------------------------------------------

MAX_MESSAGE = 5000


def message_worker(session: Session, study: Study, user: User, worker_id: str, body: str) -> None:
    """Send a worker of the study a message on Prolific (the study its reason); audited with
    its text."""
    worker_id, body = worker_id.strip(), body.strip()
    if not body or len(body) > MAX_MESSAGE:
        raise InputError(f"write the message (1 to {MAX_MESSAGE} characters)", field="body")
    _storable(body, "body")
    row = platform_study(session, study)
    if row is None:
        raise Conflict("this study is not on Prolific: make it there first")
    _worker_of(session, study, worker_id)
    with client(session, user, "study", study.id) as c:
        try:
            c.send_message(row.external_id, worker_id, body)
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "send the message") from exc
    audit.record(session, user.id, "prolific.message", "study", study.id, worker=worker_id, body=body)
    session.commit()


# ---- a worker's record across studies ----------------------------------------------------------


def records(session: Session, worker_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each Prolific worker's record across this instance's studies: how many studies, their
    gold items and how many they got right, their reviews (approved, rejected, pending), and
    what they were paid through Proctor (approved rewards and paid bonuses, in cents), and
    their speed (quality.worker_speeds): `items` answered, `median_s` seconds per item (None
    for none), `fast` items answered implausibly fast and `fast_share` of the items."""
    if not worker_ids:
        return {}
    out: dict[str, dict[str, Any]] = {
        w: {
            "studies": 0,
            "gold": 0,
            "gold_right": 0,
            "approved": 0,
            "rejected": 0,
            "pending": 0,
            "paid_cents": 0,
            "items": 0,
            "median_s": None,
            "fast": 0,
            "fast_share": None,
        }
        for w in worker_ids
    }
    users = {
        uid: str(ext)
        for uid, ext in session.execute(
            select(User.id, User.external_id).where(User.platform == PLATFORM, User.external_id.in_(worker_ids))
        )
    }
    for uid, speed in quality.worker_speeds(session, list(users)).items():
        out[users[uid]].update(speed, fast_share=speed["fast"] / speed["items"])
    reviews = session.execute(
        select(User.external_id, Participant.status, func.count(Participant.id))
        .join(Participant, Participant.worker_id == User.id)
        .where(User.platform == PLATFORM, User.external_id.in_(worker_ids))
        .group_by(User.external_id, Participant.status)
    ).all()
    for w, status, n in reviews:
        out[str(w)]["studies"] += n
        if status in ("approved", "rejected", "pending"):
            out[str(w)][status] += n
    gold = session.execute(
        select(
            User.external_id,
            func.count(Annotation.id),
            func.sum(case((Annotation.score >= 1.0, 1), else_=0)),
        )
        .join(Annotation, Annotation.worker_id == User.id)
        .where(User.platform == PLATFORM, User.external_id.in_(worker_ids), Annotation.is_gold.is_(True))
        .group_by(User.external_id)
    ).all()
    for w, n, right in gold:
        out[str(w)].update(gold=n, gold_right=int(right or 0))
    rewards = session.execute(
        select(User.external_id, func.sum(PlatformStudy.reward_cents))
        .join(Participant, Participant.worker_id == User.id)
        .join(PlatformStudy, and_(PlatformStudy.study_id == Participant.study_id, PlatformStudy.platform == PLATFORM))
        .where(User.platform == PLATFORM, User.external_id.in_(worker_ids), Participant.status == "approved")
        .group_by(User.external_id)
    ).all()
    for w, cents in rewards:
        out[str(w)]["paid_cents"] += int(cents or 0)
    bonuses = session.execute(
        select(BonusPayment.worker_id, func.sum(BonusPayment.amount_cents))
        .where(BonusPayment.platform == PLATFORM, BonusPayment.worker_id.in_(worker_ids), BonusPayment.state == "paid")
        .group_by(BonusPayment.worker_id)
    ).all()
    for w, cents in bonuses:
        out[w]["paid_cents"] += int(cents or 0)
    return out


# ---- returned and timed-out submissions --------------------------------------------------------


def reclaim(session: Session, study: Study, user: User) -> list[str]:
    """Read the study's submissions on Prolific; each one returned or timed out ends its task
    here, so the item its worker held goes back to the pool at once (assignment.give_back).
    The ids of the submissions whose tasks it ended (none the second time)."""
    from app.studies import assignment

    row = platform_study(session, study)
    if row is None:
        raise Conflict("this study is not on Prolific: make it there first")
    with client(session, user, "study", study.id) as c:
        try:
            gone = {s["id"] for s in c.submissions(row.external_id) if s.get("status") in GONE_STATUSES}
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "read the submissions") from exc
    session.commit()  # the audit of the call
    bundles = session.execute(
        select(Bundle.id, Bundle.external_assignment_id)
        .join(User, User.id == Bundle.worker_id)
        .where(Bundle.study_id == study.id, User.platform == PLATFORM, Bundle.external_assignment_id.in_(gone))
        .order_by(Bundle.id)
    ).all()
    freed = [sub for bundle_id, sub in bundles if assignment.give_back(session, bundle_id)]
    if freed:
        audit.record(session, user.id, "prolific.reclaim", "study", study.id, submissions=freed)
        session.commit()
    return freed


def reclaim_all() -> list[str]:
    """reclaim for every study live on Prolific (active or paused there), with the token of the
    researcher who made it there; run with the sweeper, every minute, so a returned slot is
    free here within a minute without anyone pressing the button. A study whose token is gone
    or unreadable, or that Prolific does not answer for, waits for the next round (logged)."""
    freed: list[str] = []
    with get_sessionmaker()() as s:
        rows = s.execute(
            select(PlatformStudy.study_id, PlatformStudy.created_by).where(
                PlatformStudy.platform == PLATFORM, PlatformStudy.status.in_(("ACTIVE", "PAUSED"))
            )
        ).all()
        for study_id, user_id in rows:
            study, user = s.get(Study, study_id), s.get(User, user_id)
            if study is None or user is None or account_of(s, user) is None:
                continue
            try:
                freed += reclaim(s, study, user)
            except InputError as exc:
                s.rollback()
                log.warning("reclaim of study %s: %s", study_id, exc)
    return freed


# ---- bonuses, paid once ------------------------------------------------------------------------


def _submission_of(session: Session, study: Study, worker_id: str) -> str:
    subs = [sub for w, sub, _, _ in prolific_work(session, study) if w == worker_id]
    if not subs:
        raise Missing(f"no Prolific worker {worker_id!r} in this study", field="worker_id")
    return subs[-1]


def _paid_on(c: ProlificClient, submission_id: str) -> list[int]:
    return [round(float(x)) for x in c.submission(submission_id).get("bonus_payments") or []]


def pay_bonus(
    session: Session, study: Study, user: User, worker_id: str, amount_cents: int, key: str, reason: str = ""
) -> BonusPayment:
    """Pay a worker a bonus at most once, whatever is retried and wherever a try stopped.

    The bonus is a row named by `key` (the caller's: the same key is the same bonus). Its
    steps, each committed before the next call: the intent (with how many bonuses Prolific
    showed on the submission), the bonus set up on Prolific (its id kept), `paying` written
    just before the pay call (which Prolific does not make idempotent), `paid` after it. A
    retry takes up where the row stands: a bonus set up is paid with its own id, never set up
    again; one found `paying` is paid again never: it is `paid` once Prolific shows the
    payment on the submission, and until then the answer says so (409)."""
    if amount_cents < 1:
        raise InputError("the bonus is a number of cents, at least 1", field="amount_cents")
    if not key.strip() or len(key) > 64:
        raise InputError("a key of 1 to 64 characters names this bonus (the same key: the same bonus)", field="key")
    row = platform_study(session, study)
    if row is None:
        raise Conflict("this study is not on Prolific: make it there first")
    bonus = session.scalar(
        select(BonusPayment).where(
            BonusPayment.study_id == study.id, BonusPayment.platform == PLATFORM, BonusPayment.key == key
        )
    )
    if bonus is not None and (bonus.worker_id, bonus.amount_cents) != (worker_id, amount_cents):
        raise Conflict(f"the key {key!r} names another bonus ({bonus.amount_cents} cents to {bonus.worker_id})")
    if bonus is not None and bonus.state == "paid":
        return bonus
    with client(session, user, "bonus", key) as c:
        try:
            if bonus is None:
                submission = _submission_of(session, study, worker_id)
                unsettled = session.scalar(
                    select(BonusPayment.key).where(
                        BonusPayment.study_id == study.id,
                        BonusPayment.submission_id == submission,
                        BonusPayment.state != "paid",
                    )
                )
                if unsettled is not None:  # one at a time: a retry counts the submission's bonuses
                    raise Conflict(f"the bonus {unsettled!r} to this worker is not settled yet: retry it first")
                bonus = BonusPayment(
                    study_id=study.id,
                    platform=PLATFORM,
                    key=key,
                    worker_id=worker_id,
                    submission_id=submission,
                    amount_cents=amount_cents,
                    reason=reason,
                    state="intent",
                    paid_before=len(_paid_on(c, submission)),
                    created_by=user.id,
                )
                session.add(bonus)
                audit.record(
                    session, user.id, "prolific.bonus.intent", "bonus", key, cents=amount_cents, worker=worker_id
                )
                try:
                    session.commit()
                except IntegrityError:  # the same key sent twice at once: the other request has it
                    session.rollback()
                    raise Conflict(
                        f"the bonus {key!r} is being paid by another request: retry it in a moment"
                    ) from None
            if bonus.state == "paying":
                return _confirm(session, c, bonus, user)
            if bonus.state == "intent":
                # A bonus set up whose answer was lost is left unpaid on Prolific: setting up pays nothing.
                made = c.create_bonus(row.external_id, [(worker_id, amount_cents)])
                bonus.external_id, bonus.state = str(made["id"]), "created"
                audit.record(session, user.id, "prolific.bonus.created", "bonus", key, prolific_id=bonus.external_id)
                session.commit()
            # Only one request moves a bonus from `created` to `paying` (two retries at once, a
            # double click: both read `created`); the other pays nothing.
            moved = session.execute(
                update(BonusPayment)
                .where(BonusPayment.id == bonus.id, BonusPayment.state == "created")
                .values(state="paying")
                .execution_options(synchronize_session=False)
            )
            claimed = cast(CursorResult[Any], moved).rowcount  # an UPDATE's (app/jobs.py's _claim)
            session.commit()
            session.refresh(bonus)
            if claimed != 1:
                if bonus.state == "paid":
                    return bonus
                raise Conflict(f"the bonus {key!r} is being paid by another request: retry it in a moment")
            assert bonus.external_id is not None  # `created`
            try:
                c.pay_bonus(bonus.external_id)
            except ProlificError as exc:
                if not exc.refused and exc.sent:
                    raise  # the outcome is unknown: `paying` stays
                # Prolific said no, or the call never left: nothing paid, the same bonus may be paid later.
                bonus.state = "created"
                session.commit()
                raise
            bonus.state, bonus.paid_at = "paid", utcnow()
            audit.record(session, user.id, "prolific.bonus.paid", "bonus", key, prolific_id=bonus.external_id)
            session.commit()
            return bonus
        except ProlificError as exc:
            session.commit()
            raise _failed(exc, "pay the bonus") from exc


def _confirm(session: Session, c: ProlificClient, bonus: BonusPayment, user: User) -> BonusPayment:
    """A bonus whose pay call went out without a known answer: paid if Prolific shows it."""
    shown = _paid_on(c, bonus.submission_id)
    if len(shown) > (bonus.paid_before or 0) and bonus.amount_cents in shown[bonus.paid_before or 0 :]:
        bonus.state, bonus.paid_at = "paid", utcnow()
        audit.record(
            session, user.id, "prolific.bonus.paid", "bonus", bonus.key, prolific_id=bonus.external_id, confirmed=True
        )
        session.commit()
        return bonus
    session.commit()
    raise Conflict(
        f"the bonus {bonus.key!r} was sent to Prolific to pay (bonus {bonus.external_id}) but Prolific does not "
        "show it paid yet (payments are made within minutes); it is not sent again: retry later, or check the "
        "submission on Prolific"
    )
