"""Prolific from Proctor's API (/api/v1/prolific, /api/v1/studies/{id}/prolific): the
researcher's own token, their own studies. A 502 means Prolific did not answer or failed."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.crowd import platform, service
from app.crowd.models import BonusPayment, PlatformStudy
from app.crowd.prolific_api import REJECTION_CATEGORIES
from app.errors import ErrorOut
from app.params import Id

router = APIRouter(
    prefix="/api/v1",
    dependencies=[Depends(verify_csrf)],
    tags=["prolific"],
    responses={502: {"model": ErrorOut, "description": "Prolific did not answer, or failed; try again"}},
)
researcher = require("researcher", "admin")


class TokenIn(BaseModel):
    token: str = Field(min_length=1, max_length=500, description="The API token from Prolific's settings")


@router.put("/prolific/token", response_model=None)
def put_token(body: TokenIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Keep your Prolific API token (sealed at rest), once Prolific has said whose it is (422
    for a token it refuses)."""
    account = service.store_token(session, session.merge(user), body.token)
    return {"platform": account.platform, "account": account.account_name}


@router.get("/prolific/account", response_model=None)
def get_account(session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Whose Prolific account your stored token opens, asked of Prolific now (409: none stored)."""
    return service.check(session, session.merge(user))


class TermsIn(BaseModel):
    reward_cents: int = Field(ge=1, le=1_000_000, description="What one participant is paid, in cents")
    places: int = Field(ge=1, le=100_000, description="How many participants")


def _study_out(row: PlatformStudy) -> dict[str, Any]:
    return {
        "prolific_id": row.external_id,
        "status": row.status,
        "reward_cents": row.reward_cents,
        "places": row.places,
        "total_cost_cents": row.total_cost_cents,
    }


@router.post("/studies/{study_id}/prolific/cost", response_model=None)
def study_cost(
    study_id: Id, body: TermsIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """What the study would cost on Prolific with these terms, fees and tax included (Prolific's
    own figure, in cents of your account's currency); nothing is made."""
    study = managed_study(session, study_id, user)
    total = service.cost(session, study, session.merge(user), body.reward_cents, body.places)
    return {"reward_cents": body.reward_cents, "places": body.places, "total_cost_cents": total}


@router.post("/studies/{study_id}/prolific", status_code=201, response_model=None)
def make_study(
    study_id: Id, body: TermsIn, request: Request, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Make the study on Prolific as a draft (unpublished): its URL the study's Prolific entry
    link, its completion code the study's, priced first (`total_cost_cents`). 409 when it is
    there already."""
    from app.studies.views import entry_base

    study = managed_study(session, study_id, user)
    link = platform("prolific").entry_link(entry_base(request), study.slug)
    return _study_out(service.create_study(session, study, session.merge(user), body.reward_cents, body.places, link))


class TransitionIn(BaseModel):
    action: Literal["publish", "pause", "start", "stop"]


@router.post("/studies/{study_id}/prolific/transition", response_model=None)
def move_study(
    study_id: Id, body: TransitionIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Publish, pause, start again or stop the study on Prolific (publish and start: the study
    must be live here)."""
    study = managed_study(session, study_id, user)
    return _study_out(service.transition(session, study, session.merge(user), body.action))


class ReviewsIn(BaseModel):
    rejection_category: Literal[REJECTION_CATEGORIES] = "FAILED_CHECK"  # type: ignore[valid-type]


@router.post("/studies/{study_id}/prolific/reviews", response_model=None)
def carry_reviews(
    study_id: Id, body: ReviewsIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Carry the review queue's decisions to Prolific: approve the submissions of workers
    approved here, reject those rejected here (their reason in Prolific's message). Only
    submissions awaiting review there are touched: running it again changes nothing."""
    study = managed_study(session, study_id, user)
    return service.carry_reviews(session, study, session.merge(user), body.rejection_category)


class BonusIn(BaseModel):
    worker_id: str = Field(min_length=1, max_length=255, description="The worker's Prolific id (PROLIFIC_PID)")
    amount_cents: int = Field(ge=1, le=1_000_000)
    key: str = Field(
        min_length=1, max_length=64, description="Names this bonus: a retry with the same key never pays again"
    )
    reason: str = Field("", max_length=1000)


def _bonus_out(b: BonusPayment) -> dict[str, Any]:
    return {
        "key": b.key,
        "worker_id": b.worker_id,
        "amount_cents": b.amount_cents,
        "state": b.state,
        "prolific_id": b.external_id,
        "paid_at": b.paid_at,
    }


@router.post("/studies/{study_id}/prolific/bonuses", response_model=None)
def pay_bonus(
    study_id: Id, body: BonusIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Pay a worker of the study a bonus, at most once per `key`: a retry (after a timeout, a
    crash, a 502) takes up where the bonus stood and never pays twice. 409 while a payment sent
    is not yet shown by Prolific (it is not sent again)."""
    study = managed_study(session, study_id, user)
    bonus = service.pay_bonus(
        session, study, session.merge(user), body.worker_id, body.amount_cents, body.key, body.reason
    )
    return _bonus_out(bonus)


class BlockIn(BaseModel):
    worker_id: str = Field(min_length=1, max_length=255, description="The worker's Prolific id (PROLIFIC_PID)")
    reason: str = Field("", max_length=1000)


@router.post("/studies/{study_id}/prolific/blocks", response_model=None)
def block_worker(
    study_id: Id, body: BlockIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Block a worker of the study: they join your block list on Prolific (a participant group),
    which the studies you make there afterwards exclude. Blocking twice adds them once."""
    study = managed_study(session, study_id, user)
    blocked = service.block_worker(session, study, session.merge(user), body.worker_id, body.reason)
    return {"worker_id": blocked.worker_id, "blocked_at": blocked.created_at}


@router.post("/studies/{study_id}/prolific/reclaim", response_model=None)
def reclaim(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Read the study's submissions on Prolific: each one returned or timed out ends its
    worker's task here, and the item they held goes back to the pool at once."""
    study = managed_study(session, study_id, user)
    return {"freed": service.reclaim(session, study, session.merge(user))}


class MessageIn(BaseModel):
    worker_id: str = Field(min_length=1, max_length=255, description="The worker's Prolific id (PROLIFIC_PID)")
    body: str = Field(min_length=1, max_length=service.MAX_MESSAGE)


@router.post("/studies/{study_id}/prolific/messages", response_model=None)
def message_worker(
    study_id: Id, body: MessageIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Send a worker of the study a message on Prolific (the study its reason)."""
    study = managed_study(session, study_id, user)
    service.message_worker(session, study, session.merge(user), body.worker_id, body.body)
    return {"worker_id": body.worker_id.strip(), "sent": True}


@router.get("/studies/{study_id}/prolific/workers", response_model=None)
def workers(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """The study's Prolific workers, each with their submission, their review here and their
    record on this instance (studies, gold, reviews, pay, speed), as the review page shows
    them; no worker when the study is not on Prolific. Asks nothing of Prolific."""
    study = managed_study(session, study_id, user)
    work = {w: (sub, status) for w, sub, status, _ in service.prolific_work(session, study)}  # their last bundle
    record = service.records(session, sorted(work))
    return {
        "on_prolific": service.platform_study(session, study) is not None,
        "workers": [
            {"worker_id": w, "submission": sub, "status": status, "record": record[w]}
            for w, (sub, status) in work.items()
        ],
    }


class AllowIn(BaseModel):
    """The rule that feeds your allow list from the workers' records on this instance."""

    enabled: bool = Field(True, description="False: no allow list for the studies you make next")
    min_gold_accuracy: float = Field(0.8, ge=0, le=1, description="Gold accuracy at least this (a fraction)")
    min_gold_items: int = Field(5, ge=0, le=100_000, description="Over at least this many gold items")
    no_rejections: bool = Field(True, description="No review of theirs rejected here")
    min_median_seconds: float = Field(
        0.0, ge=0, le=86_400, description="A median of at least this many seconds per item (0: no speed term)"
    )
    max_fast_share: float = Field(
        1.0, ge=0, le=1, description="At most this share of their items answered implausibly fast (1: any)"
    )


@router.put("/prolific/allow-list", response_model=None)
def put_allow_list(body: AllowIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Keep an allow list on Prolific (a participant group) of the workers whose records here
    meet the rule, and admit only them to the studies you make there next (it is brought up to
    date as each is made). `members`: who is on it now."""
    rule = service.allow_rule(
        body.min_gold_accuracy, body.min_gold_items, body.no_rejections, body.min_median_seconds, body.max_fast_share
    )
    return service.set_allow_rule(session, session.merge(user), rule if body.enabled else None)


@router.post("/prolific/hooks", response_model=None)
def subscribe_hooks(
    request: Request, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Have Prolific call this instance whenever a submission of yours is returned or times out,
    so its slot is free here at once (the sweeper's polling, every minute, stays as the net)."""
    from app.studies.views import entry_base

    return service.subscribe_hooks(session, session.merge(user), entry_base(request))


# Prolific's hooks carry no session and no token: their signature is what is checked.
hooks_router = APIRouter(prefix="/api/v1", tags=["prolific"])


@hooks_router.post(
    "/prolific/hooks/{account_id}",
    response_model=None,
    responses={401: {"model": ErrorOut, "description": "The signature does not match"}},
)
async def receive_hook(account_id: Id, request: Request, session: Session = Depends(db)) -> dict[str, Any]:
    """Where Prolific sends a researcher's hooks (POST /api/v1/prolific/hooks subscribes): a
    submission returned or timed out frees its slot at once. Checked against the signature
    Prolific documents; a hook delivered twice frees nothing more."""
    body = await request.body()
    return {"freed": service.receive_hook(session, account_id, request.headers, body)}
