"""Generation runs of A3DS captioners: a captioner (a built-in speaker, or an uploaded or trained
model) captions every pair of a study; each caption becomes an item of the study (a caption
per pair per captioner is what a worker judges), named by the captioner, so the leaderboard
compares captioners on the same pairs (docs/kinds/a3ds.md, "Generation runs").

A run is a core Job (`a3ds.generate`, queue "models"; its params say what it runs): no table of
its own. The web side checks the request and stores the job; workers/a3ds/generate.py does the
work. Items are only added to a draft study (a live one's bundles are already dealt). No torch
here.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import jobs
from app.agents.artifacts import usable_models
from app.agents.models import AgentOutput
from app.auth.models import User
from app.errors import Conflict, InputError
from app.params import whole_number
from app.kinds.a3ds.listeners import LISTENERS
from app.kinds.a3ds.speakers import SPEAKERS
from app.runs.component import AgentRuns, Param, Started, an_id, usable_artifact
from app.studies.models import Item, Study

KIND_NAME = "a3ds"
TASK = f"{KIND_NAME}.generate"
MAX_BATCH = 256
DEFAULT_BATCH = 32


def study_pairs(session: Session, study: Study) -> list[tuple[int, int, str]]:
    """The study's pairs (target, distractor, how it was chosen), gold ones excepted, in the
    order of their first item."""
    seen, out = set(), []
    for ref in session.scalars(
        select(Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False)).order_by(Item.id)
    ):
        key = (ref["target_id"], ref["distractor_id"])
        if key not in seen:
            seen.add(key)
            out.append((*key, ref.get("design", "")))
    return out


def create_run(
    session: Session,
    study: Study,
    user: User,
    *,
    speaker: object = None,
    artifact_id: object = None,
    batch_size: object = DEFAULT_BATCH,
) -> jobs.Job:
    """Check everything and add the job to the session (flushed, not committed): the caller
    submits it (jobs.submit). One of `speaker` (a built-in one) or `artifact_id` (a valid
    captioner)."""
    if study.kind != KIND_NAME:
        raise Conflict("captioner runs are for A3DS studies", field="study")
    if study.state != "draft":
        raise Conflict(
            f"captions become items, and items are only added to a draft study; this one is {study.state}",
            field="study",
        )
    if (speaker is None) == (artifact_id is None):
        raise InputError(
            f"name one captioner: speaker ({', '.join(SPEAKERS)}) or artifact_id (an uploaded or trained captioner)",
            field="speaker",
        )
    params: dict = {}
    if speaker is not None:
        if speaker not in SPEAKERS:
            raise InputError(f"unknown speaker {speaker!r}: use {', '.join(SPEAKERS)}", field="speaker")
        params.update(speaker=speaker, captioner=speaker)
    else:
        art, agent = usable_artifact(session, user, artifact_id, KIND_NAME, "captioner", "an A3DS captioner")
        # The name the leaderboard shows: an agent's versions are different captioners.
        params.update(artifact_id=art.id, agent_id=agent.id, captioner=f"{agent.name} v{art.version}")
    batch_size = whole_number(batch_size, "batch_size", 1, MAX_BATCH)
    if not study_pairs(session, study):
        raise Conflict("the study has no pairs to caption (gold ones are not captioned)", field="study")
    return jobs.create_job(session, TASK, study_id=study.id, owner_id=user.id, batch_size=batch_size, **params)


def listener_name(listener: str) -> str:
    """The agent a built-in listener's picks are stored under ("literal listener")."""
    return f"{listener} listener"


