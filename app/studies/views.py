"""Pages: the worker's task (consent, items, completion) and the researcher's studies."""

from __future__ import annotations

import json
import secrets
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any, cast

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import crowd, jobs, jsonsafe
from app.agents.models import Agent, AgentOutput
from app.auth.deps import Managed, db, managed_study, managing, require, verify_csrf
from app.auth.models import User
from app.config import get_settings
from app.db import get_sessionmaker
from app.errors import InputError
from app.kinds import all_kinds, default_kind, get_kind
from app.leaderboards.plot import leaderboard_plots
from app.leaderboards.service import compute
from app.params import MAX_ID, FormText, Id
from app.storage import get_store
from app.studies import assignment, comprehension, hotpath, preview, services
from app.studies.models import Assignment, Bundle, Item, Study
from app.web import back, rate_limit, read_upload, render, wants_json
from app.studies.consent import consent_details, consent_text, consent_version

if TYPE_CHECKING:
    from app.kinds.base import ImportResult, TaskKind
    from app.storage import BlobStore
    from app.studies.hotpath import Lease, Stored, StudyConf

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])


class PeopleSampleForm(BaseModel):
    """The people-sample card, as typed: n items, or a target interval width and the judge's
    agreement with people; all blank: every item."""

    n: str = ""
    width: str = ""
    agreement: str = ""


researcher = require("researcher", "admin")
own_study = managing(researcher, "No such study among yours.")


# ---- the worker's side -------------------------------------------------------------------

NOT_ENTERED = "Open this study from the link on your crowdsourcing platform."


def crowd_bundle(request: Request, session: Session, slug: str) -> tuple[Study, Bundle]:
    """The study and the bundle this browser's worker entered it with; only the browser that
    opened the bundle (its secret) gets it, whatever session cookie comes along."""
    from app.auth.views import presented_browser

    study = session.scalar(select(Study).where(Study.slug == slug))
    bundle_id = request.session.get("crowd", {}).get(slug)
    bundle = session.get(Bundle, bundle_id) if study is not None and bundle_id is not None else None
    if bundle is None:
        raise HTTPException(403, NOT_ENTERED)
    assert study is not None  # no bundle without it (above)
    # Bound at consent: a bundle not consented to is any of its worker's browsers' to open.
    if (
        bundle.consented_at is not None
        and bundle.browser_hash is not None
        and presented_browser(request) != bundle.browser_hash
    ):
        raise HTTPException(403, assignment.other_browser(study))
    return study, bundle


def wait_message(kind: TaskKind, settings: dict[str, Any] | None = None) -> str:
    """Why a task waits, in the kind's words (questions, episodes, procedures...)."""
    items = kind.item_word(2, settings)
    return (
        f"No {kind.item_word(1, settings)} is free for you right now: the remaining {items} are being "
        "answered by other people, and some come back when their time runs out. This page checks "
        "again by itself; you can also come back in a few minutes."
    )


PAUSED_MESSAGE = (
    "The researcher has paused this study for now. Everything you sent is saved. "
    "This page checks again by itself and goes on when the study does; you can also "
    "come back later."
)


def retry_after(seconds: int) -> int:
    """How soon a waiting worker asks again: when the first lease may run out, but at least every
    30 s (a holder who answers can end the wait sooner) and not more often than every 5 s."""
    return min(max(seconds, 5), 30)


def done_context(
    study: Study | StudyConf, bundle: Bundle | SimpleNamespace, remembered: Mapping[str, Any]
) -> dict[str, Any]:
    """The completion code, plus the way back to the worker's platform (app/crowd), once the
    bundle's required items are done; otherwise no code, and why, in plain words. `remembered`
    is the worker's signed session: the platform they entered from, and what it kept then."""
    earned = services.code_earned(bundle)
    place = crowd.platform(remembered.get("platform"))
    # The hot path's StudyConf has the study's completion_code too, all that completion_code reads of it.
    code = services.completion_code(cast(Study, study), bundle, place.name) if earned else None
    return {
        "code": code,
        "complete": earned,
        "message": None
        if earned
        else (
            f"This study has no more {get_kind(study.kind).item_word(2, study.kind_settings)} for you, so your task "
            f"ended after {bundle.n_done} of {bundle.size}. A completion code is given only for a complete "
            f"task, so there is none for this one. Please return the task on {place.label or 'your platform'}; if "
            f"you think you should be paid for the answers you gave, contact the researcher."
        ),
        **place.way_back(study.redirect_url, code, remembered),
        "mturk_assignment_id": bundle.external_assignment_id,
    }


def fast_end(
    request: Request, conf: StudyConf, bundle_id: int, stored: Stored
) -> tuple[StudyConf, SimpleNamespace, dict[str, Any]]:
    """The end of a bundle the hot path just closed (and reviewed), as the engine's end shows
    it, from the answer's own statement and the study's texts of `conf`, the version that
    statement checked: (study, bundle, done_context)."""
    bundle = SimpleNamespace(
        id=bundle_id, n_done=stored.n_done, size=stored.size, external_assignment_id=stored.external_assignment_id
    )
    return (
        conf,
        bundle,
        done_context(conf, bundle, request.session),
    )


