"""Suites, their versions and scenarios (mined in bulk or on a recording's timeline, tagged,
moved); a published version refuses every change with 409."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.deps import db, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.sts import suites
from app.kinds.sts.env import get_simulator
from app.kinds.sts.frames import MAX_FRAMES, ensure_strip
from app.kinds.sts.mining import MAX_CONTINUATION, MAX_TAGS, RULES
from app.kinds.sts.models import Continuation, Recording
from app.kinds.sts.views.common import (
    TIMELINE_TILE,
    Count,
    Place,
    _answers,
    _flashed,
    _list,
    _version,
    at_scenario,
    at_version,
    researcher,
)
from app.kinds.sts.views.runs import _runs
from app.params import MAX_ID, NOT_BLANK, NOT_BOOL, BodyId, FormText, Id, exactly_one_of
from app.storage import get_store
from app.web import back, form_number, render

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])  # pages
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])


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
def publish_version(suite_id: Id, number: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Make the draft immutable (409 if it is published already)."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
        return suites.version_summary(session, suites.publish(session, version))


@api.get("/suites/{suite_id}/versions/{number}/scenarios")
def list_scenarios(suite_id: Id, number: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Version n's scenarios: all those added in versions 1..n, with the caller's own tags."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
    return {
        "version": suites.version_summary(session, version),
        "scenarios": suites.scenario_list(session, user, version),
    }


# A scenario's category and tags: non-blank texts of at most MAX_TAG characters, 20 tags.
Tag = Annotated[str, Field(min_length=1, max_length=suites.MAX_TAG, pattern=NOT_BLANK)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS)]
Steps = Annotated[int, Field(ge=1, le=MAX_CONTINUATION), NOT_BOOL]


class ScenariosIn(BaseModel):
    # Either a rule (bulk; "before success" with k) or a takeover step (one recording).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            **exactly_one_of(
                {"rule": {"type": "string"}},
                {"takeover": {"type": "integer"}, "recordings": {"type": "array", "minItems": 1, "maxItems": 1}},
            ),
            "if": {"required": ["rule"], "properties": {"rule": {"const": "before success"}}},
            "then": {"required": ["k"], "properties": {"k": {"type": "integer", "minimum": 1}}},
        },
    )
    rule: Literal[RULES] | None = None
    k: Count | None = None
    takeover: Count | None = None
    recordings: Annotated[list[BodyId], Field(min_length=1)] | None = None
    continuation: Steps = suites.DEFAULT_CONTINUATION
    category: Tag | None = None
    tags: Tags = Field(default_factory=list)


@api.post("/suites/{suite_id}/versions/{number}/scenarios", status_code=201)
def add_scenarios(
    suite_id: Id, number: Id, body: ScenariosIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """Scenarios for the draft version n, in bulk by `rule` ("first step", "mission given",
    "before success" with `k`) over `recordings` (ids; default all of the suite owner's,
    leaving out those the rule does not apply to), or one recording at an explicit `takeover`
    step. `continuation`: the agent's own steps; `category`: overrides the level's family;
    `tags`: the suite's tags. Returns what was added and how many the suite already had."""
    with _answers():
        _, version = _version(session, user, suite_id, number)
        return suites.add_scenarios(session, version, **body.model_dump())


