"""Pages and API of the STS suites (paper 004, sections 3.1-3.2 and 5.1): recordings, suites and
their versions, scenarios mined in bulk or on a recording's timeline, personal tags,
generation runs, and a study built from a published version; and the play study's two routes,
the grid a worker plays on and the plays stored as recordings.

Researchers and admins only, but for the play grid (the crowd worker whose task holds the
item); another researcher's suite, scenario, recording, run or study is 404. A published
version refuses every change with 409."""

from __future__ import annotations

from contextlib import contextmanager

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.sts import generation, play, suites
from app.kinds.sts.env import get_simulator
from app.kinds.sts.frames import MAX_FRAMES, ensure_strip
from app.kinds.sts.mining import MAX_CONTINUATION, MAX_TAGS, RULES
from app.kinds.sts.models import Continuation, GenerationRun, Recording
from app.params import MAX_ID, NOT_BLANK, NOT_BOOL, BodyId, Id, OneOf, UPLOAD

# Numbers in bodies are bounded where they enter (the database's INTEGER range); the services
# check what each one may be.
Count = Annotated[int, Field(ge=0, le=MAX_ID), NOT_BOOL]
from app.storage import get_store
from app.studies.models import Assignment, Item
from app.studies.services import StudySettings
from app.studies.views import crowd_bundle
from app.web import flash, form_number, rate_limit, read_upload, render

# Pages: their forms post here, with the session's form token.
router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")
# Pixels per grid cell on the mining page's timeline (smaller than the annotator's: the whole
# recording is one strip).
TIMELINE_TILE = 12


@contextmanager
def _answers():
    """The services' refusals as HTTP: not yours 404; a published version's change, a
    Conflict, is an InputError the app answers with 409 and its field."""
    try:
        yield
    except suites.NotFound as exc:
        raise HTTPException(404, str(exc)) from None


def _version(session: Session, user: User, suite_id: int, number: int):
    suite = suites.get_suite(session, user, suite_id)
    return suite, suites.get_version(session, suite, number)


# --- API: recordings ------------------------------------------------------------------------


@api.post("/recordings", status_code=201)
async def upload_recordings(file: UploadFile = UPLOAD, session: Session = Depends(db),
                            user: User = Depends(researcher)) -> dict:
    """Recordings as JSONL (one {id?, level, seed, mission, actions, actor?} a line; see
    docs/kinds/sts.md). Every line is replayed; the first bad one is refused (422) with its
    line and field, and nothing is stored."""
    data = await read_upload(file)
    rows = suites.store_recordings(session, session.merge(user), data)
    return {"created": len(rows), "recordings": [suites.recording_dict(r) for r in rows]}


class ExpertIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: Annotated[str, OneOf(lambda: get_simulator().levels())]
    seeds: list[Count] = Field(min_length=1, max_length=suites.MAX_SEEDS)
    max_steps: Annotated[int, Field(ge=1, le=MAX_ID), NOT_BOOL] | None = None


