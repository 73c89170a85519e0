"""Per-agent metrics uploaded to correlate with the success shares (agent_metrics.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, HTTPException, Request, UploadFile
from sqlalchemy.orm import Session

from app.auth.deps import Managed, db, managed_study, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.sts.views.common import researcher
from app.params import UPLOAD, FormText, Id
from app.web import back, read_upload

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])  # pages
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])


def _sts_study(session: Session, user: User, study_id: int):
    study = managed_study(session, study_id, user)
    if study.kind != "sts":
        raise HTTPException(404, "not a Standardised Test Suite study")
    return study


def own_sts(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> Managed:
    """The pages' dependency: an STS study the caller may manage (404 otherwise)."""
    return Managed(session, user, _sts_study(session, user, study_id))


def _store_metrics(session: Session, study, data: bytes) -> dict:
    from app.kinds.sts.agent_metrics import parse_metrics

    parsed = parse_metrics(data)
    # A column named like an imported one replaces it; the others stay.
    study.kind_settings = {
        **(study.kind_settings or {}),
        "agent_metrics": {**(study.kind_settings or {}).get("agent_metrics", {}), **parsed},
    }
    session.commit()
    return study.kind_settings["agent_metrics"]


def _drop_metric(session: Session, study, name: str) -> dict:
    metrics = dict((study.kind_settings or {}).get("agent_metrics") or {})
    if metrics.pop(name, None) is None:
        raise HTTPException(404, f"the study has no imported metric {name!r}")
    study.kind_settings = {**study.kind_settings, "agent_metrics": metrics}
    session.commit()
    return metrics


@api.post("/studies/{study_id}/metrics")
async def import_metrics(
    study_id: Id, file: UploadFile = UPLOAD, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """Per-agent metrics as CSV: an `agent` column and one column per metric. The leaderboard
    correlates each with the agents' success shares (Spearman)."""
    study = _sts_study(session, user, study_id)
    return {"agent_metrics": _store_metrics(session, study, await read_upload(file))}


@api.delete("/studies/{study_id}/metrics/{name}")
def delete_metric(study_id: Id, name: str, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    return {"agent_metrics": _drop_metric(session, _sts_study(session, user, study_id), name)}


@router.post("/sts/studies/{study_id}/metrics")
async def import_metrics_page(request: Request, file: UploadFile = File(None), own: Managed = Depends(own_sts)):
    study = own.study
    try:
        metrics = _store_metrics(own.session, study, await read_upload(file))
    except InputError as exc:
        return back(request, f"/studies/{study.id}#sts-metrics", f"Metrics not imported: {exc}", "error")
    return back(
        request,
        f"/studies/{study.id}#sts-metrics",
        f"Imported; the study now has {len(metrics)} metrics to correlate with.",
    )


@router.post("/sts/studies/{study_id}/metrics/delete")
def delete_metric_page(request: Request, name: FormText = "", own: Managed = Depends(own_sts)):
    study = own.study
    _drop_metric(own.session, study, name)
    return back(request, f"/studies/{study.id}#sts-metrics", f"Removed the metric {name!r}.")
