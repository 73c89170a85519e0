"""The human row (issue 30.4) on both backends: a play study of a published suite version's
scenarios, played on the real pages from each scenario's takeover state, its answers stored as
continuations of the built-in agent "people" (once), and a study of the version with "people"
among its agents puts people on the leaderboard beside the expert, judged like any agent."""

from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.kinds import get_kind
from app.kinds.sts.models import Continuation, Recording, Scenario
from app.kinds.sts.recordings import Replayable, check, expert_recording
from app.studies import assignment, services
from app.studies.models import Assignment, Item, Study
from tests.conftest import login, make_user
from tests.integration.test_sts import _truth
from tests.integration.test_sts_play import _enter
from tests.integration.test_sts_suites import _generate, _json, _mine, _recordings, _suite

LEVEL = "BabyAI-GoToLocal-v0"
K = 2  # the scenarios take over this many expert steps before its success


def _rest(session, item: Item) -> list[int]:
    """The expert's own actions after the scenario's takeover (it succeeds at the last one)."""
    sc = session.get(Scenario, item.payload["scenario"])
    return list(session.get(Recording, sc.recording_id).actions[sc.takeover :])


def test_people_play_the_scenarios_and_become_a_row_of_the_leaderboard(app, client, session):
    from app.leaderboards.service import compute

    owner = make_user(session, "researcher")
    api = _json(client, login(client, owner))
    _recordings(api, [2, 3, 6])  # the expert takes more than K steps on each
    suite = _suite(api)
    assert _mine(api, suite, 1, rule="before success", k=K).status_code == 201
    url = f"/api/v1/sts/suites/{suite}/versions/1/play-study"
    body = {"title": "People play", "bundle_size": 3, "annotations_per_item": 2}
    assert api("POST", url, body).status_code == 409  # a draft version: its scenarios may change
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish").status_code == 200
    r = api("POST", url, body)
    assert r.status_code == 201, r.text
    assert (r.json()["items"], r.json()["scenarios"]) == (3, 3)
    study = session.get(Study, r.json()["study"])
    assert study.kind_settings["mode"] == "play" and study.kind_settings["suite"]["id"] == suite
    scenarios = {s.id: s for s in session.scalars(select(Scenario).where(Scenario.suite_id == suite))}
    for item in session.scalars(select(Item).where(Item.study_id == study.id)):
        sc = scenarios[item.payload["scenario"]]
        assert (
            sc.takeover > 0
            and item.payload["context"] == session.get(Recording, sc.recording_id).actions[: sc.takeover]
        )
        assert item.payload["max_steps"] == sc.continuation
    services.set_state(session, study, "live", owner)

    # One person plays the bundle on the real pages, from each takeover, as the expert would.
    with TestClient(app) as worker:
        page = _enter(worker, study.slug, "STEADY")
        played = 0
        while 'id="sts-play"' in page:
            aid = int(re.search(r'name="assignment_id" value="(\d+)"', page).group(1))
            item = session.get(Item, session.get(Assignment, aid).item_id)
            # The scenario and its context stay on the server, as the seed does.
            assert set(get_kind("sts").public_payload(item.payload)) == {"mode", "instruction", "max_steps", "tile"}
            url = re.search(r'data-url="([^"]+)"', page).group(1)
            start = worker.get(url).json()
            assert (start["step"], start["max_steps"], start["done"]) == (0, item.payload["max_steps"], False)
            rest = _rest(session, item)
            assert len(rest) == K
            end = worker.get(url, params={"actions": ",".join(map(str, rest))}).json()
            assert (end["step"], end["done"], end["success"]) == (K, True, True)
            too_long = [0] * (item.payload["max_steps"] + 1)  # past the continuation length
            assert worker.get(url, params={"actions": ",".join(map(str, too_long))}).status_code == 422
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
            key = re.search(r'name="idempotency_key" value="([^"]+)"', page).group(1)
            form = {"csrf_token": csrf, "assignment_id": str(aid), "idempotency_key": key, "actions": json.dumps(rest)}
            page = worker.post(f"/task/{study.slug}/answer", data=form).text
            played += 1
        assert played == 3 and "Thank you" in page
    # Another turns left and back, through the engine: never a success.
    bundle = assignment.enter(session, study, "prolific", "DIZZY")
    a = assignment.next_item(session, study, bundle.id)
    while a is not None:
        assignment.submit(session, study, bundle.id, a.id, {"actions": [0, 1]}, f"k{a.id}")
        a = assignment.next_item(session, study, bundle.id)

    convert = {"study_id": study.id}
    r = api("POST", "/api/v1/sts/continuations/from-study", convert)
    assert r.status_code == 201, r.text
    out = r.json()
    assert (out["agent"], out["created"], out["existing"]) == ("people", 6, 0)
    steady, dizzy = assignment.pseudonym("prolific", "STEADY"), assignment.pseudonym("prolific", "DIZZY")
    assert sorted(c["annotator"] for c in out["continuations"]) == sorted([steady] * 3 + [dizzy] * 3)
    assert "STEADY" not in r.text and "DIZZY" not in r.text
    session.expire_all()
    stored = session.scalars(select(Continuation).where(Continuation.agent_id == out["agent_id"])).all()
    assert len(stored) == 6 and {(c.scenario_id, c.index) for c in stored} == {
        (s, i) for s in scenarios for i in (0, 1)
    }
    for c in stored:
        sc = scenarios[c.scenario_id]
        rec = session.get(Recording, sc.recording_id)
        # The actions are the person's own, after the takeover, as an agent's continuation's.
        whole = Replayable(rec.level, rec.seed, rec.mission, [*rec.actions[: sc.takeover], *c.actions])
        if c.notes.endswith(steady):
            assert c.actions == rec.actions[sc.takeover :] and (c.success_step, c.end) == (K, "success")
            assert check(whole).success == sc.takeover + K
        else:
            assert c.actions == [0, 1] and (c.success_step, c.end) == (None, "length")
            assert check(whole).success is None
    again = api("POST", "/api/v1/sts/continuations/from-study", convert).json()
    assert (again["created"], again["existing"]) == (0, 6)
    assert len(session.scalars(select(Continuation).where(Continuation.agent_id == out["agent_id"])).all()) == 6

    # People are never generated.
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/generations", {"agent": "people", "continuations": 2})
    assert r.status_code == 409 and r.json()["field"] == "agent" and "play study" in r.json()["detail"]

    # A study of the version with people among its agents: marked like any agent's continuations.
    _generate(api, suite, 1, "expert", c=2)
    from app import jobs

    jobs.run_queued_once()
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/1/study",
        {
            "title": "Agents and people",
            "agents": ["expert", "people"],
            "bundle_size": 12,
            "gold_rate": 0.0,
            "annotations_per_item": 1,
        },
    )
    assert r.status_code == 201, r.text
    assert r.json()["continuations_per_scenario"] == {"expert": 2, "people": 2}
    marked = session.get(Study, r.json()["study"])
    services.set_state(session, marked, "live", owner)
    bundle = assignment.enter(session, marked, "prolific", "JUDGE")
    a = assignment.next_item(session, marked, bundle.id)
    while a is not None:
        marker, step = _truth(session.get(Item, a.item_id))
        assignment.submit(session, marked, bundle.id, a.id, {"marker": marker, "step": step}, f"k{a.id}")
        a = assignment.next_item(session, marked, bundle.id)
    session.expire_all()
    tables = {t["key"]: t for t in compute(session, marked)["extra"]["tables"]}
    rows = {row["agent"]: row for row in tables["sts_agents"]["rows"]}
    assert set(rows) == {"expert", "people"}
    # By hand: 3 of people's 6 continuations succeed (the steady player's), all 6 of the expert's.
    assert rows["people"]["n"] == 6 and rows["people"]["success"]["mean"] == 0.5 == rows["people"]["simulator"]
    assert rows["expert"]["success"]["mean"] == 1.0

    # And side by side: people's plays paired with the expert's continuations of each scenario.
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/1/study",
        {"title": "Pairs with people", "agents": ["expert", "people"], "pairs": True, "annotations_per_item": 1},
    )
    assert r.status_code == 201 and r.json()["items"] == 3 * 2, r.text
    for item in session.scalars(select(Item).where(Item.study_id == r.json()["study"])):
        assert {item.reference["a"]["agent"], item.reference["b"]["agent"]} == {"expert", "people"}

    # Only the study's owner or an admin converts; a study of markers is not one of plays.
    r = api("POST", "/api/v1/sts/continuations/from-study", {"study_id": marked.id})
    assert r.status_code == 409 and r.json()["field"] == "study_id"
    other = make_user(session, "researcher")
    client.post("/logout", headers={"X-CSRF-Token": login(client, owner)})
    theirs = _json(client, login(client, other))
    assert theirs("POST", "/api/v1/sts/continuations/from-study", convert).status_code == 404