def create_listener_run(
    session: Session, study: Study, user: User, *, listener: object, batch_size: object = DEFAULT_BATCH
) -> tuple[jobs.Job, int]:
    """A model listener's picks on every caption of the study (issue 28.1: the kind's automatic
    judge), as the outputs of an agent of the study's owner named for it; any state of the
    study (picks add no items). The job and the agent's id, added to the session."""
    from app.studies.services import register_agent

    if study.kind != KIND_NAME:
        raise Conflict("listener runs are for A3DS studies", field="study")
    if listener not in LISTENERS:
        raise InputError(f"unknown listener {listener!r}: use {', '.join(LISTENERS)}", field="listener")
    batch_size = whole_number(batch_size, "batch_size", 1, MAX_BATCH)
    if not study_pairs(session, study):
        raise Conflict("the study has no captions to pick on (gold ones are people's checks)", field="study")
    owner = session.get(User, study.owner_id) or user
    agent = register_agent(session, owner, KIND_NAME, listener_name(str(listener)))
    job = jobs.create_job(
        session,
        TASK,
        study_id=study.id,
        owner_id=user.id,
        batch_size=batch_size,
        listener=listener,
        agent_id=agent.id,
        captioner=listener_name(str(listener)),
    )
    return job, agent.id


def _picks(session: Session, study_id: int | None, params: dict) -> int:
    """The picks a listener run's agent has stored on the study."""
    return (
        session.scalar(
            select(func.count(AgentOutput.id)).where(
                AgentOutput.study_id == study_id, AgentOutput.agent_id == params.get("agent_id")
            )
        )
        or 0
    )


def item_prefix(params: dict) -> str:
    """A run's items' external-id prefix: per model (artifact), so two versions of an agent, or
    agents of one name, never share items; per speaker for a built-in one."""
    if params.get("artifact_id") is not None:
        return f"gen:a{params['artifact_id']}:"
    return f"gen:{params.get('captioner', '')}:"


def _items(session: Session, study_id: int | None, params: dict) -> int:
    """The items a run's captioner has added to the study."""
    return (
        session.scalar(
            select(func.count(Item.id)).where(
                Item.study_id == study_id, Item.external_id.startswith(item_prefix(params), autoescape=True)
            )
        )
        or 0
    )


def study_context(session: Session, study: Study) -> dict:
    """The study page's section (generation.html): the runs, and what the owner can start one with."""
    from app.runs import service as runs

    return {
        **runs.study_page_context(session, study),
        "captioner_models": usable_models(session, study.owner_id, KIND_NAME, "captioner")["captioner"],
        "speakers": SPEAKERS,
        "listeners": LISTENERS,
    }


class CaptionerRuns(AgentRuns):
    """A3DS's agent runs (app/runs): a captioner's captions of a study's pairs become items; a
    model listener's picks on every caption become its agent's outputs (the automatic judge)."""

    noun = "captioner or listener run"
    fields = {
        "speaker": Param("text", choices=SPEAKERS),
        "artifact_id": an_id(),
        "listener": Param("text", choices=LISTENERS),
        "batch_size": Param("int", 1, MAX_BATCH),
    }
    one_of = (("speaker", "artifact_id", "listener"),)
    columns = (("Captioner or listener", "captioner"), ("Items or picks", "items"))
    unit = "pairs"

    def start(self, session: Session, user: User, study: Study, target: dict, params: dict) -> Started:
        if "listener" in params:
            job, agent_id = create_listener_run(
                session,
                study,
                user,
                listener=params["listener"],
                batch_size=params.get("batch_size", DEFAULT_BATCH),
            )
            return Started(job, agent_id=agent_id, params=job.params)
        job = create_run(
            session,
            study,
            user,
            speaker=params.get("speaker"),
            artifact_id=params.get("artifact_id"),
            batch_size=params.get("batch_size", DEFAULT_BATCH),
        )
        p = job.params
        return Started(
            job, agent_id=p.get("agent_id"), params=p, artifact_ids=[p["artifact_id"]] if p.get("artifact_id") else []
        )

    def describe(self, session: Session, run, job: jobs.Job | None) -> dict:
        p = run.params or {}
        return {
            "captioner": p.get("captioner"),
            "speaker": p.get("speaker"),
            "listener": p.get("listener"),
            "artifact_id": p.get("artifact_id"),
            "agent_id": p.get("agent_id"),
            "batch_size": p.get("batch_size"),
            # a listener's picks, or a captioner's items
            "items": _picks(session, run.study_id, p) if p.get("listener") else _items(session, run.study_id, p),
        }
