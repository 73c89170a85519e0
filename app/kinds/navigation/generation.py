"""Generation runs (issue 4): a speaker's candidates for a study's paths, optionally reranked
by a listener ensemble (the bounded pragmatic speaker, the paper's eq. 13).

The web side only stores the run (its parameters and the paths, from an R2R file of imported
generated houses) and enqueues the job "navigation.generate"; `workers/navigation/generate.py` does
the work. Every candidate and every listener rollout is kept, so a researcher can see why a
candidate was chosen. See docs/kinds/navigation-generation.md.
"""

from __future__ import annotations

import math

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import jobs
from app.auth.models import User
from app.errors import Conflict, InputError
from app.params import whole_number
from app.kinds.navigation.models import Candidate, GenerationRun, Rollout
from app.runs.component import AgentRuns, Param, Started, an_id, usable_artifact
from app.studies.models import Study

KIND_NAME = "navigation"
DESIGNS = ("evaluation", "capability")
METRICS = ("ndtw", "sdtw")
MAX_N, MAX_K, MAX_M, MAX_PATHS = 50, 10, 20, 5000


# -- services (web side: no torch) ------------------------------------------------------------


def _top_p(value: object) -> float:
    """Nucleus sampling's p: a number in (0, 1]; 1 is pure ancestral sampling."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0 < value <= 1:
        raise InputError(
            "top_p must be a number greater than 0 and at most 1 (1: pure sampling; below 1: nucleus sampling)",
            field="top_p",
        )
    return float(value)


def sampling_label(top_p: float | None) -> str:
    """How the run's samples are drawn, for its summary and the study page."""
    p = 1.0 if top_p is None else top_p
    return "pure sampling" if p >= 1 else f"nucleus p={p:g}"


def parse_paths(data: bytes, design: str) -> list[dict]:
    """The R2R file's paths, each checked on its imported building, which must be a generated
    house (the speaker's features need its semantics sidecar)."""
    from app.kinds.navigation.environments import check_path, get_semantics
    from app.kinds.navigation.formats import parse_r2r

    if not isinstance(data, (bytes, bytearray)):  # parse_r2r reads a str as a file's path
        raise InputError("the paths file must be uploaded", field="file")
    paths = parse_r2r(bytes(data))
    if not paths:
        raise InputError("the paths file holds no paths", field="paths")
    if len(paths) > MAX_PATHS:
        raise InputError(f"at most {MAX_PATHS} paths per run", field="paths")
    out = []
    for p in paths:
        label = f"path_id {p.path_id}"
        if len(f"{p.scan}:{p.path_id}") > 255:
            raise InputError(f"{label}: scan and path_id are too long", field="path_id")
        check_path(p.scan, p.path, label)
        if get_semantics(p.scan) is None:
            raise InputError(
                f"{label}: building {p.scan} has no semantics (generation needs a generated "
                "house, imported with `proctor navigation import-house`)",
                field="scan",
            )
        refs = [t for t in p.instructions if t.strip()]
        if design == "capability" and not refs:
            raise InputError(
                f"{label}: the capability design needs a human reference instruction", field="instructions"
            )
        out.append(
            {"path_id": p.path_id, "scan": p.scan, "path": list(p.path), "heading": p.heading, "instructions": refs}
        )
    return out


