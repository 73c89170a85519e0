"""STS suites on both backends (paper 004, sections 3.1-3.2 and 5.1): recordings stored and
replayed, scenarios mined by rule or at a chosen takeover point, versions that cannot change
once published, generation runs through the in-process worker (exactly C continuations per
scenario, the simulator's outcomes, idempotent, cancellable), and a study built from a
published version with reference episodes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select, update

from app import jobs
from app.kinds.sts import generation
from app.kinds.sts.models import Continuation, GenerationRun, Recording, Scenario
from app.kinds.sts.recordings import Replayable, check, expert_recording
from app.studies.models import Item, Study
from tests.conftest import login, make_user

LEVEL = "BabyAI-GoToLocal-v0"
SEEDS = [1, 2, 3]
LENGTH = 12  # the agents' own steps: enough for the expert on these seeds, short for random


def _json(client, csrf):
    """A client whose JSON posts carry the session's CSRF token (as the pages' htmx does)."""

    def call(method, url, body=None, **kw):
        return client.request(method, url, json=body, headers={"X-CSRF-Token": csrf}, **kw)

    return call


@pytest.fixture
def owner(session):
    return make_user(session, "researcher")


@pytest.fixture
def api(client, owner):
    return _json(client, login(client, owner))


def _recordings(api, seeds=SEEDS) -> list[int]:
    r = api("POST", "/api/v1/sts/recordings/expert", {"level": LEVEL, "seeds": seeds})
    assert r.status_code == 201, r.text
    return [x["id"] for x in r.json()["recordings"]]


def _suite(api, name="Go to") -> int:
    r = api("POST", "/api/v1/sts/suites", {"name": name, "description": "small rooms"})
    assert r.status_code == 201, r.text
    assert [(v["number"], v["state"]) for v in r.json()["versions"]] == [(1, "draft")]
    return r.json()["id"]


def _mine(api, suite, number, **body):
    return api("POST", f"/api/v1/sts/suites/{suite}/versions/{number}/scenarios", {"continuation": LENGTH, **body})


def _published_suite(api, seeds=SEEDS) -> tuple[int, list[int]]:
    recs = _recordings(api, seeds)
    suite = _suite(api)
    assert _mine(api, suite, 1, rule="first step", tags=["small"]).status_code == 201
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish").status_code == 200
    return suite, recs


def test_published_versions_refuse_every_change_and_older_versions_keep_their_scenarios(api, client, session):
    recs = _recordings(api)
    suite = _suite(api)
    r = _mine(api, suite, 1, rule="first step", recordings=recs[:2], tags=["easy"])
    assert r.status_code == 201, r.text
    v1 = [s["id"] for s in r.json()["added"]]
    assert len(v1) == 2 and r.json()["added"][0]["category"] == "go to"
    # One draft at a time: version 2 waits for version 1 to be published.
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions").status_code == 409
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish")
    assert r.status_code == 200 and r.json()["state"] == "published" and r.json()["published_at"]

    # Published: nothing added, changed or removed, with a message that says why.
    r = _mine(api, suite, 1, rule="first step", recordings=recs[2:])
    assert r.status_code == 409 and "published" in r.json()["detail"] and "version 2" in r.json()["detail"]
    assert api("PATCH", f"/api/v1/sts/scenarios/{v1[0]}", {"category": "other"}).status_code == 409
    assert api("PATCH", f"/api/v1/sts/scenarios/{v1[0]}", {"takeover": 1}).status_code == 409
    assert api("DELETE", f"/api/v1/sts/scenarios/{v1[0]}").status_code == 409
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish").status_code == 409
    session.expire_all()
    assert session.get(Scenario, v1[0]).category == "go to" and session.get(Scenario, v1[0]).takeover == 0

    r = api("POST", f"/api/v1/sts/suites/{suite}/versions")
    assert r.status_code == 201 and (r.json()["number"], r.json()["state"]) == (2, "draft")
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions").status_code == 409
    # The same rule over every recording: the two the suite has are skipped, the third added.
    r = _mine(api, suite, 2, rule="first step", tags=["batch 2"])
    assert r.status_code == 201 and len(r.json()["added"]) == 1 and r.json()["skipped"] == 2
    extra = _mine(api, suite, 2, takeover=2, recordings=[recs[1]], category="late start").json()["added"][0]
    # A draft's scenario may change (a new takeover point) or go.
    r = api("PATCH", f"/api/v1/sts/scenarios/{extra['id']}", {"takeover": 1, "tags": ["moved"]})
    assert r.status_code == 200 and r.json()["takeover"] == 1 and r.json()["tags"] == ["moved"]

    versions = {v["number"]: v for v in api("GET", f"/api/v1/sts/suites/{suite}/versions").json()["versions"]}
    assert (versions[1]["scenarios"], versions[1]["added"], versions[1]["per_category"]) == (2, 2, {"go to": 2})
    assert versions[2]["scenarios"] == 4 and versions[2]["per_category"] == {"go to": 3, "late start": 1}
    old = api("GET", f"/api/v1/sts/suites/{suite}/versions/1/scenarios").json()["scenarios"]
    new = api("GET", f"/api/v1/sts/suites/{suite}/versions/2/scenarios").json()["scenarios"]
    assert [s["id"] for s in old] == v1 and {s["version"] for s in old} == {1}
    assert [s["id"] for s in new][:2] == v1 and [s["version"] for s in new] == [1, 1, 2, 2]
    assert api("DELETE", f"/api/v1/sts/scenarios/{extra['id']}").status_code == 200
    assert len(api("GET", f"/api/v1/sts/suites/{suite}/versions/2/scenarios").json()["scenarios"]) == 3

    # Personal tags: the caller's own, on published scenarios too, and no part of the version.
    r = api("POST", f"/api/v1/sts/scenarios/{v1[0]}/tags", {"tag": "hard for bc"})
    assert r.status_code == 200 and r.json()["my_tags"] == ["hard for bc"]
    listed = api("GET", f"/api/v1/sts/suites/{suite}/versions/1/scenarios").json()["scenarios"][0]
    assert listed["my_tags"] == ["hard for bc"] and listed["tags"] == ["easy", "rule:first step"]
    r = api("DELETE", f"/api/v1/sts/scenarios/{v1[0]}/tags/hard for bc")
    assert r.status_code == 200 and r.json()["my_tags"] == []

    # Another researcher sees none of it.
    client.cookies.clear()
    other = _json(client, login(client, make_user(session, "researcher")))
    assert other("GET", f"/api/v1/sts/suites/{suite}").status_code == 404
    assert other("POST", f"/api/v1/sts/scenarios/{v1[0]}/tags", {"tag": "x"}).status_code == 404
    assert other("GET", "/api/v1/sts/suites").json()["suites"] == []


def test_a_refusal_to_change_a_published_version_names_the_next_step_as_it_stands(api):
    """Once version 3 is the draft, a change to version 1 is pointed at version 3, not at a
    "version 2" that is already published; with no draft, at the version to start."""
    recs = _recordings(api)
    suite = _suite(api)

    def refused(version: int, rec: int) -> str:
        r = _mine(api, suite, version, rule="first step", recordings=[rec])
        assert r.status_code == 409, r.text
        return r.json()["detail"]

    for number, rec in ((1, recs[0]), (2, recs[1])):
        assert _mine(api, suite, number, rule="first step", recordings=[rec]).status_code == 201
        assert api("POST", f"/api/v1/sts/suites/{suite}/versions/{number}/publish").status_code == 200
        if number == 1:
            assert api("POST", f"/api/v1/sts/suites/{suite}/versions").json()["number"] == 2
    assert refused(1, recs[2]) == (
        "field 'version': version 1 of 'Go to' is published and cannot change: no scenario can be "
        "added. Start version 3 to add scenarios"
    )
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions").json()["number"] == 3
    assert refused(1, recs[2]) == (
        "field 'version': version 1 of 'Go to' is published and cannot change: no scenario can be "
        "added. Add scenarios to version 3, the draft"
    )
    assert refused(2, recs[2]).endswith("Add scenarios to version 3, the draft")
    assert _mine(api, suite, 3, rule="first step", recordings=[recs[2]]).status_code == 201


def test_bulk_rules_take_over_where_they_say(api, session, owner):
    recs = _recordings(api)
    # An uploaded recording that never succeeds: a few turns on the spot.
    mission = expert_recording(LEVEL, 4).mission
    line = {"id": "turns", "level": LEVEL, "seed": 4, "mission": mission, "actions": ["left", "left", "right"]}
    r = api("POST", "/api/v1/sts/recordings", files={"file": ("r.jsonl", json.dumps(line).encode())})
    assert r.status_code == 201 and r.json()["recordings"][0]["success_step"] is None
    turns = r.json()["recordings"][0]["id"]
    success = {x.id: x.success_step for x in session.scalars(select(Recording).where(Recording.id.in_(recs)))}
    assert all(s == len(expert_recording(LEVEL, seed).actions) for s, seed in zip(success.values(), SEEDS))

    def takeovers(rule, **body):
        suite = _suite(api, name=f"{rule} {body}")
        r = _mine(api, suite, 1, rule=rule, **body)
        assert r.status_code == 201, r.text
        return {s["recording"]: s["takeover"] for s in r.json()["added"]}, r.json()

    assert takeovers("first step")[0] == {**{i: 0 for i in recs}, turns: 0}
    assert takeovers("mission given")[0] == {**{i: 0 for i in recs}, turns: 0}  # BabyAI: with the first observation
    got, out = takeovers("before success", k=2)
    # k steps before the expert's success; the recording that never succeeds is left out.
    assert got == {i: success[i] - 2 for i in recs if success[i] >= 2} and turns not in got
    assert out["inapplicable"] == 1 + sum(success[i] < 2 for i in recs)
    assert all("rule:before success" in s["tags"] for s in out["added"])
    # Named explicitly, a recording the rule cannot take is refused by name (409: the request is
    # well formed, the stored recording does not allow it), and nothing added.
    suite = _suite(api, name="explicit")
    r = _mine(api, suite, 1, rule="before success", k=1, recordings=[recs[0], turns])
    assert r.status_code == 409 and r.json()["field"] == "actions" and "recording turns" in r.json()["detail"]
    r = _mine(api, suite, 1, rule="before success", k=99, recordings=[recs[0]])
    assert r.status_code == 409 and r.json()["field"] == "k"
    r = _mine(api, suite, 1, takeover=success[recs[0]], recordings=[recs[0]])
    assert r.status_code == 409 and r.json()["field"] == "takeover" and "nothing is left" in r.json()["detail"]
    r = _mine(api, suite, 1, takeover=1, recordings=[recs[0]], category="by hand")
    assert r.status_code == 201 and r.json()["added"][0]["takeover"] == 1
    assert r.json()["added"][0]["category"] == "by hand"
    assert session.scalar(select(func.count(Scenario.id)).where(Scenario.suite_id == suite)) == 1


def _line(**change) -> dict:
    rec = expert_recording(LEVEL, 1)
    return {
        "id": "r1",
        "level": LEVEL,
        "seed": 1,
        "mission": rec.mission,
        "actions": rec.actions,
        "actor": "human",
        **change,
    }


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"actions": ["left", 9]}, "actions", "actions[1]"),
        ({"seed": 2}, "mission", "gives the mission"),
        ({"level": "BabyAI-Nowhere-v0"}, "level", "Nowhere"),
        ({"actor": "robot"}, "actor", "robot"),
        ({"id": "kept"}, "id", "already have"),
    ],
)
def test_a_bad_recording_upload_names_its_line_and_field_and_stores_nothing(api, session, change, field, words):
    r = api("POST", "/api/v1/sts/recordings", files={"file": ("k.jsonl", json.dumps(_line(id="kept")).encode())})
    assert r.status_code == 201
    lines = [_line(id="a"), _line(id="b"), _line(**({"id": "c"} | change))]
    data = "\n".join(json.dumps(x) for x in lines).encode()
    r = api("POST", "/api/v1/sts/recordings", files={"file": ("r.jsonl", data)})
    assert r.status_code == 422, r.text
    assert (r.json()["line"], r.json()["field"]) == (3, field) and words in r.json()["detail"]
    assert session.scalar(select(func.count(Recording.id))) == 1


def test_a_recording_upload_over_the_size_limit_is_refused_before_it_is_read(api, session, monkeypatch):
    from app.config import get_settings

    monkeypatch.setenv("MAX_UPLOAD_BYTES", "2000")
    get_settings.cache_clear()
    data = "\n".join(json.dumps(_line(id=f"r{i}")) for i in range(30)).encode()
    r = api("POST", "/api/v1/sts/recordings", files={"file": ("r.jsonl", data)})
    assert r.status_code == 422 and r.json()["field"] == "file" and "limit" in r.json()["detail"]
    assert session.scalar(select(func.count(Recording.id))) == 0


def _generate(api, suite, number, agent, c=2, **extra):
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/{number}/generations",
        {"agent": agent, "continuations": c, "batch_size": 4, **extra},
    )
    assert r.status_code == 202, r.text
    return r.json()


def _stored(session, agent_id) -> list[Continuation]:
    session.expire_all()
    return list(
        session.scalars(
            select(Continuation)
            .where(Continuation.agent_id == agent_id)
            .order_by(Continuation.scenario_id, Continuation.index)
        )
    )


def test_generation_stores_c_continuations_per_scenario_with_the_simulators_outcomes(api, session):
    suite, _ = _published_suite(api)
    scenarios = list(session.scalars(select(Scenario).where(Scenario.suite_id == suite)))
    runs = {name: _generate(api, suite, 1, name) for name in ("expert", "random")}
    assert jobs.run_queued_once() == 2  # the in-process worker's loop, once
    for name, started in runs.items():
        state = api("GET", f"/api/v1/sts/generations/{started['run']}").json()
        assert state["state"] == "done" and (state["stored"], state["expected"]) == (6, 6), state
        assert (state["done"], state["total"]) == (6, 6)
        rows = _stored(session, state["agent_id"])
        assert sorted((c.scenario_id, c.index) for c in rows) == sorted((s.id, i) for s in scenarios for i in (0, 1))
        for c in rows:
            sc = session.get(Scenario, c.scenario_id)
            rec = session.get(Recording, sc.recording_id)
            episode = Replayable(rec.level, rec.seed, rec.mission, [*rec.actions[: sc.takeover], *c.actions])
            replayed = check(episode).success  # the simulator, replaying the whole episode
            assert c.success_step == (None if replayed is None else replayed - sc.takeover)
            assert (c.end == "success") == (c.success_step is not None) and c.end in (
                "success",
                "failure",
                "time out",
                "length",
            )
            assert 1 <= len(c.actions) <= LENGTH
        if name == "expert":
            assert all(c.end == "success" for c in rows)
        else:
            assert any(c.end == "length" for c in rows)
            assert len({tuple(c.actions) for c in rows}) > 1  # sampled, each with its own seed
    # The same job again (a worker killed after it finished storing): it adds nothing.
    job_id = runs["random"]["job"]
    session.execute(update(jobs.Job).where(jobs.Job.id == job_id).values(state="queued"))
    session.commit()
    random_id = session.get(GenerationRun, runs["random"]["run"]).agent_id
    before = [(c.id, c.actions) for c in _stored(session, random_id)]
    assert jobs.run_job(job_id) == "done"
    session.expire_all()
    job = session.get(jobs.Job, job_id)
    assert job.result["stored"] == 0 and job.result["had"] == 6
    assert [(c.id, c.actions) for c in _stored(session, random_id)] == before
    # A new run asking for more continuations generates only the missing ones.
    more = _generate(api, suite, 1, "random", c=3)
    jobs.run_queued_once()
    state = api("GET", f"/api/v1/sts/generations/{more['run']}").json()
    assert state["result"]["stored"] == 3 and state["stored"] == 9


def test_cancel_stops_a_generation_and_a_second_run_resumes_it(api, session, monkeypatch):
    suite, _ = _published_suite(api)
    started = _generate(api, suite, 1, "random")
    # A queued run cancelled through the core's job route never runs.
    r = api("POST", f"/api/v1/jobs/{started['job']}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert jobs.run_queued_once() == 0
    state = api("GET", f"/api/v1/sts/generations/{started['run']}").json()
    assert state["state"] == "cancelled" and state["stored"] == 0
    # One agent, one run at a time on a suite.
    again = _generate(api, suite, 1, "random")
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/generations", {"agent": "random", "continuations": 2})
    assert r.status_code == 409 and "already" in r.json()["detail"]

    # Cancelled while it runs: it stops between steps and keeps what finished.
    class Cancelling(jobs.Progress):
        def __init__(self, job_id):
            super().__init__(job_id)
            self.last = 0

        def __call__(self, done, total=None, message=None):
            super().__call__(done, total, message)
            self.last = done

        def cancelled(self):
            return self.last >= 1

    monkeypatch.setattr(generation, "CHECK_EVERY_S", 0.0)
    job = session.get(jobs.Job, again["job"])
    result = generation.run_generation(session, job, Cancelling(job.id))
    assert result["cancelled"] and 1 <= result["stored"] < 6
    agent_id = session.get(GenerationRun, again["run"]).agent_id
    kept = {(c.scenario_id, c.index): c.id for c in _stored(session, agent_id)}
    assert len(kept) == result["stored"]
    # The job, run again (as after a killed worker), generates only the rest.
    assert jobs.run_queued_once() == 1
    rows = _stored(session, agent_id)
    assert len(rows) == 6
    assert all(kept[(c.scenario_id, c.index)] == c.id for c in rows if (c.scenario_id, c.index) in kept)
    assert session.get(jobs.Job, again["job"]).result["had"] == len(kept)


def test_a_run_the_queue_cannot_take_is_withdrawn_with_503(api, session, monkeypatch):
    from app.config import get_settings

    suite, _ = _published_suite(api)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:9/0")  # the discard port
    get_settings.cache_clear()
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/generations", {"agent": "expert", "continuations": 2})
    get_settings.cache_clear()
    assert r.status_code == 503 and r.headers["Retry-After"], r.text
    assert session.scalar(select(func.count(GenerationRun.id))) == 0
    assert session.scalar(select(func.count(jobs.Job.id))) == 0


def test_a_study_from_a_published_version_has_its_continuations_and_reference_episodes(api, session):
    suite, recs = _published_suite(api)
    for name in ("expert", "random"):
        _generate(api, suite, 1, name)
    # Version 2 adds a scenario: a study of version 1 leaves it out.
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions").status_code == 201
    assert _mine(api, suite, 2, takeover=1, recordings=[recs[1]], tags=["v2"]).status_code == 201
    jobs.run_queued_once()
    body = {
        "title": "Suite v1",
        "agents": ["expert", "random"],
        "bundle_size": 4,
        "gold_rate": 0.25,
        "annotations_per_item": 1,
        "reference": {"expert_successes": 2, "random_failures": 2},
    }
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/2/study", body)
    assert r.status_code == 409 and "draft" in r.json()["detail"]
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/study", body)
    assert r.status_code == 201, r.text
    out = r.json()
    assert (out["items"], out["reference"], out["scenarios"]) == (3 * 2 * 2 + 4, 4, 3)
    study = session.get(Study, out["study"])
    assert study.kind == "sts" and study.state == "draft" and study.kind_settings["suite"]["version"] == 1
    items = list(session.scalars(select(Item).where(Item.study_id == study.id)))
    agent_items = [i for i in items if not i.is_gold]
    assert {(i.reference["agent"], i.reference["continuation"]) for i in agent_items} == {
        (a, c) for a in ("expert", "random") for c in ("0", "1")
    }
    assert {i.reference["scenario"] for i in agent_items} == {
        f"s{s.id}" for s in session.scalars(select(Scenario).where(Scenario.suite_id == suite)) if s.tags != ["v2"]
    }
    for i in agent_items:
        assert i.category == "go to" and i.reference["suite_version"] == 1
        assert i.reference["tags"] == ["rule:first step", "small"]
        if i.reference["agent"] == "expert":
            assert i.reference["simulator"] == "success"
    gold = [i for i in items if i.is_gold]
    assert sorted((i.reference["agent"], i.reference["label"]) for i in gold) == [
        ("expert", "success"),
        ("expert", "success"),
        ("random", "failure"),
        ("random", "failure"),
    ]
    assert all(i.reference["label"] == i.reference["simulator"] for i in gold)
    assert len({i.reference["scenario"] for i in gold if i.reference["agent"] == "expert"}) == 2

    # An agent without continuations of every scenario is refused by name.
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/study", {**body, "title": "More", "continuations": 3})
    # What is stored refuses it, not its shape: 409.
    assert r.status_code == 409 and r.json()["field"] == "agents" and "generate them first" in r.json()["detail"]
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/1/study",
        {**body, "title": "Too many", "reference": {"expert_successes": 4}},
    )
    assert r.status_code == 422 and r.json()["field"] == "reference.expert_successes"
    assert session.scalar(select(func.count(Study.id))) == 1


def test_the_pages_mine_publish_generate_and_take_over(client, session, owner):
    import re

    csrf = login(client, owner)
    api = _json(client, csrf)
    recs = _recordings(api, [1])
    r = client.post("/sts/suites", data={"name": "Paged", "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    page = r.headers["location"]
    suite = int(page.rsplit("/", 1)[1])
    r = client.post(
        f"/sts/suites/{suite}/scenarios",
        follow_redirects=True,
        data={"rule": "before success", "k": "2", "continuation": "10", "tags": "near the end", "csrf_token": csrf},
    )
    assert "Added 1 scenarios to version 1" in r.text
    sc = session.scalar(select(Scenario).where(Scenario.suite_id == suite))
    assert sc.takeover == session.get(Recording, recs[0]).success_step - 2
    assert sc.tags == ["near the end", "rule:before success"]
    html = client.get(f"/sts/scenarios/{sc.id}").text
    frames = re.search(r'data-frames="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert client.get(frames).content[:4] == b"\x89PNG"
    # Take over one step earlier on the timeline: the draft's scenario moves.
    r = client.post(
        f"/sts/scenarios/{sc.id}/takeover", data={"takeover": "1", "csrf_token": csrf}, follow_redirects=True
    )
    assert "now takes over at step 1" in r.text
    session.expire_all()
    assert session.get(Scenario, sc.id).takeover == 1
    r = client.post(f"/sts/suites/{suite}/versions/1/publish", data={"csrf_token": csrf}, follow_redirects=True)
    assert "is published" in r.text
    # Published: the timeline adds a new scenario to the next draft instead.
    client.post(f"/sts/suites/{suite}/versions", data={"csrf_token": csrf})
    r = client.post(
        f"/sts/scenarios/{sc.id}/takeover", data={"takeover": "0", "csrf_token": csrf}, follow_redirects=True
    )
    assert "added to version 2" in r.text
    session.expire_all()
    assert session.get(Scenario, sc.id).takeover == 1
    r = client.post(
        f"/sts/suites/{suite}/versions/2/generations",
        follow_redirects=True,
        data={"agent": "expert", "continuations": "2", "csrf_token": csrf},
    )
    assert "queued" in r.text and 'id="runs"' in r.text
    jobs.run_queued_once()
    html = client.get(f"/sts/suites/{suite}?version=2").text
    assert "expert" in html and "100%" in html and "near the end" in html
    r = client.post(f"/sts/scenarios/{sc.id}/tags", data={"tag": "mine", "csrf_token": csrf}, follow_redirects=True)
    assert "mine ×" in r.text
    r = client.post(
        f"/sts/suites/{suite}/scenarios",
        follow_redirects=True,
        data={"rule": "before success", "k": "x", "csrf_token": csrf},
    )
    assert "No scenario added" in r.text
    assert client.get("/sts/suites").status_code == 200