def _consent_page(
    request: Request, study: Study, bundle: Bundle, status_code: int = 200, error: str | None = None
) -> Response:
    return render(
        request,
        "annotate/consent.html",
        status_code=status_code,
        study=study,
        bundle=bundle,
        kind=get_kind(study.kind),
        consent=consent_text(study),
        details=consent_details(study),
        consent_version=consent_version(study),
        error=error,
    )


@router.get("/task/{slug}")
def task(request: Request, slug: str) -> Response:
    fast = _fast_task(request, slug)  # no Session in the common case (app/studies/hotpath.py)
    if fast is not None:
        return fast
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _task_page(request, session, slug)


def fast_lease(request: Request, slug: str) -> tuple[StudyConf, int, Lease] | None:
    """(the cached study, the bundle's id, its current lease) from one statement (app/studies/hotpath.py), for
    the task page and the crowd API; None: the engine's path."""
    url = request.app.state.database_url
    bundle_id = request.session.get("crowd", {}).get(slug)
    if not hotpath.enabled(url) or not isinstance(bundle_id, int):
        return None
    conf = hotpath.study(url, slug)
    if conf is None:
        return None
    from app.auth.views import presented_browser

    lease = hotpath.next_lease(url, conf, bundle_id, presented_browser(request))
    return None if lease is None else (conf, bundle_id, lease)


def _fast_task(request: Request, slug: str) -> Response | None:
    """The item page from one statement; None: the engine's path."""
    got = fast_lease(request, slug)
    if got is None:
        return None
    conf, bundle_id, lease = got
    kind = get_kind(conf.kind)
    return render(
        request,
        "annotate/item.html",
        study=conf,
        bundle=SimpleNamespace(id=bundle_id, size=lease.size, n_done=lease.n_done),
        assignment=SimpleNamespace(id=lease.assignment_id, slot=lease.slot),
        kind=kind,
        payload=kind.public_payload(lease.payload),
        idempotency_key=uuid.uuid4().hex,
    )


def task_state(session: Session, study: Study, bundle: Bundle) -> tuple[Assignment | None, int | None, str]:
    """What a consented task shows now, on the page and in the API alike: (its lease, None, ""),
    (None, seconds, why) to wait and ask again, or (None, None, "") at its end. A finished task
    shows its end even once the study closed; a pause is a wait (often right after the
    worker's answer was stored), not a refusal."""
    if bundle.finished_at is not None:
        return None, None, ""
    if study.state == "paused":  # the item in hand may still be answered (assignment.submit)
        held = assignment.held_lease(session, bundle.id)
        return (held, None, "") if held is not None else (None, 30, PAUSED_MESSAGE)
    current, wait = assignment.lease_or_wait(session, study, bundle.id)
    return current, wait, wait_message(get_kind(study.kind), study.kind_settings) if wait is not None else ""


def _check_page(
    request: Request, session: Session, study: Study, bundle: Bundle, outcome: str = "", status_code: int = 200
) -> Response:
    return render(
        request,
        "annotate/check.html",
        status_code=status_code,
        study=study,
        bundle=bundle,
        questions=comprehension.public(study.comprehension or []),
        attempts_left=comprehension.ATTEMPTS - comprehension.failures(session, study.id, bundle.worker_id),
        outcome=outcome,
        place=crowd.platform(request.session.get("platform")),
    )


def _task_page(request: Request, session: Session, slug: str, refused: str = "") -> Response:
    study, bundle = crowd_bundle(request, session, slug)
    if bundle.consented_at is None:
        return _consent_page(request, study, bundle)
    check = comprehension.status(session, study, bundle)
    if check == "failed":
        if bundle.finished_at is None:  # failed in an earlier task: this one ends too
            assignment.give_back(session, bundle.id)
            session.refresh(bundle)
        return _check_page(request, session, study, bundle, "failed")
    if check == "needed":
        return _check_page(request, session, study, bundle)
    current, wait, message = task_state(session, study, bundle)
    if wait is not None:
        seconds = retry_after(wait)
        response = render(
            request, "annotate/wait.html", study=study, bundle=bundle, retry_after=seconds, message=message
        )
        response.headers["Retry-After"] = str(seconds)
        return response
    if current is None:
        if bundle.finished_at is None:
            assignment.finish_early(session, bundle.id)
        session.refresh(bundle)
        return render(
            request,
            "annotate/done.html",
            study=study,
            bundle=bundle,
            kind=get_kind(study.kind),
            **done_context(study, bundle, request.session),
        )
    item = session.get(Item, current.item_id)
    assert item is not None  # a lease's item (a foreign key)
    kind = get_kind(study.kind)
    return render(
        request,
        "annotate/item.html",
        status_code=422 if refused else 200,
        study=study,
        bundle=bundle,
        assignment=current,
        kind=kind,
        payload=kind.public_payload(item.payload),
        idempotency_key=uuid.uuid4().hex,
        refused=refused,
    )