def create_run(
    session: Session,
    study: Study,
    user: User,
    *,
    speaker_artifact_id: object,
    listener_artifact_ids: object = (),
    paths_data: bytes,
    n: object = 10,
    m: object = 3,
    metric: str = "ndtw",
    design: str = "evaluation",
    max_len: object = 60,
    seed: object = 0,
    batch_size: object = 8,
    k: object = None,
    top_p: object = 1.0,
) -> GenerationRun:
    """Check everything and add the run and its job to the session (flushed, not committed):
    the caller records the agent run and submits the job (app/runs)."""
    if study.kind != KIND_NAME:
        raise Conflict("generation runs are for navigation studies", field="study")
    if study.state != "draft":
        raise Conflict(f"items can only be added to a draft study; this one is {study.state}", field="study")
    if design not in DESIGNS:
        raise InputError(f"design is one of {', '.join(DESIGNS)}", field="design")
    if metric not in METRICS:
        raise InputError(f"metric is one of {', '.join(METRICS)}", field="metric")
    speaker, _ = usable_artifact(
        session, user, speaker_artifact_id, KIND_NAME, "speaker", "a navigation speaker", "speaker_artifact_id"
    )
    if not isinstance(listener_artifact_ids, (list, tuple)):
        raise InputError("listener_artifact_ids must be a list of artifact ids", field="listener_artifact_ids")
    listeners = [
        usable_artifact(session, user, a, KIND_NAME, "listener", "a navigation listener", "listener_artifact_ids")[0]
        for a in listener_artifact_ids
    ]
    if len({a.id for a in listeners}) != len(listeners) or len(listeners) > MAX_K:
        raise InputError(f"at most {MAX_K} distinct listeners", field="listener_artifact_ids")
    run = GenerationRun(
        study_id=study.id,
        owner_id=user.id,
        speaker_artifact_id=speaker.id,
        listener_artifact_ids=[a.id for a in listeners],
        n=whole_number(n, "n", 1, MAX_N),
        k=len(listeners),
        m=whole_number(m, "m", 1, MAX_M),
        metric=metric,
        design=design,
        max_len=whole_number(max_len, "max_len", 2, 200),
        seed=whole_number(seed, "seed", 0, 2**31 - 1),
        batch_size=whole_number(batch_size, "batch_size", 1, 256),
        top_p=_top_p(top_p),
        paths=parse_paths(paths_data, design),
        state="queued",
    )
    session.add(run)
    session.flush()
    job = jobs.create_job(session, f"{KIND_NAME}.generate", study_id=study.id, owner_id=user.id, run_id=run.id)
    run.job_id = job.id
    session.flush()
    return run


def cancel_run(session: Session, run: GenerationRun) -> GenerationRun:
    """Mark the job cancelled; the worker stops before its next batch (what it stored stays)."""
    job = session.get(jobs.Job, run.job_id) if run.job_id else None
    if job is None or job.state not in ("queued", "running"):
        raise Conflict(f"the run is {run.state}: only a queued or running run can be cancelled", field="state")
    run.state = "cancelled"
    jobs.cancel(session, job)
    return run


def runs_of(session: Session, study: Study) -> list[GenerationRun]:
    return session.scalars(
        select(GenerationRun).where(GenerationRun.study_id == study.id).order_by(GenerationRun.id.desc())
    ).all()


def _described(session: Session, run: GenerationRun) -> dict:
    """What the run ran and how much of it is stored."""
    n_cands = session.scalar(select(func.count(Candidate.id)).where(Candidate.run_id == run.id))
    n_paths = session.scalar(select(func.count(func.distinct(Candidate.path_key))).where(Candidate.run_id == run.id))
    n_rollouts = session.scalar(
        select(func.count(Rollout.id))
        .join(Candidate, Candidate.id == Rollout.candidate_id)
        .where(Candidate.run_id == run.id)
    )
    return {
        "design": run.design,
        "n": run.n,
        "k": run.k,
        "m": run.m,
        "metric": run.metric,
        "top_p": run.top_p,
        "sampling": sampling_label(run.top_p),
        "speaker_artifact_id": run.speaker_artifact_id,
        "listener_artifact_ids": run.listener_artifact_ids,
        "gamma": run.gamma,
        "paths": len(run.paths),
        "paths_done": n_paths,
        "candidates": n_cands,
        "rollouts": n_rollouts,
    }


