"""Pages and API of the navigation kind: the building a follower walks through, panoramas,
a follower's pose trace, and the generation runs of a speaker (start, follow, cancel)."""

from __future__ import annotations

from typing import Annotated


from fastapi import APIRouter, Depends, File, HTTPException, Path, Request, Response, UploadFile
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.deps import Managed, db, managed_study, managing, optional_user, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.navigation import generation
from app.kinds.navigation.environments import SCAN_PATTERN, NotYours, get_graph, view
from app.agents.artifacts import usable_models
from app.kinds.navigation.models import Environment, GenerationRun
from app.kinds.navigation.panoramas import import_panoramas, panorama_urls
from app.kinds.navigation.traces import export_trace
from app.params import Id
from app.runs import service as runs
from app.runs.api import body_schema, start_params
from app.studies.models import Annotation, Bundle, Item, Study
from app.studies.services import can_manage
from app.web import flash, read_upload, render

KIND_NAME = generation.KIND_NAME
# The pages' routes stay out of the API's documentation; the /api/v1 routes are in it.
router = APIRouter()
api = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")
own_study = managing(researcher, "No such study among yours.")


def _may_view(request: Request, session: Session, user: User | None) -> bool:
    """Researchers and admins; a crowd worker whose session entered a navigation study."""
    if user is not None and user.role in ("researcher", "admin"):
        return True
    bundle_ids = [b for b in request.session.get("crowd", {}).values() if isinstance(b, int)]
    if not bundle_ids:
        return False
    return bool(
        session.scalar(
            select(func.count())
            .select_from(Bundle)
            .join(Study, Study.id == Bundle.study_id)
            .where(Bundle.id.in_(bundle_ids), Study.kind == KIND_NAME)
        )
    )


@router.get("/env/{scan}/view.json", include_in_schema=False)
def environment_view(
    scan: str, request: Request, session: Session = Depends(db), user: User | None = Depends(optional_user)
):
    if not _may_view(request, session, user):
        raise HTTPException(403, "Only researchers and workers of a navigation study may see buildings.")
    env = session.scalar(select(Environment).where(Environment.scan == scan))
    if env is None:
        raise HTTPException(404, "No such building.")
    try:
        data = view(scan, panorama_urls(env))
    except InputError:
        raise HTTPException(404, "No such building.") from None
    # The panorama links stay valid for hours longer than a cached copy is used.
    return JSONResponse(data, headers={"Cache-Control": "private, max-age=3600"})


@router.post("/api/v1/environments/{scan}/panoramas", tags=["navigation"], dependencies=[Depends(verify_csrf)])
def upload_panoramas(
    scan: Annotated[str, Path(pattern=SCAN_PATTERN)],
    files: list[UploadFile] = File(...),
    session: Session = Depends(db),
    user: User = Depends(require("researcher", "admin")),
) -> dict:
    """Panoramas of an imported building for the follower's 360-degree view: one
    equirectangular JPEG or PNG per viewpoint (width = 2 x height), each named
    `<viewpoint>.jpg` or `.png`, as many `files` parts as needed (docs/kinds/navigation-viewer.md).
    Every file is checked before any is stored; a bad one is refused (422, field `files`)
    by name and nothing is stored. Only the building's owner (who imported it) or an admin may
    upload: anyone else gets 403 and nothing changes. Returns {scan, stored: [viewpoints],
    panoramas: total}."""
    try:
        return import_panoramas(session, scan, [(f.filename, f.file) for f in files], actor=user)
    except NotYours as exc:
        raise HTTPException(403, str(exc)) from None


def generations_context(session: Session, study: Study) -> dict:
    """The study page's section (generation.html): the study's runs and their candidates, and
    the owner's validated speakers and listeners to start one with."""
    models = usable_models(session, study.owner_id, KIND_NAME, "speaker", "listener")
    # The runs list is the core's (templates/runs/list.html); the section polls as a whole, so
    # the candidates of a running run fill in too.
    return {
        **runs.page_context(session, KIND_NAME, runs.of_study(session, study.id), None),
        "generations": [
            {
                "summary": generation.summary(session, r),
                "run": runs.of_job(session, r.job_id),
                "paths": generation.candidates_by_path(session, r),
            }
            for r in generation.runs_of(session, study)
        ],
        "speaker_models": models["speaker"],
        "listener_models": models["listener"],
        "generation_designs": generation.DESIGNS,
        "generation_metrics": generation.METRICS,
    }


@router.get("/studies/{study_id}/generations", include_in_schema=False)
def study_generations(request: Request, own: Managed = Depends(own_study)):
    """The generation runs' section alone (htmx polls it while a run is going)."""
    context = generations_context(own.session, own.study)
    return render(request, "kinds/navigation/generation.html", study=own.study, **context)