def fast_consent(request: Request, slug: str, shown: str) -> bool:
    """Consent in one statement on PostgreSQL (app/studies/hotpath.py); False: the engine's
    path (SQLite, consent given before, a changed text, another browser, not entered)."""
    from app.auth.views import presented_browser

    url = request.app.state.database_url
    bundle_id = request.session.get("crowd", {}).get(slug)
    if not hotpath.enabled(url) or not isinstance(bundle_id, int):
        return False
    info = hotpath.study(url, slug)
    browser = presented_browser(request)
    return info is not None and hotpath.consent(url, info, bundle_id, shown, browser)


@router.post("/task/{slug}/consent")
def consent(request: Request, slug: str, consent_version: FormText = "") -> Response:
    if fast_consent(request, slug, consent_version):
        return RedirectResponse(f"/task/{slug}", status_code=303)
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _consent(request, session, slug, consent_version)


def _consent(request: Request, session: Session, slug: str, consent_version: str) -> Response:
    from app.auth.views import presented_browser

    study, bundle = crowd_bundle(request, session, slug)
    try:
        assignment.consent(session, study, bundle.id, consent_version, presented_browser(request))
    except assignment.NotAvailable as exc:
        if exc.status != 409:
            raise  # another browser holds the worker's task, or a cap: the refusal's page
        # The text changed while the page was open: show the new one to agree to.
        session.refresh(study)
        return _consent_page(request, study, bundle, status_code=exc.status, error=str(exc))
    return RedirectResponse(f"/task/{slug}", status_code=303)


@router.post("/task/{slug}/check")
async def check(request: Request, slug: str) -> Response:
    """One attempt at the study's comprehension check: on to the first item, a second
    attempt, or (the second failed) the task ended and the worker asked to return the study."""
    rate_limit(request, "submit", get_settings().rate_limit_submit)
    if request.session.get("crowd", {}).get(slug) is None:
        raise HTTPException(403, NOT_ENTERED)
    form = dict(await request.form())
    with get_sessionmaker(request.app.state.database_url)() as session:
        study, bundle = crowd_bundle(request, session, slug)
        if bundle.consented_at is None:
            return _consent_page(request, study, bundle)
        outcome = comprehension.attempt(session, study, bundle, {k: v for k, v in form.items() if isinstance(v, str)})
        if outcome == "passed":
            return RedirectResponse(f"/task/{slug}", status_code=303)
        session.refresh(bundle)
        return _check_page(request, session, study, bundle, outcome, status_code=422)


@router.post("/task/{slug}/answer")
async def answer(request: Request, slug: str) -> Response:
    rate_limit(request, "submit", get_settings().rate_limit_submit)
    if request.session.get("crowd", {}).get(slug) is None:  # refused before the body is read
        raise HTTPException(403, NOT_ENTERED)
    form = dict(await request.form())
    try:
        # A text field (a file sent under that name fails int() with a TypeError).
        assignment_id = int(cast(str, form.pop("assignment_id", "")))
    except (ValueError, TypeError):
        raise InputError("missing assignment", field="assignment_id") from None
    if not 1 <= assignment_id <= MAX_ID:  # past 64 bits SQLite's driver raised OverflowError: a 500
        raise InputError("no such assignment", field="assignment_id")
    key = str(form.pop("idempotency_key", ""))
    form.pop("csrf_token", None)
    client = {"user_agent": request.headers.get("user-agent", "")[:200]}
    # The page's script (static/app.js) asks for JSON: it needs only to know the answer was
    # taken, then opens the task's address; a refusal of the answer is then never confused
    # with one of the next page (a study paused meanwhile).
    inline = wants_json(request)

    def store_and_show() -> Response:
        # The answer, then the next item's page in the same request: one annotation, one
        # request (the page puts /task/<slug> back in the address bar: static/app.js).
        url = request.app.state.database_url
        bundle_id = request.session.get("crowd", {}).get(slug)
        stored = None
        if hotpath.enabled(url) and isinstance(bundle_id, int):
            from app.auth.views import presented_browser

            conf = hotpath.study(url, slug)
            browser = presented_browser(request)
            if conf is not None:
                stored = hotpath.submit(url, conf, bundle_id, assignment_id, form, key, client, browser)
                if stored is not None and inline:
                    return Response(status_code=204)
                # The answer that ended the task: its end from the statement, as the API's.
                if stored is not None and stored.ended:
                    shown, ended, done = fast_end(request, conf, bundle_id, stored)
                    return render(
                        request, "annotate/done.html", study=shown, bundle=ended, kind=get_kind(shown.kind), **done
                    )
        with get_sessionmaker(url)() as session:  # a connection only if the engine is needed
            if stored is None:
                study, bundle = crowd_bundle(request, session, slug)
                assignment.submit(session, study, bundle.id, assignment_id, form, key, client)
                if inline:
                    return Response(status_code=204)
                session.expire_all()  # the bundle moved on: read it afresh for the next page
            return _fast_task(request, slug) or _task_page(request, session, slug)

    try:
        return await run_in_threadpool(store_and_show)
    except InputError as exc:
        if inline:
            raise  # the page's script shows it beside the form (static/app.js)
        # Without the script: the same item again, its lease kept, the refusal beside it.
        refused = str(exc)

        def again() -> Response:
            with get_sessionmaker(request.app.state.database_url)() as session:
                return _task_page(request, session, slug, refused=refused)

        return await run_in_threadpool(again)


