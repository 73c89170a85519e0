"""Prolific from the pages: the study page's Prolific card (the token, a price, then the study
made and published; pause and resume; returned slots reclaimed) and the review page's (the
review's decisions carried to Prolific, a bonus paid once, a worker blocked). Each form calls
app/crowd/service.py as the JSON routes do, so every call to Prolific is audited alike; a
refusal comes back as the page's message."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy import select

from app.auth.deps import Managed, managing, require, verify_csrf
from app.crowd import platform, service
from app.crowd.models import BonusPayment
from app.errors import InputError
from app.params import FormText
from app.studies.models import Study
from app.web import back, form_number

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])


class BonusForm(BaseModel):
    """The review page's bonus: whom (their Prolific id), how many cents, why; as typed."""

    worker_id: str = ""
    amount_cents: str = ""
    reason: str = ""


class AllowForm(BaseModel):
    """The allow list's card: on or off, the gold accuracy (in %) over how many gold items,
    whether a rejection keeps a worker out, the least median seconds per item and the most
    items answered too fast (in %); as typed."""

    enabled: str = ""
    min_gold_accuracy: str = ""
    min_gold_items: str = ""
    no_rejections: str = ""
    min_median_seconds: str = ""  # blank: no speed term
    max_fast_share: str = ""  # in %; blank: no limit


own_study = managing(require("researcher", "admin"))


def _terms(reward_cents: str, places: str) -> tuple[int, int]:
    reward = form_number(reward_cents, "reward_cents")
    n = form_number(places, "places")
    if reward is None or n is None:
        raise InputError("give the reward (in cents) and the number of places", field="reward_cents")
    return int(reward), int(n)


def _back(request: Request, study: Study, message: str, level: str = "ok", to: str = "") -> Response:
    return back(request, to or f"/studies/{study.id}#prolific", message, level)


def _done(request: Request, study: Study, refused: str, act: Callable[[], str], to: str = "") -> Response:
    """A form's answer: act() does the work and says what was done; its refusal (an InputError)
    comes back as "<refused>: <why>" on the same page."""
    try:
        message = act()
    except InputError as exc:
        return _back(request, study, f"{refused}: {exc.message}", "error", to)
    return _back(request, study, message, to=to)


def _review(study: Study) -> str:
    return f"/admin/studies/{study.id}/review#prolific"


def _worker(worker_id: str) -> str:
    """A form's Prolific worker id, stripped; InputError when blank or too long."""
    if not worker_id.strip() or len(worker_id) > 255:
        raise InputError("which worker? (their Prolific id)", field="worker_id")
    return worker_id.strip()


def bonus_key(worker_id: str) -> str:
    """The page pays each worker of a study one bonus: its key is the worker's, so a second
    click (or a retry after an error) is the same bonus and pays nothing more."""
    return "page:" + hashlib.sha256(worker_id.encode()).hexdigest()[:32]


@router.post("/studies/{study_id}/prolific/token")
def store_token(request: Request, token: FormText = "", own: Managed = Depends(own_study)) -> Response:
    def act() -> str:
        account = service.store_token(own.session, own.session.merge(own.user), token)
        return f"Prolific token stored: it opens {account.account_name}'s account."

    return _done(request, own.study, "Not stored", act)


@router.post("/studies/{study_id}/prolific/cost")
def price(
    request: Request, reward_cents: FormText = "", places: FormText = "", own: Managed = Depends(own_study)
) -> Response:
    """Prolific's price for these terms, shown on the study page with the button that makes and
    publishes the study on them; nothing is made."""
    from app.studies.views import _study_page

    session, study = own.session, own.study
    try:
        reward, n = _terms(reward_cents, places)
        total = service.cost(session, study, session.merge(own.user), reward, n)
    except InputError as exc:
        return _back(request, study, f"Not priced: {exc.message}", "error")
    quote = {"reward_cents": reward, "places": n, "total_cost_cents": total}
    return _study_page(request, session, study, own.user, prolific_quote=quote)


@router.post("/studies/{study_id}/prolific/publish")
def publish(
    request: Request, reward_cents: FormText = "", places: FormText = "", own: Managed = Depends(own_study)
) -> Response:
    """Make the study on Prolific on the terms priced, then publish it."""
    from app.studies.views import entry_base

    session, study = own.session, own.study

    def act() -> str:
        me = session.merge(own.user)
        reward, n = _terms(reward_cents, places)
        if service.platform_study(session, study) is None:
            link = platform("prolific").entry_link(entry_base(request), study.slug)
            service.create_study(session, study, me, reward, n, link)
        row = service.transition(session, study, me, "publish")
        return f"Published on Prolific ({row.external_id}): workers can take it now."

    return _done(request, study, "Not published", act)


@router.post("/studies/{study_id}/prolific/move")
def move(request: Request, action: FormText = "", own: Managed = Depends(own_study)) -> Response:
    """Pause the study on Prolific, or start it again (resume)."""
    if action not in ("pause", "start"):
        raise InputError("pause or start", field="action")

    def act() -> str:
        row = service.transition(own.session, own.study, own.session.merge(own.user), action)
        return f"On Prolific the study is now {row.status.lower()}."

    return _done(request, own.study, "Not done", act)