@router.post("/studies/{study_id}/generations", include_in_schema=False, dependencies=[Depends(verify_csrf)])
async def start_generation_page(
    request: Request,
    study_id: Id,
    file: UploadFile = File(None),
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    """The study page's start form: the API's fields, parsed and started by the same function
    (the listeners are the checked boxes); a refusal shows in the section, in the site's layout."""
    from app.studies.views import _study_page

    study = managed_study(session, study_id, user, "No such study among yours.")
    form = await request.form()
    fields = {name: form.get(name) for name in START_FIELDS if isinstance(form.get(name), str)}
    fields["listener_artifact_ids"] = ",".join(str(v) for v in form.getlist("listener"))
    try:
        run = await start_run(session, study, user, file, fields)
    except InputError as exc:
        session.rollback()
        return _study_page(request, session, study, user, 422, {"generations": str(exc)})
    flash(request, f"Generation run #{runs.of_job(session, run.job_id).id} started; it shows below as it goes.")
    return RedirectResponse(f"/studies/{study.id}#generations", status_code=303)


@api.get(
    "/studies/{study_id}/annotations/{annotation_id}/trace.jsonl",
    tags=["studies"],
    response_class=Response,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def annotation_trace(study_id: Id, annotation_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """A navigation follower's pose trace as PanGEA JSONL: one {id, exmat, inmat, time (ms)}
    per pose (docs/kinds/navigation-listeners.md)."""
    study = managed_study(session, study_id, user)
    ann = session.get(Annotation, annotation_id)
    if ann is None or ann.study_id != study.id:
        raise HTTPException(404, "no such annotation in this study")
    trace = (ann.response or {}).get("trace") if study.kind == KIND_NAME else None
    if not trace:
        raise HTTPException(404, f"annotation {annotation_id} has no pose trace")
    data = export_trace(get_graph(session.get(Item, ann.item_id).payload["scan"]), trace)
    name = f"{study.slug}-annotation-{annotation_id}-trace.jsonl"
    return Response(
        data, media_type="application/x-ndjson", headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


def _run(session: Session, run_id: int, user: User):
    run = session.get(GenerationRun, run_id)
    study = session.get(Study, run.study_id) if run else None
    if study is None or not can_manage(user, study):
        raise HTTPException(404, "no such generation run among yours")
    return run


# What a start request may set besides the file (all text; blank: the default).
START_FIELDS = (
    "speaker_artifact_id",
    "listener_artifact_ids",
    "n",
    "k",
    "m",
    "metric",
    "design",
    "max_len",
    "seed",
    "batch_size",
    "top_p",
)


async def start_run(
    session: Session, study: Study, user: User, file: UploadFile | None, fields: dict[str, str]
) -> GenerationRun:
    """Parse a start request's fields (START_FIELDS; blank or missing: the default) and start
    the run through the one runs service (app/runs), as POST /api/v1/studies/{id}/runs does;
    the study page's form starts runs here too, so they take the same options."""
    params = runs.from_form(generation.SpeakerRuns(), {**fields, "file": await read_upload(file)})
    run = runs.start(session, session.merge(user), KIND_NAME, params, study=study)
    return generation.of_job(session, run.job_id)


# The paths before the one runs API (/api/v1/studies/{id}/runs, /api/v1/runs/{id}), kept for a
# release: their ids are the kind's generation runs' (each run's detail.generation_run).
@api.post(
    "/studies/{study_id}/generations",
    status_code=202,
    tags=["generation"],
    deprecated=True,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": {"schema": body_schema(KIND_NAME, generation.SpeakerRuns(), form=True)}},
        }
    },
)
async def start_generation(
    study_id: Id, request: Request, session: Session = Depends(db), user: User = Depends(researcher)
):
    """Generate a speaker's candidates for an R2R paths file (generated houses) and add items
    to this draft navigation study (docs/kinds/navigation-generation.md): `n` samples per
    path (default 10), `listener_artifact_ids` (K listeners, "3,4") each following every
    candidate `m` times (default 3), `metric` ndtw|sdtw, `design` evaluation|capability,
    `top_p` in (0, 1] (default 1: pure sampling; below 1: nucleus sampling). The same fields,
    read and checked the same way, as POST /api/v1/studies/{id}/runs takes."""
    study = managed_study(session, study_id, user)
    params = await start_params(request, generation.SpeakerRuns())
    run = generation.of_job(session, runs.start(session, session.merge(user), KIND_NAME, params, study=study).job_id)
    return {"run": run.id, "job": run.job_id, "state": "queued"}


@api.get("/generations/{run_id}", tags=["generation"], deprecated=True)
def get_generation(run_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    return generation.summary(session, _run(session, run_id, user))


@api.post("/generations/{run_id}/cancel", tags=["generation"], deprecated=True)
def cancel_generation(run_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    return generation.summary(session, generation.cancel_run(session, _run(session, run_id, user)))