# ---- the researcher's side ---------------------------------------------------------------


def _recent_exports(session: Session, study: Study) -> Sequence[jobs.Job]:
    """The study's latest export jobs, for the exports card (a kind's runs show in its own)."""
    return session.scalars(
        select(jobs.Job)
        .where(jobs.Job.study_id == study.id, jobs.Job.task == "export")
        .order_by(jobs.Job.id.desc())
        .limit(10)
    ).all()


def _study(session: Session, study_id: int, user: User) -> Study:
    return managed_study(session, study_id, user, "No such study among yours.")


@router.get("/studies")
def studies(request: Request, session: Session = Depends(db), user: User = Depends(researcher)) -> Response:
    q = select(Study).order_by(Study.id.desc())
    if user.role != "admin":
        q = q.where(Study.owner_id == user.id)
    return render(request, "research/studies.html", user=user, studies=session.scalars(q).all())


@router.get("/studies/new")
def new_study(request: Request, user: User = Depends(researcher)) -> Response:
    return render(request, "research/new_study.html", user=user, kinds=all_kinds(), form={}, preview=None)


#: The plan's form fields (the same names as `proctor plan`'s options, with underscores).
PLAN_FIELDS = (
    "scores",
    "agents",
    "items",
    "annotations",
    "error",
    "difference",
    "judge_agreement",
    "people",
    "payment",
)


@router.post("/studies/new/plan")
async def plan_study(request: Request, session: Session = Depends(db), user: User = Depends(researcher)) -> Response:
    """The new-study page's plan (htmx): a fragment with the simulated half-widths, power and
    cost (app/leaderboards/plan.py), or the refusal naming its field (422). With no error
    entered, the workers' error is 1 - the gold accuracy of the researcher's past studies of
    the form's kind (an admin's: everyone's), where there is one."""
    from app.leaderboards import plan
    from app.leaderboards.api import PLANS_PER_MINUTE

    rate_limit(request, "study-plan", PLANS_PER_MINUTE, key=f"user:{user.id}")  # seconds of CPU each
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str) and k in (*PLAN_FIELDS, "studies", "seed", "kind")}
    past = None
    if not fields.get("error", "").strip() and fields.get("kind") in all_kinds():
        from app.quality.service import past_gold_accuracy

        past = past_gold_accuracy(session, fields["kind"], None if user.role == "admin" else user.id)
        if past is not None:  # an accuracy under a coin's is a coin's: the plan's error is at most 0.5
            fields["error"] = str(min(0.5, 1.0 - past["accuracy"]))
    try:
        made = plan.make_input(
            scores=fields.get("scores", ""),
            agents=fields.get("agents"),
            items=fields.get("items", ""),
            annotations=fields.get("annotations") or 3,
            error=fields.get("error"),
            difference=fields.get("difference"),
            judge_agreement=fields.get("judge_agreement"),
            people=fields.get("people"),
            payment=fields.get("payment"),
            studies=fields.get("studies") or 500,
            seed=fields.get("seed") or 0,
        )
    except InputError as exc:
        return render(request, "research/_plan.html", status_code=422, error=str(exc), result=None)
    result = await run_in_threadpool(plan.run_plan, made)
    return render(
        request, "research/_plan.html", result=result, lines=plan.summary_lines(result), error=None, past=past
    )