def summary(session: Session, run: GenerationRun) -> dict:
    job = session.get(jobs.Job, run.job_id) if run.job_id else None
    return {
        "id": run.id,
        "study_id": run.study_id,
        "state": job.state if job else run.state,
        "job": run.job_id,
        "done": job.done if job else 0,
        "total": job.total if job else len(run.paths),
        "log": job.log if job else "",
        **_described(session, run),
        "items": (job.result or {}).get("items") if job else None,
    }


def candidates_by_path(session: Session, run: GenerationRun, limit_paths: int = 50) -> list[tuple[str, list]]:
    """[(path_key, [Candidate ordered by k])] for the page (the first `limit_paths` paths)."""
    rows = session.scalars(
        select(Candidate).where(Candidate.run_id == run.id).order_by(Candidate.path_key, Candidate.k)
    ).all()
    out: dict[str, list] = {}
    for c in rows:
        if c.path_key not in out and len(out) >= limit_paths:
            break
        out.setdefault(c.path_key, []).append(c)
    return list(out.items())


def of_job(session: Session, job_id: int | None) -> GenerationRun | None:
    return session.scalar(select(GenerationRun).where(GenerationRun.job_id == job_id)) if job_id else None


class SpeakerRuns(AgentRuns):
    """Navigation's agent runs (app/runs): a speaker's instructions for an R2R paths file,
    reranked by listeners, become the study's items. The run's candidates and rollouts stay in
    this kind's tables (models.GenerationRun, Candidate, Rollout)."""

    noun = "generation run"
    columns = (
        ("Design", "design"),
        ("Sampling", "sampling"),
        ("K", "k"),
        ("M", "m"),
        ("Candidates", "candidates"),
        ("Rollouts", "rollouts"),
        ("Items", "items"),
    )
    unit = "paths"
    fields = {
        "file": Param("file"),
        "speaker_artifact_id": an_id(),
        "listener_artifact_ids": an_id("ints", most=MAX_K),
        "n": Param("int", 1, MAX_N),
        "k": Param("int", 0, MAX_K, counts="listener_artifact_ids"),
        "m": Param("int", 1, MAX_M),
        "metric": Param("text", choices=METRICS),
        "design": Param("text", choices=DESIGNS),
        "max_len": Param("int", 2, 200),
        "seed": Param("int", 0, 2**31 - 1),
        "batch_size": Param("int", 1, 256),
        "top_p": Param("float", above=0, high=1),
    }
    required = ("file", "speaker_artifact_id")

    def start(self, session: Session, user: User, study: Study, target: dict, params: dict) -> Started:
        data = params.get("file")
        if not isinstance(data, bytes) or not data:  # bytes only: parse_paths reads a str as a path
            raise InputError("choose a paths file (R2R JSON) to upload", field="file")
        given = {k: v for k, v in params.items() if k != "file"}
        if "speaker_artifact_id" not in given:
            raise InputError("speaker_artifact_id is required: the speaker to run", field="speaker_artifact_id")
        run = create_run(session, study, user, paths_data=data, **given)  # its own defaults for the rest
        return Started(
            session.get(jobs.Job, run.job_id),
            artifact_ids=[run.speaker_artifact_id, *run.listener_artifact_ids],
            params={
                k: getattr(run, k)
                for k in self.fields
                if k not in ("file", "speaker_artifact_id", "listener_artifact_ids")
            }
            | {"generation_run": run.id},
            withdraw=((GenerationRun, run.id),),
        )

    def describe(self, session: Session, run, job: jobs.Job | None) -> dict:
        grun = of_job(session, run.job_id)
        return (
            {
                "generation_run": grun.id,
                **_described(session, grun),
                "items": (job.result or {}).get("items") if job else None,
            }
            if grun
            else {}
        )

    def cancel(self, session: Session, run, job: jobs.Job) -> None:
        grun = of_job(session, run.job_id)
        if grun is not None:
            grun.state = "cancelled"
        jobs.cancel(session, job)
