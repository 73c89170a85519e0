"""The runs list of a study page (templates/runs/list.html), alone: what htmx polls while a
run goes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session

from app.auth.deps import Managed, db, managed_study, require
from app.auth.models import User
from app.params import Id
from app.runs import service
from app.errors import InputError
from app.web import flash, render

router = APIRouter(include_in_schema=False)


@router.get("/studies/{study_id}/runs")
def study_runs(
    request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(require("researcher", "admin"))
) -> Response:
    study = managed_study(session, study_id, user, "No such study among yours.")
    return render(request, "runs/list.html", **service.study_page_context(session, study))


def section_route(
    router: APIRouter,
    path: str,
    template: str,
    context: Callable[[Session, Any], dict[str, Any]],
    own: Callable[..., Managed],
) -> None:
    """A kind's runs section of the study page, alone: what htmx polls while a run goes."""

    def generations_section(request: Request, loaded: Managed = Depends(own)) -> Response:
        return render(request, template, study=loaded.study, **context(loaded.session, loaded.study))

    router.add_api_route(path, generations_section, methods=["GET"])


def start_from_page(
    request: Request, own: Managed, kind_name: str, params: Callable[[], dict[str, Any]], noun: str, anchor: str
) -> Response:
    """A kind's study-page form starting a run through the one service (as the API's POST
    .../runs does): params() reads the form (None: not given); a refusal is the page's message."""
    try:
        given = {k: v for k, v in params().items() if v is not None}
        run = service.start(own.session, own.session.merge(own.user), kind_name, given, study=own.study)
    except InputError as exc:
        flash(request, f"Not started: {exc}", "error")
    else:
        flash(request, f"{noun} run #{run.id} queued.")
    return RedirectResponse(f"/studies/{own.study.id}#{anchor}", status_code=303)
