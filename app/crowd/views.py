"""Prolific from the pages: the study page's Prolific card (the token, a price, then the study
made and published; pause and resume; returned slots reclaimed) and the review page's (the
review's decisions carried to Prolific, a bonus paid once, a worker blocked). Each form calls
app/crowd/service.py as the JSON routes do, so every call to Prolific is audited alike; a
refusal comes back as the page's message."""

from __future__ import annotations

import hashlib

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.crowd import platform, service
from app.crowd.models import BonusPayment
from app.errors import InputError
from app.params import Id
from app.studies.models import Study
from app.web import flash, form_number

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


def _terms(reward_cents: str, places: str) -> tuple[int, int]:
    reward = form_number(reward_cents, "reward_cents")
    n = form_number(places, "places")
    if reward is None or n is None:
        raise InputError("give the reward (in cents) and the number of places", field="reward_cents")
    return int(reward), int(n)


def _back(request: Request, study: Study, message: str, level: str = "ok", to: str = "") -> Response:
    flash(request, message, level)
    return RedirectResponse(to or f"/studies/{study.id}#prolific", status_code=303)


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
def store_token(
    request: Request,
    study_id: Id,
    token: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    study = managed_study(session, study_id, user)
    try:
        account = service.store_token(session, session.merge(user), token)
    except InputError as exc:
        return _back(request, study, f"Not stored: {exc.message}", "error")
    return _back(request, study, f"Prolific token stored: it opens {account.account_name}'s account.")


@router.post("/studies/{study_id}/prolific/cost")
def price(
    request: Request,
    study_id: Id,
    reward_cents: str = Form(""),
    places: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """Prolific's price for these terms, shown on the study page with the button that makes and
    publishes the study on them; nothing is made."""
    from app.studies.views import _study_page

    study = managed_study(session, study_id, user)
    try:
        reward, n = _terms(reward_cents, places)
        total = service.cost(session, study, session.merge(user), reward, n)
    except InputError as exc:
        return _back(request, study, f"Not priced: {exc.message}", "error")
    quote = {"reward_cents": reward, "places": n, "total_cost_cents": total}
    return _study_page(request, session, study, user, prolific_quote=quote)


@router.post("/studies/{study_id}/prolific/publish")
def publish(
    request: Request,
    study_id: Id,
    reward_cents: str = Form(""),
    places: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """Make the study on Prolific on the terms priced, then publish it."""
    from app.studies.views import entry_base

    study = managed_study(session, study_id, user)
    me = session.merge(user)
    try:
        reward, n = _terms(reward_cents, places)
        if service.platform_study(session, study) is None:
            link = platform("prolific").entry_link(entry_base(request), study.slug)
            service.create_study(session, study, me, reward, n, link)
        row = service.transition(session, study, me, "publish")
    except InputError as exc:
        return _back(request, study, f"Not published: {exc.message}", "error")
    return _back(request, study, f"Published on Prolific ({row.external_id}): workers can take it now.")


@router.post("/studies/{study_id}/prolific/move")
def move(
    request: Request,
    study_id: Id,
    action: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """Pause the study on Prolific, or start it again (resume)."""
    study = managed_study(session, study_id, user)
    if action not in ("pause", "start"):
        raise InputError("pause or start", field="action")
    try:
        row = service.transition(session, study, session.merge(user), action)
    except InputError as exc:
        return _back(request, study, f"Not done: {exc.message}", "error")
    return _back(request, study, f"On Prolific the study is now {row.status.lower()}.")


@router.post("/studies/{study_id}/prolific/reclaim")
def reclaim(
    request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
) -> Response:
    study = managed_study(session, study_id, user)
    back = _review(study) if request.query_params.get("from") == "review" else ""
    try:
        freed = service.reclaim(session, study, session.merge(user))
    except InputError as exc:
        return _back(request, study, f"Not checked: {exc.message}", "error", back)
    message = (
        f"{len(freed)} returned or timed-out submission(s): their tasks ended, their items back in the pool."
        if freed
        else "No returned or timed-out submission has a task open here."
    )
    return _back(request, study, message, to=back)


@router.post("/studies/{study_id}/prolific/reviews")
def carry_reviews(
    request: Request,
    study_id: Id,
    rejection_category: str = Form("FAILED_CHECK"),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """The review's decisions to Prolific: approved and rejected submissions, in bulk."""
    study = managed_study(session, study_id, user)
    try:
        done = service.carry_reviews(session, study, session.merge(user), rejection_category)
    except InputError as exc:
        return _back(request, study, f"Not carried: {exc.message}", "error", _review(study))
    return _back(
        request,
        study,
        f"On Prolific: {len(done['approved'])} submission(s) approved, {len(done['rejected'])} rejected.",
        to=_review(study),
    )


@router.post("/studies/{study_id}/prolific/bonus")
def pay_bonus(
    request: Request,
    study_id: Id,
    worker_id: str = Form(""),
    amount_cents: str = Form(""),
    reason: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """Pay a worker their bonus, once (bonus_key): a second click pays nothing more."""
    study = managed_study(session, study_id, user)
    try:
        cents = form_number(amount_cents, "amount_cents")
        if cents is None:
            raise InputError("give the bonus in cents", field="amount_cents")
        worker_id = _worker(worker_id)
        key = bonus_key(worker_id)
        before = session.scalar(
            select(BonusPayment.state).where(
                BonusPayment.study_id == study.id, BonusPayment.platform == service.PLATFORM, BonusPayment.key == key
            )
        )
        bonus = service.pay_bonus(session, study, session.merge(user), worker_id, int(cents), key, reason)
    except InputError as exc:
        return _back(request, study, f"Bonus not paid: {exc.message}", "error", _review(study))
    if before == "paid":
        message = f"{bonus.worker_id} was paid this bonus already ({bonus.amount_cents} cents): nothing more paid."
    else:
        message = f"Bonus of {bonus.amount_cents} cents paid to {bonus.worker_id}."
    return _back(request, study, message, to=_review(study))


@router.post("/studies/{study_id}/prolific/block")
def block(
    request: Request,
    study_id: Id,
    worker_id: str = Form(""),
    reason: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """Block a worker: on your block list on Prolific, kept out of the studies you make next."""
    study = managed_study(session, study_id, user)
    try:
        blocked = service.block_worker(session, study, session.merge(user), _worker(worker_id), reason)
    except InputError as exc:
        return _back(request, study, f"Not blocked: {exc.message}", "error", _review(study))
    return _back(
        request, study, f"{blocked.worker_id} is blocked: your next Prolific studies exclude them.", to=_review(study)
    )


@router.post("/studies/{study_id}/prolific/message")
def message(
    request: Request,
    study_id: Id,
    worker_id: str = Form(""),
    body: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """A message to a worker on Prolific, from the review page."""
    study = managed_study(session, study_id, user)
    try:
        service.message_worker(session, study, session.merge(user), worker_id, body)
    except InputError as exc:
        return _back(request, study, f"Not sent: {exc.message}", "error", _review(study))
    return _back(request, study, f"Message sent to {worker_id.strip()} on Prolific.", to=_review(study))


@router.post("/studies/{study_id}/prolific/allow")
def allow_list(
    request: Request,
    study_id: Id,
    enabled: str = Form(""),
    min_gold_accuracy: str = Form(""),
    min_gold_items: str = Form(""),
    no_rejections: str = Form(""),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """The allow list's rule (gold accuracy, over how many gold items, no rejection), kept and
    applied: the list on Prolific made of the workers whose records meet it now."""
    study = managed_study(session, study_id, user)
    try:
        rule = None
        if enabled:
            percent = form_number(min_gold_accuracy, "min_gold_accuracy", float)
            items = form_number(min_gold_items, "min_gold_items")
            if percent is None or items is None:
                raise InputError(
                    "give the gold accuracy (in %) and the number of gold items", field="min_gold_accuracy"
                )
            rule = service.allow_rule(float(percent) / 100, int(items), bool(no_rejections))
        done = service.set_allow_rule(session, session.merge(user), rule)
    except InputError as exc:
        return _back(request, study, f"Allow list not updated: {exc.message}", "error")
    if rule is None:
        return _back(request, study, "No allow list: the Prolific studies you make next admit any worker.")
    return _back(
        request,
        study,
        f"Allow list on Prolific: {len(done['members'])} worker(s) meet the rule "
        f"({len(done['added'])} added, {len(done['removed'])} taken out); your next studies admit only them.",
    )


@router.post("/studies/{study_id}/prolific/hooks")
def hooks(request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> Response:
    """Subscribe to Prolific's hooks: a returned or timed-out submission frees its slot here at once."""
    from app.studies.views import entry_base

    study = managed_study(session, study_id, user)
    try:
        service.subscribe_hooks(session, session.merge(user), entry_base(request))
    except InputError as exc:
        return _back(request, study, f"Not subscribed: {exc.message}", "error")
    return _back(request, study, "Prolific now tells Proctor at once when a submission is returned or times out.")