@router.post("/studies/{study_id}/prolific/reclaim")
def reclaim(request: Request, own: Managed = Depends(own_study)) -> Response:
    def act() -> str:
        freed = service.reclaim(own.session, own.study, own.session.merge(own.user))
        if freed:
            return f"{len(freed)} returned or timed-out submission(s): their tasks ended, their items back in the pool."
        return "No returned or timed-out submission has a task open here."

    to = _review(own.study) if request.query_params.get("from") == "review" else ""
    return _done(request, own.study, "Not checked", act, to)


@router.post("/studies/{study_id}/prolific/reviews")
def carry_reviews(
    request: Request, rejection_category: str = Form("FAILED_CHECK"), own: Managed = Depends(own_study)
) -> Response:
    """The review's decisions to Prolific: approved and rejected submissions, in bulk."""

    def act() -> str:
        done = service.carry_reviews(own.session, own.study, own.session.merge(own.user), rejection_category)
        return f"On Prolific: {len(done['approved'])} submission(s) approved, {len(done['rejected'])} rejected."

    return _done(request, own.study, "Not carried", act, _review(own.study))


@router.post("/studies/{study_id}/prolific/bonus")
def pay_bonus(request: Request, form: Annotated[BonusForm, Form()], own: Managed = Depends(own_study)) -> Response:
    """Pay a worker their bonus, once (bonus_key): a second click pays nothing more."""
    session, study = own.session, own.study

    def act() -> str:
        cents = form_number(form.amount_cents, "amount_cents")
        if cents is None:
            raise InputError("give the bonus in cents", field="amount_cents")
        worker = _worker(form.worker_id)
        key = bonus_key(worker)
        before = session.scalar(
            select(BonusPayment.state).where(
                BonusPayment.study_id == study.id, BonusPayment.platform == service.PLATFORM, BonusPayment.key == key
            )
        )
        bonus = service.pay_bonus(session, study, session.merge(own.user), worker, int(cents), key, form.reason)
        if before == "paid":
            return f"{bonus.worker_id} was paid this bonus already ({bonus.amount_cents} cents): nothing more paid."
        return f"Bonus of {bonus.amount_cents} cents paid to {bonus.worker_id}."

    return _done(request, study, "Bonus not paid", act, _review(study))


@router.post("/studies/{study_id}/prolific/block")
def block(
    request: Request, worker_id: FormText = "", reason: FormText = "", own: Managed = Depends(own_study)
) -> Response:
    """Block a worker: on your block list on Prolific, kept out of the studies you make next."""

    def act() -> str:
        blocked = service.block_worker(own.session, own.study, own.session.merge(own.user), _worker(worker_id), reason)
        return f"{blocked.worker_id} is blocked: your next Prolific studies exclude them."

    return _done(request, own.study, "Not blocked", act, _review(own.study))


@router.post("/studies/{study_id}/prolific/message")
def message(
    request: Request, worker_id: FormText = "", body: FormText = "", own: Managed = Depends(own_study)
) -> Response:
    """A message to a worker on Prolific, from the review page."""

    def act() -> str:
        service.message_worker(own.session, own.study, own.session.merge(own.user), worker_id, body)
        return f"Message sent to {worker_id.strip()} on Prolific."

    return _done(request, own.study, "Not sent", act, _review(own.study))


@router.post("/studies/{study_id}/prolific/allow")
def allow_list(request: Request, form: Annotated[AllowForm, Form()], own: Managed = Depends(own_study)) -> Response:
    """The allow list's rule (gold accuracy, over how many gold items, no rejection), kept and
    applied: the list on Prolific made of the workers whose records meet it now."""

    def act() -> str:
        rule = None
        if form.enabled:
            percent = form_number(form.min_gold_accuracy, "min_gold_accuracy", float)
            items = form_number(form.min_gold_items, "min_gold_items")
            if percent is None or items is None:
                raise InputError(
                    "give the gold accuracy (in %) and the number of gold items", field="min_gold_accuracy"
                )
            seconds = form_number(form.min_median_seconds, "min_median_seconds", float)
            fast = form_number(form.max_fast_share, "max_fast_share", float)
            rule = service.allow_rule(
                float(percent) / 100,
                int(items),
                bool(form.no_rejections),
                float(seconds or 0),
                1.0 if fast is None else float(fast) / 100,
            )
        done = service.set_allow_rule(own.session, own.session.merge(own.user), rule)
        if rule is None:
            return "No allow list: the Prolific studies you make next admit any worker."
        return (
            f"Allow list on Prolific: {len(done['members'])} worker(s) meet the rule "
            f"({len(done['added'])} added, {len(done['removed'])} taken out); your next studies admit only them."
        )

    return _done(request, own.study, "Allow list not updated", act)


@router.post("/studies/{study_id}/prolific/hooks")
def hooks(request: Request, own: Managed = Depends(own_study)) -> Response:
    """Subscribe to Prolific's hooks: a returned or timed-out submission frees its slot here at once."""
    from app.studies.views import entry_base

    def act() -> str:
        service.subscribe_hooks(own.session, own.session.merge(own.user), entry_base(request))
        return "Prolific now tells Proctor at once when a submission is returned or times out."

    return _done(request, own.study, "Not subscribed", act)
