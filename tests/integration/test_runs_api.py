"""Agent runs through the one API (app/runs, docs/runs.md): every kind's runs start, read,
list and cancel at the same paths, with the same shape; another researcher's are not revealed;
refusals name the field; the kinds' earlier paths make the same rows."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app import jobs
from app.auth.security import create_token
from app.runs.models import AgentRun
from app.studies import services
from tests.conftest import create_tom_study, make_user

pytestmark = pytest.mark.backend_agnostic("the runs API's rules, the same on both backends")

DESIGN = {"pairs": {"z": {"1": 2, "3": 1}}, "speakers": ["literal"], "seed": 3}  # 3 pairs


def as_user(app, session, role: str = "researcher"):
    user = make_user(session, role)
    token = create_token(session, user)
    session.commit()
    return user, TestClient(app, headers={"Authorization": f"Bearer {token}"})


def a3ds_study(session, owner, title: str = "Runs"):
    study = services.create_study(
        session, owner, "a3ds", services.StudySettings(title=title), json.dumps(DESIGN).encode(), "design"
    )
    session.commit()
    return study


def test_a_run_starts_reads_lists_and_cancels_at_the_one_path(app, session):
    owner, c = as_user(app, session)
    study = a3ds_study(session, owner)
    r = c.post(f"/api/v1/studies/{study.id}/runs", json={"speaker": "short", "batch_size": 1})
    assert r.status_code == 202, r.text
    run = r.json()
    assert (run["kind"], run["noun"], run["study_id"], run["state"]) == (
        "a3ds",
        "captioner or listener run",
        study.id,
        "queued",
    )
    assert run["params"]["speaker"] == "short" and run["detail"]["items"] == 0
    jobs.run_queued_once()  # what the worker does
    got = c.get(f"/api/v1/runs/{run['id']}").json()
    assert got["state"] == "done" and got["done"] == got["total"] == 3 and got["detail"]["items"] == 3, got
    assert got["job_id"] == run["job_id"] and c.get(f"/api/v1/jobs/{run['job_id']}").json()["state"] == "done"

    second = c.post(f"/api/v1/studies/{study.id}/runs", json={"speaker": "contrastive"}).json()
    listed = c.get("/api/v1/runs", params={"study_id": study.id}).json()
    assert [x["id"] for x in listed] == [second["id"], run["id"]]  # newest first
    assert [x["id"] for x in c.get("/api/v1/runs", params={"kind": "a3ds"}).json()] == [second["id"], run["id"]]
    assert c.get("/api/v1/runs", params={"kind": "hexagons"}).json() == []
    r = c.post(f"/api/v1/runs/{second['id']}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    jobs.run_queued_once()
    assert c.get(f"/api/v1/runs/{second['id']}").json()["detail"]["items"] == 0  # stopped before a chunk
    r = c.post(f"/api/v1/runs/{second['id']}/cancel")
    assert r.status_code == 409 and r.json()["field"] == "state" and "cancelled" in r.json()["detail"]
    r = c.post(f"/api/v1/runs/{run['id']}/cancel")
    assert r.status_code == 409 and "done" in r.json()["detail"]


def test_another_researchers_runs_are_not_revealed(app, session):
    owner, mine = as_user(app, session)
    _, theirs = as_user(app, session)
    _, admin = as_user(app, session, "admin")
    study = a3ds_study(session, owner)
    run = mine.post(f"/api/v1/studies/{study.id}/runs", json={"speaker": "short"}).json()
    for r in (
        theirs.get(f"/api/v1/runs/{run['id']}"),
        theirs.post(f"/api/v1/runs/{run['id']}/cancel"),
        theirs.post(f"/api/v1/studies/{study.id}/runs", json={"speaker": "short"}),
        mine.get("/api/v1/runs/999999"),
    ):
        assert r.status_code == 404, r.text
    assert theirs.get("/api/v1/runs").json() == []
    assert admin.get(f"/api/v1/runs/{run['id']}").json()["id"] == run["id"]
    assert session.scalar(select(jobs.Job.state).where(jobs.Job.id == run["job_id"])) == "queued"


def test_refusals_name_the_field_and_store_nothing(app, session):
    owner, c = as_user(app, session)
    study = a3ds_study(session, owner)
    url = f"/api/v1/studies/{study.id}/runs"
    for body, status, field in (
        ({"speaker": "short", "poem": 1}, 422, "poem"),
        ({"speaker": "poet"}, 422, "speaker"),
        ({"speaker": "short", "batch_size": 0}, 422, "batch_size"),
        ({"speaker": "short", "batch_size": "8"}, 422, "batch_size"),
        ({}, 422, "speaker"),
    ):
        r = c.post(url, json=body)
        assert (r.status_code, r.json().get("field")) == (status, field), (body, r.text)
    for raw in (b"[1, 2]", b"{not json", b"[" * 5000 + b"]" * 5000):
        r = c.post(url, content=raw, headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, (raw[:20], r.text)
    # A form's text is read by the kind's field types: a word for a number names the field.
    r = c.post(url, data={"speaker": "short", "batch_size": "eight"})
    assert r.status_code == 422 and r.json()["field"] == "batch_size", r.text
    r = c.post(url, data={"speaker": "short", "batch_size": "1"}, files={"file": ("x.json", b"[]")})
    assert r.status_code == 422 and r.json()["field"] == "file", r.text  # A3DS takes no file
    tom = create_tom_study(session, owner, live=False)
    r = c.post(f"/api/v1/studies/{tom.id}/runs", json={})
    assert r.status_code == 409 and r.json()["field"] == "kind" and "a3ds" in r.json()["detail"], r.text
    for body, field in (
        ({"target": {}}, "kind"),
        ({"kind": "a3ds", "target": {}}, "study_id"),
        ({"kind": "sts", "target": {"suite_id": 1}}, "target"),
        ({"kind": "sts", "target": "1/2"}, "target"),
        ({"kind": "nope", "target": {}}, "kind"),
    ):
        r = c.post("/api/v1/runs", json=body)
        assert r.status_code == 422 and r.json()["field"] == field, (body, r.text)
    assert session.scalar(select(AgentRun.id).limit(1)) is None
    assert c.get("/api/v1/runs", params={"kind": "tom"}).status_code == 422
    r = c.post(url, data={"speaker": "short", "batch_size": "2"})  # the same fields, as a form
    assert r.status_code == 202 and r.json()["params"]["batch_size"] == 2, r.text


def test_the_kinds_earlier_paths_make_agent_runs_too(app, session):
    owner, c = as_user(app, session)
    study = a3ds_study(session, owner)
    old = c.post(f"/api/v1/a3ds/studies/{study.id}/generations", json={"speaker": "short"})
    assert old.status_code == 202, old.text
    (run,) = c.get("/api/v1/runs", params={"study_id": study.id}).json()
    assert run["job_id"] == old.json()["id"] and run["params"]["speaker"] == "short"
    assert c.get(f"/api/v1/a3ds/generations/{old.json()['id']}").json()["state"] == "queued"
    deprecated = c.get("/openapi.json").json()["paths"]["/api/v1/a3ds/studies/{study_id}/generations"]
    assert deprecated["post"]["deprecated"] is True


def test_an_sts_run_goes_on_its_suite_version(app, session):
    from app.kinds.sts import suites

    owner, c = as_user(app, session)
    _, theirs = as_user(app, session)
    (rec,), _ = suites.expert_recordings(session, owner, "BabyAI-GoToLocal-v0", [2])
    suite = suites.create_suite(session, owner, "Runs suite")
    v1 = suites.latest_version(session, suite)
    suites.add_scenarios(session, v1, takeover=0, recordings=[rec.id], continuation=8)
    suites.publish(session, v1)
    session.commit()
    body = {"kind": "sts", "target": {"suite_id": suite.id, "version": 1}, "agent": "random", "continuations": 2}
    r = theirs.post("/api/v1/runs", json=body)
    assert r.status_code == 404 and r.json()["field"] == "target", r.text
    r = c.post("/api/v1/runs", json=body)
    assert r.status_code == 202, r.text
    run = r.json()
    assert run["target"] == {"suite_id": suite.id, "version": 1} and run["study_id"] is None
    jobs.run_queued_once()
    got = c.get(f"/api/v1/runs/{run['id']}").json()
    assert got["state"] == "done" and got["detail"]["stored"] == got["detail"]["expected"] == 2, got
    assert theirs.get(f"/api/v1/runs/{run['id']}").status_code == 404
    for huge in ({"agent_id": 2**40}, {"agent": 2**40}):  # past the ids' range: refused, not a 500
        r = c.post("/api/v1/runs", json={**{k: v for k, v in body.items() if k != "agent"}, **huge})
        assert r.status_code == 422, r.text
    # A version the suite does not have is named.
    r = c.post("/api/v1/runs", json={**body, "target": {"suite_id": suite.id, "version": 9}})
    assert r.status_code == 404 and "version 9" in r.json()["detail"]


def test_the_openapi_document_says_what_each_kinds_runs_take(app):
    """Issue 26.8 (re-attack, round 2): the runs routes' schemas named no fields and allowed any,
    and POST /api/v1/runs offered a form it refuses. Now each kind's fields, and no others."""
    doc = app.openapi()
    on_study = doc["paths"]["/api/v1/studies/{study_id}/runs"]["post"]["requestBody"]["content"]
    kinds = {s["title"].split(":")[0]: s for s in on_study["application/json"]["schema"]["anyOf"]}
    assert {"navigation", "a3ds", "hexagons", "wordcount"} <= set(kinds) and "sts" not in kinds
    # The bounds and choices the service checks (service.checked), and exactly one captioner.
    assert kinds["a3ds"]["properties"]["batch_size"] == {"type": "integer", "minimum": 1, "maximum": 256}
    assert kinds["a3ds"]["properties"]["speaker"]["enum"] == ["literal", "short", "contrastive", "minimal"]
    assert kinds["a3ds"]["oneOf"] == [{"required": [f]} for f in ("speaker", "artifact_id", "listener")]
    assert kinds["navigation"]["properties"]["top_p"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert kinds["navigation"]["required"] == ["file", "speaker_artifact_id"]
    assert all(s["additionalProperties"] is False for s in kinds.values())
    form = {s["title"].split(":")[0]: s for s in on_study["multipart/form-data"]["schema"]["anyOf"]}
    assert form["navigation"]["properties"]["file"] == {"type": "string", "format": "binary"}
    on_target = doc["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]
    assert set(on_target) == {"application/json"}
    (sts,) = on_target["application/json"]["schema"]["anyOf"]
    assert sts["properties"]["kind"] == {"const": "sts"} and sts["required"] == ["kind", "target"]
    assert sts["properties"]["target"]["required"] == ["suite_id", "version"]


def test_the_schema_and_the_service_agree_on_each_body(app, session):
    """Issue 26.8 (re-attack round 4, G3): bodies the OpenAPI document allowed were refused
    with 422 (a batch of -10867, a version written 1.0, an agent both by id and by name). Each
    body below is judged by the document's own schema and by the API: what the schema allows
    is taken, or refused only by what is stored (404, 409); what it forbids is a 422."""
    import jsonschema

    from app.kinds.sts import suites

    owner, c = as_user(app, session)
    (rec,), _ = suites.expert_recordings(session, owner, "BabyAI-GoToLocal-v0", [2])
    suite = suites.create_suite(session, owner, "Agreeing suite")
    v1 = suites.latest_version(session, suite)
    suites.add_scenarios(session, v1, takeover=0, recordings=[rec.id], continuation=8)
    suites.publish(session, v1)
    session.commit()
    doc = app.openapi()
    schema = doc["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    target = {"suite_id": suite.id, "version": 1}
    cases = [
        # (body, the schema allows it, the API's answer)
        ({"kind": "sts", "target": {"suite_id": suite.id, "version": 1.0}, "agent": "random"}, True, 202),
        ({"kind": "sts", "target": target, "agent_id": 2**31 - 1}, True, 404),  # no such agent
        ({"kind": "sts", "target": {"suite_id": suite.id, "version": 7}, "agent": "expert"}, True, 404),
        ({"kind": "sts", "target": target, "agent": "expert", "continuations": 2.0, "seed": 3}, True, 202),
        ({"kind": "sts", "target": target, "agent": "random"}, True, 409),  # random's run is still queued
        ({"kind": "sts", "target": target, "agent": "expert", "batch_size": -10867}, False, 422),
        ({"kind": "sts", "target": target, "agent": "expert", "continuations": 101}, False, 422),
        ({"kind": "sts", "target": target, "agent": "expert", "agent_id": 1}, False, 422),
        ({"kind": "sts", "target": target}, False, 422),
        ({"kind": "sts", "target": target, "agent": "oracle"}, False, 422),
        ({"kind": "sts", "target": {"suite_id": suite.id, "version": 1.5}, "agent": "expert"}, False, 422),
    ]
    for body, allowed, status in cases:
        valid = jsonschema.Draft202012Validator(schema).is_valid(body)
        assert valid is allowed, (body, "the schema's verdict")
        r = c.post("/api/v1/runs", json=body)
        assert r.status_code == status, (body, r.text)
        if status == 422:
            assert r.json()["field"], r.text


def test_a_generation_runs_k_is_its_listeners_count_in_the_schema_and_the_code(app, session):
    """Issue 26.8 (re-attack round 6): `k` had to equal the number of listener_artifact_ids, a
    422 the schema did not describe (it allowed k = 2 with one listener). Now the schema says
    it (Param.counts), for JSON and forms alike, and the service refuses it before it looks up
    any artifact: 422 naming k, not a 404 for the listener."""
    import jsonschema

    from app.kinds.navigation.environments import import_house
    from app.kinds.navigation.house import generate_house, sample_paths, to_r2r

    owner, c = as_user(app, session)
    house = generate_house(100)
    import_house(session, house)
    paths = json.dumps(to_r2r(house, sample_paths(house, 2, rng=3), [["go"], ["go"]])).encode()
    study = services.create_study(session, owner, "navigation", services.StudySettings(title="K"), paths, "r2r")
    session.commit()
    content = app.openapi()["paths"]["/api/v1/studies/{study_id}/runs"]["post"]["requestBody"]["content"]
    for media, file in (("application/json", json.loads(paths)), ("multipart/form-data", "paths")):
        (nav,) = [s for s in content[media]["schema"]["anyOf"] if s["title"].startswith("navigation")]
        valid = jsonschema.Draft202012Validator(nav).is_valid
        base = {"file": file, "speaker_artifact_id": 7}
        for body, allowed in (
            ({**base, "k": 2, "listener_artifact_ids": [3, 4]}, True),
            ({**base, "k": 0}, True),
            ({**base, "listener_artifact_ids": [3]}, True),
            ({**base, "k": 2, "listener_artifact_ids": [3]}, False),
            ({**base, "k": 1}, False),
        ):
            assert valid(body) is allowed, (media, body)
    url = f"/api/v1/studies/{study.id}/runs"
    r = c.post(url, json={"file": json.loads(paths), "speaker_artifact_id": 7, "k": 2, "listener_artifact_ids": [9]})
    assert r.status_code == 422 and r.json()["field"] == "k", r.text
    form = {"speaker_artifact_id": "7", "k": "1"}
    r = c.post(url, data=form, files={"file": ("p.json", paths)})
    assert r.status_code == 422 and r.json()["field"] == "k", r.text
    r = c.post(url, data={**form, "listener_artifact_ids": "9"}, files={"file": ("p.json", paths)})
    assert r.status_code == 404 and r.json()["field"] == "speaker_artifact_id", r.text  # the rows' turn