@router.post("/studies/new")
async def create_study(request: Request, session: Session = Depends(db), user: User = Depends(researcher)) -> Response:
    form = await request.form()
    fields = {k: v for k, v in form.items() if not hasattr(v, "filename")}
    kind_name = fields.get("kind") or default_kind()
    if kind_name not in all_kinds():
        raise InputError(f"unknown task kind {kind_name!r}", field="kind")
    fmt = fields.get("format") or get_kind(kind_name).item_formats[0]
    upload_token = fields.get("upload_token", "")
    store = get_store()
    upload = form.get("file")
    try:
        if upload is not None and getattr(upload, "filename", None):
            data = await read_upload(cast(UploadFile, upload))  # a file: it has a name
            upload_token = _keep_upload(store, user.id, data)
        elif upload_token and upload_token.isalnum() and store.exists(f"uploads/{user.id}/{upload_token}"):
            data = store.get(f"uploads/{user.id}/{upload_token}")
        else:
            raise InputError("choose a file to upload", field="file")
        options = kind_options(get_kind(kind_name), fields, prefixed=True)
        if fields.get("action") == "preview":
            result = services.preview_items(kind_name, data, fmt, options)
            return render(
                request,
                "research/new_study.html",
                user=user,
                kinds=all_kinds(),
                form={**fields, "kind": kind_name, "upload_token": upload_token},
                preview=result,
                fill_warning=_fill_warning(result, fields),
                worker_views=preview.upload_views(get_kind(kind_name), result, fields.get("title", "")),
            )
        settings = services.parse_settings(
            {k: v for k, v in fields.items() if k in services.StudySettings.model_fields and v != ""}
        )
        study = services.create_study(session, user, kind_name, settings, data, fmt, options)
        _drop_upload(store, user.id, upload_token)
    except InputError as exc:
        kind = get_kind(kind_name)
        if exc.field in kind.option_fields:
            # The importer names its option; the form sent it as "<kind>.<option>".
            exc.field = option_field(kind, exc.field)
        if exc.field not in FORM_FIELDS | {option_field(kind, name) for name in kind.option_fields}:
            # The file was refused: offering it again would only repeat the refusal.
            if upload_token and upload_token.isalnum():
                store.delete(f"uploads/{user.id}/{upload_token}")
            upload_token = ""
        return render(
            request,
            "research/new_study.html",
            status_code=422,
            user=user,
            kinds=all_kinds(),
            form={**fields, "upload_token": upload_token},
            preview=None,
            error=str(exc),
        )
    warning = services.study_fill_warning(session, study)
    return back(
        request,
        f"/studies/{study.id}",
        "Study created with its items. " + (f"Before launching: {warning}" if warning else "Launch it when ready."),
        "warn" if warning else "ok",
    )


def _keep_upload(store: BlobStore, user_id: int, data: bytes) -> str:
    """Keeps a new file for the create that follows its preview, under a fresh token, in place
    of the researcher's previous one: one kept upload each, not one per preview (the store has
    no listing to sweep them by, and every preview would stay for good)."""
    token = secrets.token_hex(12)
    latest = f"uploads/{user_id}/latest"
    if store.exists(latest):
        _drop_upload(store, user_id, store.get(latest).decode("ascii", "replace"))
    store.put(f"uploads/{user_id}/{token}", data)
    store.put(latest, token.encode())
    return token


def _drop_upload(store: BlobStore, user_id: int, token: str) -> None:
    """The kept file is done with (its study made, or replaced)."""
    if token and token.isalnum():
        store.delete(f"uploads/{user_id}/{token}")
    store.delete(f"uploads/{user_id}/latest")


def _fill_warning(result: ImportResult, fields: Mapping[str, Any]) -> str | None:
    """The preview's warning when its tasks cannot all be completed (services.fill_warning),
    with the form's settings and the upload's suggestions for those left blank."""
    try:
        settings = services.parse_settings(
            {"title": "-", **{k: v for k, v in fields.items() if k in services.StudySettings.model_fields and v != ""}}
        )
    except InputError:
        return None  # the create button says what is wrong with them
    return services.fill_warning(result.items, services.with_defaults(settings, result.study_defaults))


# The new-study form's own fields: an error naming one of these is about the form, not the file.
FORM_FIELDS = set(services.StudySettings.model_fields) | {"kind", "format"}


def kind_options(kind: TaskKind, fields: Mapping[str, Any], *, prefixed: bool = False) -> dict[str, Any]:
    """The options the kind's importer takes from the form (TaskKind.option_fields), checked:
    numbers within their bounds, texts stripped; blank fields are left out. The new-study form
    names a field "<kind>.<option>" (`prefixed`): kinds share option names, e.g. gold_count, and
    a page without JavaScript sends every kind's fieldset, so the form reads only the chosen
    kind's. The API takes the plain names. A refusal names the field as the caller sent it."""
    options: dict[str, Any] = {}
    for name, spec in kind.option_fields.items():
        sent = option_field(kind, name) if prefixed else name
        raw = str(fields.get(sent, "") or "").strip()
        if not raw:
            continue
        if spec[0] == "text":
            options[name] = raw
            continue
        cast, lo, hi = {"float": float, "int": int}[spec[0]], spec[1], spec[2]
        try:
            value = cast(raw)
        except ValueError:
            raise InputError(f"not a number: {raw!r}", field=sent) from None
        if not lo <= value <= hi:
            raise InputError(f"must be between {lo} and {hi}", field=sent)
        options[name] = value
    return options


def option_field(kind: TaskKind, name: str) -> str:
    """The new-study form's name for a kind's option."""
    return f"{kind.name}.{name}"


def entry_base(request: Request) -> str:
    """Where workers reach this server: BASE_URL when set, else the scheme, host and port this
    request came by (behind a proxy in TRUSTED_PROXIES, those it forwarded: app/main.py)."""
    return get_settings().base_url.rstrip("/") or str(request.base_url).rstrip("/")


def only_this_machine(base: str) -> bool:
    """Links on `base` reach only the machine they are opened on: localhost, a loopback
    address, or 0.0.0.0."""
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(base).hostname or "").rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


@router.get("/studies/{study_id}")
def study_page(request: Request, own: Managed = Depends(own_study)) -> Response:
    return _study_page(request, own.session, own.study, own.user)