@api.post("/recordings/expert", status_code=201)
def record_expert(body: ExpertIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """The BabyAI expert plays `level` from each seed on the server; each game is stored as a
    recording with the id "expert:<level>:<seed>" (a seed recorded before is reused)."""
    rows, new = suites.expert_recordings(session, session.merge(user), body.level, body.seeds, body.max_steps)
    return {"created": new, "recordings": [suites.recording_dict(r) for r in rows]}


class FromStudyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    study_id: BodyId
    only_successes: bool = False


@api.post("/recordings/from-study", status_code=201)
def record_plays(body: FromStudyIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A play study's answers as recordings of the study owner's (the owner or an admin; 404
    for another researcher): each under "play:<study>:<item>:<pseudonym>" with the actor
    "human:<pseudonym>". Plays stored before are skipped (counted in `existing`), as are empty
    plays and, with `only_successes`, those that did not succeed (`failed`)."""
    with _answers():
        return suites.play_recordings(session, user, body.study_id, only_successes=body.only_successes)


@api.get("/recordings")
def list_recordings(session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    return {"recordings": [suites.recording_dict(r) for r in suites.recordings_of(session, user)]}


@api.get("/play/{slug}/{assignment_id}")
def play_state(request: Request, slug: str, assignment_id: Id,
               actions: Annotated[str, Query(max_length=play.MAX_ACTIONS_TEXT)] = "",
               session: Session = Depends(db)) -> dict:
    """A play item's grid after `actions` (minigrid's numbers, "2,2,0"), for the crowd worker
    whose task holds the assignment (their session, as for /api/v1/crowd/{slug}/next): the
    step, the level's step limit, whether the episode ended and in success, and the frame as a
    PNG data URL. The page never holds the seed: it sends its actions and gets the picture."""
    study, bundle = crowd_bundle(request, session, slug)
    rate_limit(request, "sts-play", play.STATES_PER_MINUTE, key=f"bundle:{bundle.id}")
    a = session.get(Assignment, assignment_id)
    item = session.get(Item, a.item_id) if a is not None and a.bundle_id == bundle.id else None
    if item is None or study.kind != suites.KIND_NAME or not play.is_play(item.payload):
        raise HTTPException(404, "no such mission in your task")
    return play.state(item.payload, play.parse_actions(actions))


@api.get("/preview/{study_id}/{item_id}")
def preview_play_state(request: Request, study_id: Id, item_id: Id,
                       actions: Annotated[str, Query(max_length=play.MAX_ACTIONS_TEXT)] = "",
                       session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """play_state for the study's owner (or an admin) previewing a play item
    (app.studies.preview): the same grid, with no task behind it and nothing stored."""
    study = managed_study(session, study_id, user)
    rate_limit(request, "sts-play", play.STATES_PER_MINUTE, key=f"preview:{user.id}")
    item = session.get(Item, item_id)
    if item is None or item.study_id != study.id or study.kind != suites.KIND_NAME \
            or not play.is_play(item.payload):
        raise HTTPException(404, "no such mission in this study")
    return play.state(item.payload, play.parse_actions(actions))


# --- API: suites and versions ---------------------------------------------------------------


class SuiteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, Field(min_length=1, max_length=suites.MAX_NAME, pattern=NOT_BLANK)]  # stripped
    description: str = ""


@api.post("/suites", status_code=201)
def create_suite(body: SuiteIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A suite, with version 1 as a draft."""
    suite = suites.create_suite(session, session.merge(user), body.name, body.description)
    return suites.suite_dict(session, suite)


@api.get("/suites")
def list_suites(session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    return {"suites": [suites.suite_dict(session, s) for s in suites.suites_of(session, user)]}


@api.get("/suites/{suite_id}")
def get_suite(suite_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    with _answers():
        return suites.suite_dict(session, suites.get_suite(session, user, suite_id))


@api.get("/suites/{suite_id}/versions")
def list_versions(suite_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Each version with its scenario count, per category, and how many it added."""
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    return {"versions": [suites.version_summary(session, v) for v in suites.versions_of(session, suite)]}


@api.post("/suites/{suite_id}/versions", status_code=201)
def start_version(suite_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Version n + 1, a draft: only once version n is published (409 otherwise)."""
    with _answers():
        version = suites.new_version(session, suites.get_suite(session, user, suite_id))
    return suites.version_summary(session, version)


@api.post("/suites/{suite_id}/versions/{number}/publish")
def publish_version(suite_id: Id, number: Id, session: Session = Depends(db),
                    user: User = Depends(researcher)) -> dict:
    """Make the draft immutable (409 if it is published already)."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
        return suites.version_summary(session, suites.publish(session, version))


@api.get("/suites/{suite_id}/versions/{number}/scenarios")
def list_scenarios(suite_id: Id, number: Id, session: Session = Depends(db),
                   user: User = Depends(researcher)) -> dict:
    """Version n's scenarios: all those added in versions 1..n, with the caller's own tags."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
    return {"version": suites.version_summary(session, version),
            "scenarios": suites.scenario_list(session, user, version)}


# A scenario's category and tags: non-blank texts of at most MAX_TAG characters, 20 tags.
Tag = Annotated[str, Field(min_length=1, max_length=suites.MAX_TAG, pattern=NOT_BLANK)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS)]
Steps = Annotated[int, Field(ge=1, le=MAX_CONTINUATION), NOT_BOOL]


class ScenariosIn(BaseModel):
    # Either a rule (bulk; "before success" with k) or a takeover step (one recording).
    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [
        {"required": ["rule"], "properties": {"rule": {"type": "string"}, "takeover": {"type": "null"}}},
        {"required": ["takeover", "recordings"], "properties": {
            "takeover": {"type": "integer"}, "rule": {"type": "null"},
            "recordings": {"type": "array", "minItems": 1, "maxItems": 1}}}],
        "if": {"required": ["rule"], "properties": {"rule": {"const": "before success"}}},
        "then": {"required": ["k"], "properties": {"k": {"type": "integer", "minimum": 1}}}})
    rule: Literal[RULES] | None = None
    k: Count | None = None
    takeover: Count | None = None
    recordings: Annotated[list[BodyId], Field(min_length=1)] | None = None
    continuation: Steps = suites.DEFAULT_CONTINUATION
    category: Tag | None = None
    tags: Tags = Field(default_factory=list)


@api.post("/suites/{suite_id}/versions/{number}/scenarios", status_code=201)
def add_scenarios(suite_id: Id, number: Id, body: ScenariosIn, session: Session = Depends(db),
                  user: User = Depends(researcher)) -> dict:
    """Scenarios for the draft version n, in bulk by `rule` ("first step", "mission given",
    "before success" with `k`) over `recordings` (ids; default all of the suite owner's,
    leaving out those the rule does not apply to), or one recording at an explicit `takeover`
    step. `continuation`: the agent's own steps; `category`: overrides the level's family;
    `tags`: the suite's tags. Returns what was added and how many the suite already had."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
        return suites.add_scenarios(session, version, **body.model_dump())


@api.get("/suites/{suite_id}/versions/{number}/agents")
def version_agents(suite_id: Id, number: Id, session: Session = Depends(db),
                   user: User = Depends(researcher)) -> dict:
    """Each agent's stored continuations of version n's scenarios and the simulator's own
    success share over them (overall, per category): an older version's stays computable."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
    return {"version": number, "agents": suites.simulator_scores(session, version)}


class ScenarioPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    takeover: Count | None = None
    continuation: Steps | None = None
    category: Tag | None = None
    tags: Tags | None = None
    instruction: Annotated[str, Field(min_length=1, pattern=NOT_BLANK)] | None = None


@api.patch("/scenarios/{scenario_id}")
def change_scenario(scenario_id: Id, body: ScenarioPatch, session: Session = Depends(db),
                    user: User = Depends(researcher)) -> dict:
    """Change a draft version's scenario (409 once its version is published). A new takeover
    point or length removes the continuations stored for the old one."""
    with _answers():
        sc, _, _ = suites.get_scenario(session, user, scenario_id)
        return suites.update_scenario(session, sc, **body.model_dump())


@api.delete("/scenarios/{scenario_id}")
def delete_scenario(scenario_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Remove a draft version's scenario (409 once its version is published)."""
    with _answers():
        sc, _, _ = suites.get_scenario(session, user, scenario_id)
        suites.remove_scenario(session, sc)
    return {"deleted": scenario_id}


class TagIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tag: Tag


@api.post("/scenarios/{scenario_id}/tags")
def add_tag(scenario_id: Id, body: TagIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A personal tag: the caller's own, on any version's scenario; returns the caller's tags."""
    with _answers():
        sc, _, _ = suites.get_scenario(session, user, scenario_id)
    return {"scenario": scenario_id, "my_tags": suites.add_tag(session, user, sc, body.tag)}


@api.delete("/scenarios/{scenario_id}/tags/{tag}")
def remove_tag(scenario_id: Id, tag: str, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    with _answers():
        sc, _, _ = suites.get_scenario(session, user, scenario_id)
    return {"scenario": scenario_id, "my_tags": suites.remove_tag(session, user, sc, tag)}


# --- API: generation and studies ------------------------------------------------------------


BUILTIN_NAMES = tuple(suites.BUILTIN_AGENTS)  # expert, random


class GenerationIn(BaseModel):
    # Exactly one of agent_id and agent (the route refuses both or neither), as the schema says.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [
        {"required": ["agent_id"], "properties": {"agent_id": {"type": "integer"}, "agent": {"type": "null"}}},
        {"required": ["agent"], "properties": {"agent": {"type": "string"}, "agent_id": {"type": "null"}}}]})
    agent_id: BodyId | None = None
    agent: Literal[BUILTIN_NAMES] | None = None  # a built-in agent's name
    continuations: Annotated[int, Field(ge=1, le=generation.MAX_CONTINUATIONS),
                             NOT_BOOL] = generation.DEFAULT_CONTINUATIONS
    seed: Count = 0
    batch_size: Annotated[int, Field(ge=1, le=generation.MAX_BATCH), NOT_BOOL] = generation.DEFAULT_BATCH


def _start_run(session: Session, user: User, suite_id: int, number: int, agent_spec, continuations, seed,
               batch_size) -> GenerationRun:
    suite, version = _version(session, user, suite_id, number)
    agent = suites.resolve_agent(session, user, suite, agent_spec)
    run = generation.create_run(session, user, suite, version, agent, continuations=continuations, seed=seed,
                                batch_size=batch_size)
    jobs.submit(session, session.get(jobs.Job, run.job_id), withdraw=((GenerationRun, run.id),))
    return run


@api.post("/suites/{suite_id}/versions/{number}/generations", status_code=202)
def start_generation(suite_id: Id, number: Id, body: GenerationIn, session: Session = Depends(db),
                     user: User = Depends(researcher)) -> dict:
    """An agent's `continuations` (C, default 10) of every scenario of version n, as one
    background job (`sts.generation`). The agent is `agent_id` (an STS agent) or `agent`, a
    built-in: "expert" or "random". Continuations already stored are kept, so a run again
    generates only what is missing. Cancel with POST /api/v1/jobs/{job}/cancel."""
    if (body.agent_id is None) == (body.agent is None):
        raise InputError("give agent_id (an STS agent) or agent (a built-in: expert, random)", field="agent")
    with _answers():
        run = _start_run(session, user, suite_id, number, body.agent_id if body.agent is None else body.agent,
                         body.continuations, body.seed, body.batch_size)
    return {"run": run.id, "job": run.job_id, "state": "queued"}


@api.get("/generations/{run_id}")
def get_generation(run_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A run's state and progress, and how many of its continuations are stored."""
    with _answers():
        return generation.summary(session, generation.get_run(session, user, run_id))


class StudyIn(StudySettings):
    model_config = ConfigDict(extra="forbid")
    agents: list[BodyId | str] = Field(min_length=1)
    reference: dict[str, Count] = Field(default_factory=dict)
    continuations: Count | None = None
    approve_at: float | None = None
    tile: Count | None = None


@api.post("/suites/{suite_id}/versions/{number}/study", status_code=201)
def study_from_version(suite_id: Id, number: Id, body: StudyIn, session: Session = Depends(db),
                       user: User = Depends(researcher)) -> dict:
    """A draft study of the published version n: the `agents`' stored continuations (ids or
    built-in names; the first `continuations` of each scenario, default as many as every
    scenario has) and `reference` episodes {"expert_successes": k, "random_failures": k}
    (generated now where none is stored), plus the study's settings (title, bundle_size,
    gold_rate, ...), `approve_at` and `tile`."""
    from app.kinds.sts.study import build_study

    settings = StudySettings(**body.model_dump(include=set(StudySettings.model_fields)))
    with _answers():
        suite, version = _version(session, user, suite_id, number)
        _, out = build_study(session, session.merge(user), suite, version, settings, agents=body.agents,
                             reference=body.reference, continuations=body.continuations,
                             approve_at=body.approve_at, tile=body.tile)
    return out


# --- pages ----------------------------------------------------------------------------------


def _back(request: Request, url: str, message: str, level: str = "ok") -> RedirectResponse:
    flash(request, message, level)
    return RedirectResponse(url, status_code=303)


@contextmanager
def _flashed(request: Request, holder: dict):
    """A form's refusal as a message on the page it came from (the page stays usable)."""
    try:
        yield
    except (InputError, ValidationError) as exc:
        holder["error"] = str(exc) if isinstance(exc, InputError) else exc.errors()[0]["msg"]


def _list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@router.get("/sts/suites")
def suites_page(request: Request, session: Session = Depends(db), user: User = Depends(researcher)):
    rows = [suites.suite_dict(session, s) for s in suites.suites_of(session, user)]
    return render(request, "kinds/sts/suites.html", user=user, suites=rows,
                  recordings=suites.recordings_of(session, user), levels=get_simulator().levels())


@router.post("/sts/suites")
def create_suite_page(request: Request, name: str = Form(""), description: str = Form(""),
                      session: Session = Depends(db), user: User = Depends(researcher)):
    out: dict = {}
    with _flashed(request, out):
        suite = suites.create_suite(session, session.merge(user), name, description)
        return _back(request, f"/sts/suites/{suite.id}", f"Suite {suite.name!r} created with version 1, a draft.")
    return _back(request, "/sts/suites", f"Not created: {out['error']}", "error")


@router.post("/sts/recordings")
async def upload_recordings_page(request: Request, file: UploadFile = File(None), session: Session = Depends(db),
                                 user: User = Depends(researcher)):
    out: dict = {}
    with _flashed(request, out):
        rows = suites.store_recordings(session, session.merge(user), await read_upload(file))
        return _back(request, "/sts/suites", f"Stored {len(rows)} recordings.")
    return _back(request, "/sts/suites", f"Nothing stored: {out['error']}", "error")


@router.post("/sts/recordings/expert")
def record_expert_page(request: Request, level: str = Form(""), seeds: str = Form(""), max_steps: str = Form(""),
                       session: Session = Depends(db), user: User = Depends(researcher)):
    out: dict = {}
    with _flashed(request, out):
        rows, new = suites.expert_recordings(session, session.merge(user), level, suites.parse_seeds(seeds),
                                             form_number(max_steps, "max_steps"))
        return _back(request, "/sts/suites", f"The expert played {len(rows)} seeds of {level} ({new} new recordings).")
    return _back(request, "/sts/suites", f"Nothing stored: {out['error']}", "error")


@router.post("/sts/studies/{study_id}/recordings")
def record_plays_page(request: Request, study_id: Id, only_successes: str = Form(""),
                      session: Session = Depends(db), user: User = Depends(researcher)):
    """The study page's button: the plays as recordings (as POST /api/v1/sts/recordings/from-study)."""
    out: dict = {}
    with _answers(), _flashed(request, out):
        result = suites.play_recordings(session, user, study_id, only_successes=bool(only_successes))
        skipped = [f"{result[k]} {what}" for k, what in (("existing", "stored before"), ("empty", "empty"),
                                                          ("failed", "unsuccessful")) if result[k]]
        return _back(request, f"/studies/{study_id}",
                     f"Stored {result['created']} plays as recordings"
                     + (f" (skipped: {', '.join(skipped)})" if skipped else "") + ": mine them on a suite's page.")
    return _back(request, f"/studies/{study_id}", f"Nothing stored: {out['error']}", "error")


def _runs(session: Session, suite) -> list[dict]:
    return [generation.summary(session, r) for r in generation.runs_of(session, suite)]


@router.get("/sts/suites/{suite_id}")
def suite_page(request: Request, suite_id: Id, version: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None, session: Session = Depends(db),
               user: User = Depends(researcher)):
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
        versions = suites.versions_of(session, suite)
        shown = versions[-1] if version is None else suites.get_version(session, suite, version)
    return render(request, "kinds/sts/suite.html", user=user, suite=suite,
                  versions=[suites.version_summary(session, v) for v in versions], shown=shown,
                  latest=versions[-1], scenarios=suites.scenario_list(session, user, shown),
                  scores=suites.simulator_scores(session, shown), runs=_runs(session, suite),
                  agents=suites.agents_for(session, suite), rules=RULES,
                  recordings=suites.recordings_of(session, user, suite.owner_id),
                  default_continuation=suites.DEFAULT_CONTINUATION)


@router.get("/sts/suites/{suite_id}/runs")
def suite_runs(request: Request, suite_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """The generation runs' section alone (htmx polls it while a run is going)."""
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    return render(request, "kinds/sts/runs.html", user=user, suite=suite, runs=_runs(session, suite))


@router.post("/sts/suites/{suite_id}/versions")
def start_version_page(request: Request, suite_id: Id, session: Session = Depends(db),
                       user: User = Depends(researcher)):
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    out: dict = {}
    with _flashed(request, out):
        v = suites.new_version(session, suite)
        return _back(request, f"/sts/suites/{suite.id}", f"Version {v.number} started: add its scenarios.")
    return _back(request, f"/sts/suites/{suite.id}", out["error"], "error")


@router.post("/sts/suites/{suite_id}/versions/{number}/publish")
def publish_page(request: Request, suite_id: Id, number: Id, session: Session = Depends(db),
                 user: User = Depends(researcher)):
    with _answers():
        suite, version = _version(session, user, suite_id, number)
    out: dict = {}
    with _flashed(request, out):
        suites.publish(session, version)
        return _back(request, f"/sts/suites/{suite.id}?version={number}",
                     f"Version {number} is published: its scenarios can no longer change.")
    return _back(request, f"/sts/suites/{suite.id}?version={number}", out["error"], "error")


@router.post("/sts/suites/{suite_id}/scenarios")
def add_scenarios_page(request: Request, suite_id: Id, rule: str = Form(""), k: str = Form(""),
                       takeover: str = Form(""), recordings: str = Form(""), continuation: str = Form(""),
                       category: str = Form(""), tags: str = Form(""), session: Session = Depends(db),
                       user: User = Depends(researcher)):
    """The suite page's forms: the bulk rule, or one recording at a takeover step, always into
    the draft version (the latest)."""
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    version = suites.latest_version(session, suite)
    out: dict = {}
    with _flashed(request, out):
        ids = [form_number(i, "recordings") for i in _list(recordings)] or None
        result = suites.add_scenarios(
            session, version, rule=rule or None, k=form_number(k, "k"), takeover=form_number(takeover, "takeover"),
            recordings=ids, continuation=form_number(continuation, "continuation") or suites.DEFAULT_CONTINUATION,
            category=category.strip() or None, tags=_list(tags))
        note = f"; {result['skipped']} the suite already had" if result["skipped"] else ""
        note += f"; the rule does not apply to {result['inapplicable']}" if result["inapplicable"] else ""
        return _back(request, f"/sts/suites/{suite.id}",
                     f"Added {len(result['added'])} scenarios to version {version.number}{note}.")
    return _back(request, f"/sts/suites/{suite.id}", f"No scenario added: {out['error']}", "error")


@router.post("/sts/suites/{suite_id}/versions/{number}/generations")
def start_generation_page(request: Request, suite_id: Id, number: Id, agent: str = Form(""),
                          continuations: str = Form(""), seed: str = Form(""), session: Session = Depends(db),
                          user: User = Depends(researcher)):
    with _answers():
        _version(session, user, suite_id, number)
    out: dict = {}
    with _flashed(request, out):
        spec = agent if agent in suites.BUILTIN_AGENTS else form_number(agent, "agent")
        run = _start_run(session, user, suite_id, number, spec,
                         form_number(continuations, "continuations") or generation.DEFAULT_CONTINUATIONS,
                         form_number(seed, "seed") or 0, generation.DEFAULT_BATCH)
        return _back(request, f"/sts/suites/{suite_id}?version={number}#runs",
                     f"Generation run {run.id} queued (job {run.job_id}).")
    return _back(request, f"/sts/suites/{suite_id}?version={number}", f"Not started: {out['error']}", "error")


@router.post("/sts/suites/{suite_id}/versions/{number}/study")
def study_from_version_page(request: Request, suite_id: Id, number: Id, title: str = Form(""),
                            agents: list[str] = Form([]), continuations: str = Form(""),
                            expert_successes: str = Form(""), random_failures: str = Form(""),
                            bundle_size: str = Form(""), gold_rate: str = Form(""),
                            annotations_per_item: str = Form(""), approve_at: str = Form(""),
                            session: Session = Depends(db), user: User = Depends(researcher)):
    """The suite page's form for a study of a published version (the API's study route)."""
    from app.kinds.sts.study import build_study

    with _answers():
        suite, version = _version(session, user, suite_id, number)
    back = f"/sts/suites/{suite_id}?version={number}#study"
    out: dict = {}
    with _flashed(request, out):
        given = {"title": title.strip() or f"{suite.name}, version {number}",
                 "bundle_size": form_number(bundle_size, "bundle_size"),
                 "gold_rate": form_number(gold_rate, "gold_rate", float),
                 "annotations_per_item": form_number(annotations_per_item, "annotations_per_item")}
        settings = StudySettings(**{k: v for k, v in given.items() if v is not None})
        specs = [a if a in suites.BUILTIN_AGENTS else form_number(a, "agents") for a in agents]
        reference = {k: n for k, n in (("expert_successes", form_number(expert_successes, "expert_successes")),
                                       ("random_failures", form_number(random_failures, "random_failures"))) if n}
        # A draft version's refusal (a Conflict) is shown on the page like any other.
        study, summary = build_study(session, session.merge(user), suite, version, settings, agents=specs,
                                     reference=reference, continuations=form_number(continuations, "continuations"),
                                     approve_at=form_number(approve_at, "approve_at", float))
        return _back(request, f"/studies/{study.id}",
                     f"Draft study made from version {number}: {summary['items']} episodes, {summary['reference']} of "
                     "them reference episodes. Launch it when ready.")
    return _back(request, back, f"No study made: {out['error']}", "error")


def _timeline_url(row: Recording) -> str | None:
    """The recording's frames in one PNG strip (rendered once, kept in the blob store); None
    for a recording longer than a strip holds."""
    if row.n_actions + 1 > MAX_FRAMES:
        return None
    return get_store().url(ensure_strip(suites.replayable(row), TIMELINE_TILE), expires_s=6 * 3600)


@router.get("/sts/scenarios/{scenario_id}")
def scenario_page(request: Request, scenario_id: Id, session: Session = Depends(db),
                  user: User = Depends(researcher)):
    """A scenario on its recording's timeline: scrub the frames and take over at another step
    (a draft's scenario moves; a published one's is copied into the draft version)."""
    with _answers():
        sc, suite, version = suites.get_scenario(session, user, scenario_id)
    row = session.get(Recording, sc.recording_id)
    mine = suites.personal_tags(session, user, [sc.id])
    latest = suites.latest_version(session, suite)
    conts = session.execute(select(Continuation).where(Continuation.scenario_id == sc.id)
                            .order_by(Continuation.agent_id, Continuation.index)).scalars().all()
    labels = {a.id: suites.agent_label(a) for a in suites.agents_for(session, suite)}
    return render(request, "kinds/sts/scenario.html", user=user, suite=suite, version=version, latest=latest,
                  scenario=suites.scenario_dict(session, sc, mine.get(sc.id, [])),
                  recording=row, frames_url=_timeline_url(row), n_frames=row.n_actions + 1, max_frames=MAX_FRAMES,
                  continuations=[(labels.get(c.agent_id, f"agent {c.agent_id}"), c) for c in conts])


@router.post("/sts/scenarios/{scenario_id}/takeover")
def takeover_page(request: Request, scenario_id: Id, takeover: str = Form(""), session: Session = Depends(db),
                  user: User = Depends(researcher)):
    with _answers():
        sc, suite, version = suites.get_scenario(session, user, scenario_id)
    out: dict = {}
    with _flashed(request, out):
        step = form_number(takeover, "takeover")
        if step is None:
            raise InputError("choose the takeover step on the timeline", field="takeover")
        if version.state == "draft":
            changed = suites.update_scenario(session, sc, takeover=step)
            gone = changed["continuations_removed"]
            return _back(request, f"/sts/scenarios/{sc.id}", f"The agent now takes over at step {step}"
                         + (f"; {gone} continuations of the old takeover point were removed." if gone else "."))
        result = suites.add_scenarios(session, suites.latest_version(session, suite), takeover=step,
                                      recordings=[sc.recording_id], continuation=sc.continuation,
                                      category=sc.category, tags=[t for t in sc.tags if not t.startswith("rule:")])
        if not result["added"]:
            raise InputError(f"the suite already has this recording taken over at step {step}", field="takeover")
        new = result["added"][0]
        return _back(request, f"/sts/scenarios/{new['id']}",
                     f"Version {version.number} is published, so a new scenario taking over at step {step} "
                     f"was added to version {new['version']}.")
    return _back(request, f"/sts/scenarios/{sc.id}", out["error"], "error")


@router.post("/sts/scenarios/{scenario_id}/tags")
def tag_page(request: Request, scenario_id: Id, tag: str = Form(""), action: str = Form("add"),
             session: Session = Depends(db), user: User = Depends(researcher)):
    with _answers():
        sc, _, _ = suites.get_scenario(session, user, scenario_id)
    out: dict = {}
    with _flashed(request, out):
        if action == "remove":
            suites.remove_tag(session, user, sc, tag)
        else:
            suites.add_tag(session, user, sc, tag)
        return RedirectResponse(f"/sts/scenarios/{sc.id}", status_code=303)
    return _back(request, f"/sts/scenarios/{sc.id}", out["error"], "error")


# --- per-agent metrics to correlate with (agent_metrics.py) ---------------------------------


def _sts_study(session: Session, user: User, study_id: int):
    study = managed_study(session, study_id, user)
    if study.kind != "sts":
        raise HTTPException(404, "not a Standardised Test Suite study")
    return study


def _store_metrics(session: Session, study, data: bytes) -> dict:
    from app.kinds.sts.agent_metrics import parse_metrics

    parsed = parse_metrics(data)
    # A column named like an imported one replaces it; the others stay.
    study.kind_settings = {**(study.kind_settings or {}),
                           "agent_metrics": {**(study.kind_settings or {}).get("agent_metrics", {}), **parsed}}
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
async def import_metrics(study_id: Id, file: UploadFile = UPLOAD, session: Session = Depends(db),
                         user: User = Depends(researcher)) -> dict:
    """Per-agent metrics as CSV: an `agent` column and one column per metric. The leaderboard
    correlates each with the agents' success shares (Spearman)."""
    study = _sts_study(session, user, study_id)
    return {"agent_metrics": _store_metrics(session, study, await read_upload(file))}


@api.delete("/studies/{study_id}/metrics/{name}")
def delete_metric(study_id: Id, name: str, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    return {"agent_metrics": _drop_metric(session, _sts_study(session, user, study_id), name)}


@router.post("/sts/studies/{study_id}/metrics")
async def import_metrics_page(request: Request, study_id: Id, file: UploadFile = File(None),
                              session: Session = Depends(db), user: User = Depends(researcher)):
    study = _sts_study(session, user, study_id)
    try:
        metrics = _store_metrics(session, study, await read_upload(file))
    except InputError as exc:
        return _back(request, f"/studies/{study.id}#sts-metrics", f"Metrics not imported: {exc}", "error")
    return _back(request, f"/studies/{study.id}#sts-metrics",
                 f"Imported; the study now has {len(metrics)} metrics to correlate with.")


@router.post("/sts/studies/{study_id}/metrics/delete")
def delete_metric_page(request: Request, study_id: Id, name: str = Form(""), session: Session = Depends(db),
                       user: User = Depends(researcher)):
    study = _sts_study(session, user, study_id)
    _drop_metric(session, study, name)
    return _back(request, f"/studies/{study.id}#sts-metrics", f"Removed the metric {name!r}.")


# --- failures classified with the paper's error types (failures.py) -------------------------

admin_only = require("admin")


class ReviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error_type: str | None = Field(default=None, max_length=32)
    note: str = Field(default="", max_length=2000)


def _classify(session: Session, user: User, study_id: int, item_id: int, error_type: str | None, note: str) -> dict:
    from app.kinds.sts.failures import classify

    study = _sts_study(session, user, study_id)
    try:
        return classify(session, study, item_id, error_type, note, user)
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from None


@api.get("/studies/{study_id}/failures")
def list_failures(study_id: Id, session: Session = Depends(db), user: User = Depends(admin_only)) -> dict:
    """The continuations people marked a failure (or tied on), disputed first, with their
    classification; and the error types to classify them with."""
    from app.kinds.sts.failures import ERROR_TYPES, queue

    study = _sts_study(session, user, study_id)
    return {"error_types": {t: {"source": s, "description": d} for t, (s, d) in ERROR_TYPES.items()},
            "failures": queue(session, study)}


@api.put("/studies/{study_id}/failures/{item_id}")
def classify_failure(study_id: Id, item_id: Id, body: ReviewIn, session: Session = Depends(db),
                     user: User = Depends(admin_only)) -> dict:
    """Classify a failed continuation ({"error_type", "note"}; a null error type clears it)."""
    return _classify(session, user, study_id, item_id, body.error_type, body.note)


@router.get("/sts/studies/{study_id}/failures")
def failures_page(request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(admin_only)):
    from app.kinds.sts.failures import ERROR_TYPES, SOURCES, queue

    study = _sts_study(session, user, study_id)
    return render(request, "kinds/sts/failures.html", user=user, study=study, rows=queue(session, study),
                  error_types=ERROR_TYPES, sources=SOURCES)


@router.get("/sts/studies/{study_id}/failures/{item_id}")
def failure_page(request: Request, study_id: Id, item_id: Id, session: Session = Depends(db),
                 user: User = Depends(admin_only)):
    from app.kinds.sts.failures import ERROR_TYPES, SOURCES, queue

    study = _sts_study(session, user, study_id)
    row = next((r for r in queue(session, study) if r["item_id"] == item_id), None)
    if row is None:
        raise HTTPException(404, "no failed continuation with that id in this study")
    from app.studies.models import Item

    payload = session.get(Item, item_id).payload
    return render(request, "kinds/sts/failure.html", user=user, study=study, row=row, error_types=ERROR_TYPES,
                  sources=SOURCES, n_frames=payload["n_frames"], takeover=payload["takeover"],
                  frames_url=get_store().url(payload["frames_key"], expires_s=3600))


@router.post("/sts/studies/{study_id}/failures/{item_id}")
def classify_failure_page(request: Request, study_id: Id, item_id: Id, error_type: str = Form(""),
                          note: str = Form(""), back: str = Form("list"), session: Session = Depends(db),
                          user: User = Depends(admin_only)):
    url = (f"/sts/studies/{study_id}/failures/{item_id}" if back == "item"
           else f"/sts/studies/{study_id}/failures#failure-{item_id}")
    try:
        out = _classify(session, user, study_id, item_id, error_type or None, note)
    except InputError as exc:
        return _back(request, url, f"Not saved: {exc}", "error")
    return _back(request, url, f"Continuation {item_id}: " + (out["error_type"] or "classification cleared") + ".")