def _published(client, session):
    """A researcher logged in, with a suite whose version 1 (one scenario) is published."""
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    api = _json(client, csrf)
    _recordings(api, [2])
    suite = _suite(api)
    assert _mine(api, suite, 1, rule="before success", k=K).status_code == 201
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish").status_code == 200
    return owner, csrf, api, suite


def test_the_suite_page_makes_a_play_study_and_its_page_stores_the_plays(client, session):
    owner, csrf, api, suite = _published(client, session)
    page = client.get(f"/sts/suites/{suite}?version=1").text
    assert f'action="/sts/suites/{suite}/versions/1/play-study"' in page
    assert '<option value="people">' not in page  # people are never generated: not offered for a run
    r = client.post(
        f"/sts/suites/{suite}/versions/1/play-study",
        data={"csrf_token": csrf, "annotations_per_item": "1"},
        follow_redirects=True,
    )
    assert r.status_code == 200 and "Draft play study made from version 1: 1 scenarios" in r.text
    study = session.scalar(select(Study).where(Study.owner_id == owner.id))
    assert f'action="/sts/studies/{study.id}/people"' in r.text
    services.set_state(session, study, "live", owner)
    bundle = assignment.enter(session, study, "prolific", "P1")
    a = assignment.next_item(session, study, bundle.id)
    assignment.submit(session, study, bundle.id, a.id, {"actions": _rest(session, session.get(Item, a.item_id))}, "k")
    r = client.post(f"/sts/studies/{study.id}/people", data={"csrf_token": csrf}, follow_redirects=True)
    assert "Stored 1 plays as continuations of people" in r.text
    # As recordings, a scenario's plays are whole episodes: the context, then the person's moves.
    r = api("POST", "/api/v1/sts/recordings/from-study", {"study_id": study.id})
    assert r.status_code == 201 and r.json()["created"] == 1, r.text
    rec = session.get(Recording, r.json()["recordings"][0]["id"])
    assert rec.actions == expert_recording(LEVEL, 2).actions and rec.success_step == rec.n_actions