def _study_page(
    request: Request,
    session: Session,
    study: Study,
    user: User,
    status_code: int = 200,
    errors: dict[str, str] | None = None,
    prolific_quote: dict[str, int] | None = None,
) -> Response:
    """The study page; `errors` puts a refusal in the card of the form that caused it (the
    researcher sees it where they were, in the site's layout, with the file input empty);
    `prolific_quote`, Prolific's price for the terms asked (app/crowd/views.py)."""
    from app.crowd.panels import panel

    agents = session.execute(
        select(Agent, func.count(AgentOutput.id))
        .join(AgentOutput, AgentOutput.agent_id == Agent.id)
        .where(AgentOutput.study_id == study.id)
        .group_by(Agent.id)
    ).all()
    my_agents = session.scalars(select(Agent).where(Agent.kind == study.kind, Agent.owner_id == user.id)).all()
    base = entry_base(request)
    exports = _recent_exports(session, study)
    return render(
        request,
        "research/study.html",
        status_code=status_code,
        errors=errors or {},
        user=user,
        study=study,
        agents=agents,
        my_agents=my_agents,
        exports=exports,
        store=get_store(),
        kind=get_kind(study.kind),
        adaptive_offered=services.adaptive_offered(get_kind(study.kind), study.kind_settings),
        comprehension_text=comprehension.as_text(study.comprehension),
        auto_pause=_auto_pause_card(session, study),
        plan_defaults=_plan_defaults(session, study),
        **get_kind(study.kind).study_context(session, study),
        progress=assignment.progress(session, study),
        prolific={**panel(session, study, user), "quote": prolific_quote},
        links={
            **{p.name: p.entry_link(base, study.slug) for p in crowd.PLATFORMS},
            "base": base,
            "only_here": only_this_machine(base),
        },
    )


def _refused(request: Request, own: Managed, card: str, message: str, status_code: int = 422) -> Response:
    """A form's refusal in its card of the study page; what the form had written is undone."""
    own.session.rollback()
    return _study_page(request, own.session, own.study, own.user, status_code, {card: message})