@api.get("/suites/{suite_id}/versions/{number}/agents")
def version_agents(suite_id: Id, number: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
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
def change_scenario(
    scenario_id: Id, body: ScenarioPatch, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
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


@router.get("/sts/suites")
def suites_page(request: Request, session: Session = Depends(db), user: User = Depends(researcher)):
    rows = [suites.suite_dict(session, s) for s in suites.suites_of(session, user)]
    return render(
        request,
        "kinds/sts/suites.html",
        user=user,
        suites=rows,
        recordings=suites.recordings_of(session, user),
        levels=get_simulator().levels(),
    )


@router.post("/sts/suites")
def create_suite_page(
    request: Request,
    name: FormText = "",
    description: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    out: dict = {}
    with _flashed(request, out):
        suite = suites.create_suite(session, session.merge(user), name, description)
        return back(request, f"/sts/suites/{suite.id}", f"Suite {suite.name!r} created with version 1, a draft.")
    return back(request, "/sts/suites", f"Not created: {out['error']}", "error")


@router.get("/sts/suites/{suite_id}")
def suite_page(
    request: Request,
    suite_id: Id,
    version: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
        versions = suites.versions_of(session, suite)
        shown = versions[-1] if version is None else suites.get_version(session, suite, version)
    return render(
        request,
        "kinds/sts/suite.html",
        user=user,
        suite=suite,
        versions=[suites.version_summary(session, v) for v in versions],
        shown=shown,
        latest=versions[-1],
        scenarios=suites.scenario_list(session, user, shown),
        scores=suites.simulator_scores(session, shown),
        **_runs(session, suite),
        agents=suites.agents_for(session, suite),
        rules=RULES,
        recordings=suites.recordings_of(session, user, suite.owner_id),
        default_continuation=suites.DEFAULT_CONTINUATION,
    )


@router.post("/sts/suites/{suite_id}/versions")
def start_version_page(
    request: Request, suite_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
):
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    out: dict = {}
    with _flashed(request, out):
        v = suites.new_version(session, suite)
        return back(request, f"/sts/suites/{suite.id}", f"Version {v.number} started: add its scenarios.")
    return back(request, f"/sts/suites/{suite.id}", out["error"], "error")


@router.post("/sts/suites/{suite_id}/versions/{number}/publish")
def publish_page(request: Request, place: Place = Depends(at_version)):
    suite, number = place.suite, place.version.number
    out: dict = {}
    with _flashed(request, out):
        suites.publish(place.session, place.version)
        return back(
            request,
            f"/sts/suites/{suite.id}?version={number}",
            f"Version {number} is published: its scenarios can no longer change.",
        )
    return back(request, f"/sts/suites/{suite.id}?version={number}", out["error"], "error")


@router.post("/sts/suites/{suite_id}/scenarios")
def add_scenarios_page(
    request: Request,
    suite_id: Id,
    rule: FormText = "",
    k: FormText = "",
    takeover: FormText = "",
    recordings: FormText = "",
    continuation: FormText = "",
    category: FormText = "",
    tags: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    """The suite page's forms: the bulk rule, or one recording at a takeover step, always into
    the draft version (the latest)."""
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    version = suites.latest_version(session, suite)
    out: dict = {}
    with _flashed(request, out):
        ids = [form_number(i, "recordings") for i in _list(recordings)] or None
        result = suites.add_scenarios(
            session,
            version,
            rule=rule or None,
            k=form_number(k, "k"),
            takeover=form_number(takeover, "takeover"),
            recordings=ids,
            continuation=form_number(continuation, "continuation") or suites.DEFAULT_CONTINUATION,
            category=category.strip() or None,
            tags=_list(tags),
        )
        note = f"; {result['skipped']} the suite already had" if result["skipped"] else ""
        note += f"; the rule does not apply to {result['inapplicable']}" if result["inapplicable"] else ""
        return back(
            request,
            f"/sts/suites/{suite.id}",
            f"Added {len(result['added'])} scenarios to version {version.number}{note}.",
        )
    return back(request, f"/sts/suites/{suite.id}", f"No scenario added: {out['error']}", "error")


def _timeline_url(row: Recording) -> str | None:
    """The recording's frames in one PNG strip (rendered once, kept in the blob store); None
    for a recording longer than a strip holds."""
    if row.n_actions + 1 > MAX_FRAMES:
        return None
    return get_store().url(ensure_strip(suites.replayable(row), TIMELINE_TILE), expires_s=6 * 3600)


@router.get("/sts/scenarios/{scenario_id}")
def scenario_page(request: Request, place: Place = Depends(at_scenario)):
    """A scenario on its recording's timeline: scrub the frames and take over at another step
    (a draft's scenario moves; a published one's is copied into the draft version)."""
    session, user, sc, suite, version = place.session, place.user, place.scenario, place.suite, place.version
    row = session.get(Recording, sc.recording_id)
    mine = suites.personal_tags(session, user, [sc.id])
    latest = suites.latest_version(session, suite)
    conts = (
        session.execute(
            select(Continuation)
            .where(Continuation.scenario_id == sc.id)
            .order_by(Continuation.agent_id, Continuation.index)
        )
        .scalars()
        .all()
    )
    labels = {a.id: suites.agent_label(a) for a in suites.agents_for(session, suite)}
    return render(
        request,
        "kinds/sts/scenario.html",
        user=user,
        suite=suite,
        version=version,
        latest=latest,
        scenario=suites.scenario_dict(session, sc, mine.get(sc.id, [])),
        recording=row,
        frames_url=_timeline_url(row),
        n_frames=row.n_actions + 1,
        max_frames=MAX_FRAMES,
        continuations=[(labels.get(c.agent_id, f"agent {c.agent_id}"), c) for c in conts],
    )


@router.post("/sts/scenarios/{scenario_id}/takeover")
def takeover_page(request: Request, takeover: FormText = "", place: Place = Depends(at_scenario)):
    session, sc, suite, version = place.session, place.scenario, place.suite, place.version
    out: dict = {}
    with _flashed(request, out):
        step = form_number(takeover, "takeover")
        if step is None:
            raise InputError("choose the takeover step on the timeline", field="takeover")
        if version.state == "draft":
            changed = suites.update_scenario(session, sc, takeover=step)
            gone = changed["continuations_removed"]
            return back(
                request,
                f"/sts/scenarios/{sc.id}",
                f"The agent now takes over at step {step}"
                + (f"; {gone} continuations of the old takeover point were removed." if gone else "."),
            )
        result = suites.add_scenarios(
            session,
            suites.latest_version(session, suite),
            takeover=step,
            recordings=[sc.recording_id],
            continuation=sc.continuation,
            category=sc.category,
            tags=[t for t in sc.tags if not t.startswith("rule:")],
        )
        if not result["added"]:
            raise InputError(f"the suite already has this recording taken over at step {step}", field="takeover")
        new = result["added"][0]
        return back(
            request,
            f"/sts/scenarios/{new['id']}",
            f"Version {version.number} is published, so a new scenario taking over at step {step} "
            f"was added to version {new['version']}.",
        )
    return back(request, f"/sts/scenarios/{sc.id}", out["error"], "error")


@router.post("/sts/scenarios/{scenario_id}/tags")
def tag_page(request: Request, tag: FormText = "", action: str = Form("add"), place: Place = Depends(at_scenario)):
    sc = place.scenario
    out: dict = {}
    with _flashed(request, out):
        if action == "remove":
            suites.remove_tag(place.session, place.user, sc, tag)
        else:
            suites.add_tag(place.session, place.user, sc, tag)
        return RedirectResponse(f"/sts/scenarios/{sc.id}", status_code=303)
    return back(request, f"/sts/scenarios/{sc.id}", out["error"], "error")