def test_a_play_study_offers_no_adaptive_allocation(client, session):
    """A play study ranks nobody (its plays become the human row of another study): its page has
    no adaptive card, and turning it on is refused: at creation as the request's fault (422),
    on the existing study by the API (409, its kind decides) and by the page's form; nothing
    is stored."""
    from tests.integration.test_crowd_integrity import csrf as page_csrf

    owner, csrf, api, suite = _published(client, session)
    url = f"/api/v1/sts/suites/{suite}/versions/1/play-study"
    r = api("POST", url, {"title": "Adaptive play", "adaptive": True})
    assert r.status_code == 422 and r.json()["field"] == "adaptive" and "ranks none" in r.json()["detail"], r.text
    assert session.scalar(select(Study).where(Study.owner_id == owner.id)) is None
    r = api("POST", url, {"title": "Play"})
    assert r.status_code == 201, r.text
    study = session.get(Study, r.json()["study"])
    page = client.get(f"/studies/{study.id}").text
    assert 'id="adaptive-on"' not in page and 'id="adaptive"' not in page
    r = api("PATCH", f"/api/v1/studies/{study.id}", {"adaptive": True})
    assert r.status_code == 409 and r.json()["field"] == "adaptive" and "ranks none" in r.json()["detail"], r.text
    r = client.post(f"/studies/{study.id}/adaptive", data={"csrf_token": page_csrf(page), "adaptive": "on"})
    assert r.status_code == 422 and 'id="adaptive-error"' in r.text and "ranks none" in r.text
    assert 'id="adaptive-on"' not in r.text  # the refusal, without a form to tick again
    session.expire_all()
    assert session.get(Study, study.id).adaptive is False