@router.get("/studies/{study_id}/preview")
def preview_page(
    request: Request,
    study_id: Id,
    n: int | None = Query(None, ge=1, le=MAX_ID),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    """The worker's pages for each item in upload order (n, from 1), storing nothing; without
    n, the consent and instructions a worker reads first (app.studies.preview)."""
    return _preview_page(request, session, _study(session, study_id, user), user, n)


def _preview_page(
    request: Request,
    session: Session,
    study: Study,
    user: User,
    n: int | None,
    status_code: int = 200,
    error: InputError | None = None,
) -> Response:
    kind = get_kind(study.kind)
    total = preview.count(session, study)
    context: dict[str, Any] = {"kind": kind, "total": total, "position": n, "item": None}
    if n is None:
        context.update(
            consent=consent_text(study),
            details=consent_details(study),
            # The comprehension check a worker takes before the first item, as they see it,
            # and its right answers for the researcher.
            check=comprehension.public(study.comprehension or []),
            check_answers=[q["answer"] for q in study.comprehension or []],
        )
    elif n <= total:
        context.update(preview.page_context(session, study, n))
    return render(
        request,
        "research/preview.html",
        status_code=status_code,
        user=user,
        study=study,
        error=str(error) if error else None,
        error_field=error.field if error else None,
        **context,
    )


@router.post("/studies/{study_id}/preview")
async def preview_answer(request: Request, own: Managed = Depends(own_study)) -> Response:
    """Check a preview answer with the kind's parse_response, as a worker's submit would, then
    move on; a refusal shows on the item, as the worker would meet it. Nothing is stored."""
    session, study = own.session, own.study
    form = dict(await request.form())
    form.pop("csrf_token", None)
    try:
        n = int(str(form.pop("n", "")))
    except ValueError:
        raise InputError("which item is this an answer to? (n)", field="n") from None
    if not 1 <= n <= preview.count(session, study):
        raise InputError(f"this study has no item {n}", field="n")
    try:
        checked = preview.check_answer(session, study, n, form)
    except InputError as exc:
        return _preview_page(request, session, study, own.user, n, status_code=422, error=exc)
    score = checked["score"]
    return back(
        request,
        f"/studies/{study.id}/preview?n={n + 1}",
        f"Item {n}: the answer was accepted"
        + (f" and scores {score:g}" if score is not None else " (no reference to score it against)")
        + ". Nothing was stored.",
    )


@router.get("/studies/{study_id}/progress")
def study_progress(request: Request, own: Managed = Depends(own_study)) -> Response:
    progress = assignment.progress(own.session, own.study)
    return render(request, "research/_progress.html", study=own.study, progress=progress)


@router.get("/studies/{study_id}/exports")
def study_exports(request: Request, own: Managed = Depends(own_study)) -> Response:
    """The exports card alone (it polls itself while an export is going)."""
    exports = _recent_exports(own.session, own.study)
    return render(request, "research/_exports.html", study=own.study, exports=exports, store=get_store())


@router.post("/studies/{study_id}/state")
def change_state(
    request: Request,
    study_id: Id,
    state: str = Form(...),
    confirm: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    study = _study(session, study_id, user)
    if state == "closed" and confirm != "close" and state in services.TRANSITIONS.get(study.state, ()):
        # Closing cuts off workers mid-task: the page says so and asks again (no JS needed).
        return render(
            request, "research/confirm_close.html", user=user, study=study, progress=assignment.progress(session, study)
        )
    previous = study.state
    services.set_state(session, study, state, session.merge(user))
    return back(
        request,
        f"/studies/{study.id}",
        "The study is open again." if previous == "closed" else f"The study is now {state}.",
    )


@router.post("/studies/{study_id}/release")
def release_browser(request: Request, worker_id: FormText = "", own: Managed = Depends(own_study)) -> Response:
    """Unbind a worker's task from the browser they agreed in (services.release_browser); the
    refusal, for an id with no bound task here, shows in the form's card."""
    session, study = own.session, own.study
    if not worker_id.strip() or len(worker_id) > 255:
        return _refused(request, own, "release", "Give the worker's id as their platform shows it.")
    if not services.release_browser(session, study, worker_id, session.merge(own.user)):
        return _refused(
            request,
            own,
            "release",
            f"No task of a worker {worker_id.strip()!r} in this study is bound to a "
            "browser (they have not agreed yet, or it was released already).",
            404,
        )
    return back(
        request,
        f"/studies/{study.id}#release",
        f"Released: the next browser that opens the link as {worker_id.strip()} continues their task.",
    )


@router.post("/studies/{study_id}/people-sample")
def people_sample(
    request: Request, form: Annotated[PeopleSampleForm, Form()], own: Managed = Depends(own_study)
) -> Response:
    """People judge a random sample of n items, or of the items a target interval width needs
    beside a judge of the given agreement (a power analysis: services.plan_people_sample);
    all blank: every item again. Refusals show in the form's card."""
    from app.web import form_number

    session, study = own.session, own.study
    try:
        count = form_number(form.n, "n")
        w = form_number(form.width, "width", float)
        a = form_number(form.agreement, "agreement", float)
        plan = None
        if w is not None:
            if count is not None:
                raise InputError("give the items people judge or a target width, not both", field="n")
            if a is None:
                raise InputError("a target width needs the judge's agreement with people", field="agreement")
            plan = services.plan_people_sample(session, study, float(w), float(a))
            count = plan["people"]
        services.set_people_sample(
            session, study, None if count is None else int(count), session.merge(own.user), plan=plan
        )
    except InputError as exc:
        return _refused(request, own, "sample", str(exc))
    sample = study.people_sample or {}
    if plan is not None:
        message = (
            f"People now judge a random {sample.get('n')} of the items: a power analysis for a 95% interval "
            f"{plan['width']:g} wide beside a judge agreeing {plan['agreement']:g} of the time "
            f"(expected width {plan['expected_width']:g}"
            + ("" if plan["reachable"] else ": even every item does not reach the target")
            + ")."
        )
    else:
        message = f"People now judge a random {count} of the items." if count else "People now judge every item."
    return back(request, f"/studies/{study.id}#sample", message)


@router.post("/studies/{study_id}/adaptive")
def adaptive(
    request: Request, adaptive: FormText = "", floor: str = Form("1"), own: Managed = Depends(own_study)
) -> Response:
    """Adaptive allocation on (the box ticked) or off, with its floor of annotations per item;
    refusals show in the form's card."""
    from app.web import form_number

    study = own.study
    on = adaptive in ("on", "true", "1")
    try:
        count = form_number(floor, "adaptive_floor")
        edit = services.StudyEdit.model_validate(
            {"adaptive": on, "adaptive_floor": None if count is None else int(count)}
        )
        services.edit_study(own.session, study, edit, own.session.merge(own.user))
    except (InputError, ValidationError) as exc:
        return _refused(request, own, "adaptive", str(exc) if isinstance(exc, InputError) else exc.errors()[0]["msg"])
    return back(
        request,
        f"/studies/{study.id}#adaptive",
        f"Adaptive allocation on: every item gets {study.adaptive_floor} annotation(s) first, then the items "
        "of agents whose place in the ranking is open."
        if on
        else "Adaptive allocation off: items go in the plain order.",
    )


def _auto_pause_card(session: Session, study: Study) -> dict[str, Any] | None:
    """The auto-pause card's content: each pair of the study's agents (a box each, ticked where
    marked) and where the marked ones stand; None where the kind ranks no agents."""
    from app.leaderboards import stopping

    now = stopping.status(session, study)
    names = now["agents"]
    if len(names) < 2 or len(names) > 20:  # 190 boxes at most
        return None if len(names) < 2 else {**now, "choices": []}
    marked = {frozenset(p) for p in study.auto_pause or []}
    choices = [
        {"first": a, "second": b, "value": json.dumps([a, b]), "marked": frozenset((a, b)) in marked}
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]
    return {**now, "choices": choices}


def _plan_defaults(session: Session, study: Study) -> dict[str, Any] | None:
    """The study page's plan card (issue 29.1, for a study running): the plan's form filled
    with this study's own figures, each agent's score so far (its units' first values, as the
    settled table counts them; 0.5 with none yet), items per agent and annotations per item,
    so that "Plan" says what the study as it stands can separate. None where the kind ranks
    fewer than two agents."""
    from app.leaderboards.ranking import item_agents

    kind = get_kind(study.kind)
    ranking = kind.ranking_for(study.kind_settings)
    if ranking is None:
        return None
    owners = Counter(a for a in item_agents(session, study, ranking).values() if a is not None)
    names = sorted(owners)
    if not 2 <= len(names) <= 20:
        return None
    got = kind.ranking_arrivals(session, study) or {}
    scores = []
    for name in names:
        first: dict[Any, float] = {}
        for _, unit, value in got.get(name, []):
            first.setdefault(unit, value)
        scores.append(sum(first.values()) / len(first) if first else 0.5)
    return {
        "agents": names,
        "scores": ", ".join(f"{x:.2f}" for x in scores),
        "per_agent": max(owners.values()),
        "annotations": study.annotations_per_item,
    }


@router.post("/studies/{study_id}/auto-pause")
async def auto_pause(request: Request, own: Managed = Depends(own_study)) -> Response:
    """Mark the comparisons (the boxes ticked) whose settling pauses the study; none: off."""
    from app.leaderboards import stopping

    study = own.study
    form = await request.form()
    try:
        pairs = [jsonsafe.loads(v) for v in form.getlist("pair") if isinstance(v, str)]
        if not all(isinstance(p, list) and all(isinstance(a, str) for a in p) for p in pairs):
            raise InputError("each comparison is two agents", field="pairs")
        stopping.set_marks(own.session, study, pairs, own.user.id)
    except (InputError, json.JSONDecodeError) as exc:
        return _refused(request, own, "auto_pause", str(exc))
    return back(
        request,
        f"/studies/{study.id}#auto-pause",
        f"Auto-pause on: the study pauses itself once the {len(pairs)} marked comparison(s) are settled."
        if pairs
        else "Auto-pause off.",
    )


@router.post("/studies/{study_id}/agents")
async def import_agent(
    request: Request,
    study_id: Id,
    name: str = Form(...),
    version: str = Form("1"),
    file: UploadFile = File(None),
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> Response:
    study = _study(session, study_id, user)
    try:
        data = await read_upload(file)
        agent = services.register_agent(session, session.merge(user), study.kind, name, version or "1")
        n = services.import_agent_outputs(session, study, agent, data)
    except InputError as exc:
        # a new agent's row goes with its refused outputs
        return _refused(request, Managed(session, user, study), "agents", str(exc))
    return back(request, f"/studies/{study.id}", f"Imported {n} outputs for {agent.name} v{agent.version}.")


@router.post("/studies/{study_id}/annotations/import")
async def import_prior_annotations(
    request: Request, source: FormText = "", file: UploadFile = File(None), own: Managed = Depends(own_study)
) -> Response:
    from app.studies.imports import import_annotations

    session, study = own.session, own.study
    try:
        done = import_annotations(session, study, session.merge(own.user), await read_upload(file), source)
    except InputError as exc:
        return _refused(request, own, "prior", str(exc))
    return back(
        request,
        f"/studies/{study.id}",
        f"Imported {done['annotations']} annotations by {done['annotators']} annotators from {done['source']}.",
    )


@router.post("/studies/{study_id}/exports")
def start_export(request: Request, own: Managed = Depends(own_study)) -> Response:
    session, study = own.session, own.study
    jobs.submit(session, jobs.create_job(session, "export", study_id=study.id, owner_id=own.user.id))
    return back(request, f"/studies/{study.id}#jobs", "Export started; the files appear below when it is done.")


ANNOTATORS_ON_PAGE = 50


@router.get("/studies/{study_id}/leaderboard")
def leaderboard(request: Request, own: Managed = Depends(own_study)) -> Response:
    study = own.study
    # The page shows the annotators with the most answers; the export and the API have all.
    board = compute(own.session, study, annotators=(0, ANNOTATORS_ON_PAGE))
    return render(
        request,
        "research/leaderboard.html",
        user=own.user,
        study=study,
        board=board,
        kind=get_kind(study.kind),
        plots=leaderboard_plots(board),
    )


@router.post("/studies/{study_id}/comprehension")
def comprehension_check(
    request: Request, mode: str = Form("none"), questions: FormText = "", own: Managed = Depends(own_study)
) -> Response:
    """The study's comprehension check before the first item: none, the kind's default, or the
    researcher's own questions; refusals show in the form's card."""
    try:
        got = comprehension.set_check(own.session, own.study, own.user.id, mode, questions)
    except InputError as exc:
        return _refused(request, own, "comprehension", comprehension.refusal(exc))
    return back(
        request,
        f"/studies/{own.study.id}#comprehension",
        f"Comprehension check on: {len(got)} question(s) before the first item, two tries."
        if got
        else "No comprehension check: workers start with the first item.",
    )
