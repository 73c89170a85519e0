"""The navigation-following kind end to end over the JSON crowd API, on SQLite and PostgreSQL:
a generated house is imported, a study made from its R2R paths, a worker's path is checked
against the building's graph and scored exactly as offline."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import select

from app.kinds.navigation import metrics
from app.kinds.navigation.environments import get_graph, import_house
from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths, to_r2r
from app.studies import services
from app.studies.models import Annotation, Assignment, Item
from tests.conftest import create_tom_study, login, make_user

_HOUSES: dict[int, object] = {}


def house_r2r(seed: int = 3, n: int = 6) -> tuple[object, bytes]:
    if seed not in _HOUSES:
        _HOUSES[seed] = generate_house(seed)
    house = _HOUSES[seed]
    paths = sample_paths(house, n, rng=seed)
    instr = [describe_path(house, p, rng=k, n=1) for k, p in enumerate(paths)]
    return house, json.dumps(to_r2r(house, paths, instr)).encode()


def create_nav_study(session, owner, seed: int = 3, n: int = 6, **settings):
    house, data = house_r2r(seed, n)
    import_house(session, house)
    s = services.StudySettings(
        title=settings.pop("title", "Navigation test"), **{"bundle_size": 3, "gold_rate": 0.0, **settings}
    )
    study = services.create_study(session, owner, "navigation", s, data, "r2r")
    services.set_state(session, study, "live", owner)
    return house, study


def enter(client, slug: str, pid: str = "nav-worker"):
    """Enter by the API and agree to the consent text it shows."""
    r = client.post(
        f"/api/v1/crowd/{slug}/enter", json={"params": {"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": pid}}
    )
    assert r.status_code == 200, r.text
    r = client.post(f"/api/v1/crowd/{slug}/consent", json={"consent_version": r.json()["consent_version"]})
    assert r.status_code == 200, r.text


def keys_in(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | set().union(*(keys_in(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(keys_in(v) for v in obj)) if obj else set()
    return set()


def test_import_refuses_unknown_scans(session):
    owner = make_user(session, "researcher")
    house, data = house_r2r()
    import_house(session, house)
    records = json.loads(data)
    records[1]["scan"] = "no-such-house"
    from app.errors import InputError

    with pytest.raises(InputError) as e:
        services.create_study(
            session, owner, "navigation", services.StudySettings(title="x"), json.dumps(records).encode(), "r2r"
        )
    assert e.value.field == "scan" and f"path_id {records[1]['path_id']}" in str(e.value)


def test_follow_the_reference_path_over_the_crowd_api(session, client):
    owner = make_user(session, "researcher")
    house, study = create_nav_study(session, owner)
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    assert len(items) == 6 and all(i.category == "human" and i.source == "human" for i in items)
    assert all(i.exclusion_group == f"{house.scan}:{i.external_id.rsplit('_', 1)[0]}" for i in items)

    enter(client, study.slug)
    nxt = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert set(nxt["item"]) == {"instruction", "scan", "start", "heading"}
    a = session.get(Assignment, nxt["assignment_id"])
    ref = session.get(Item, a.item_id).reference["path"]
    assert nxt["item"]["start"] == ref[0] and "path" not in json.dumps(nxt)

    # A path that jumps between viewpoints that are not neighbours is refused, naming the field.
    graph = get_graph(house.scan)
    far = next(v for v in graph.viewpoints if v != ref[0] and not graph.is_edge(ref[0], v))
    for bad, field in (([ref[0], far], "path"), ([ref[1]] + ref[1:], "path"), ("[not json", "path")):
        r = client.post(
            f"/api/v1/crowd/{study.slug}/submit",
            json={
                "assignment_id": a.id,
                "idempotency_key": uuid.uuid4().hex,
                "response": {"path": bad, "trace": [], "rating": 3},
            },
        )
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    r = client.post(
        f"/api/v1/crowd/{study.slug}/submit",
        json={
            "assignment_id": a.id,
            "idempotency_key": uuid.uuid4().hex,
            "response": {"path": ref, "trace": [], "rating": 7},
        },
    )
    assert r.status_code == 422 and r.json()["field"] == "rating"

    # The exact reference path, as the page sends it (JSON strings in form fields).
    trace = [[v, 0.5, 0.0, 100.0 * k] for k, v in enumerate(ref)]
    r = client.post(
        f"/api/v1/crowd/{study.slug}/submit",
        json={
            "assignment_id": a.id,
            "idempotency_key": uuid.uuid4().hex,
            "response": {"path": json.dumps(ref), "trace": json.dumps(trace), "rating": "4"},
        },
    )
    assert r.status_code == 200, r.text
    session.expire_all()
    ann = session.get(Annotation, r.json()["annotation"])
    assert ann.response == {"path": ref, "trace": trace, "rating": 4}
    assert ann.score == 1.0
    assert ann.scores == metrics.score_trajectory(graph, ref, ref)
    assert ann.scores["ndtw"] == 1 and ann.scores["success"] == 1 and ann.scores["spl"] == 1

    # A detour that still ends at the goal: success, but SPL and nDTW below 1.
    nxt = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    a2 = session.get(Assignment, nxt["assignment_id"])
    ref2 = session.get(Item, a2.item_id).reference["path"]
    back = next(n for n in graph.neighbours(ref2[0]) if n != ref2[1])
    walked = [ref2[0], back, ref2[0]] + ref2[1:]
    r = client.post(
        f"/api/v1/crowd/{study.slug}/submit",
        json={
            "assignment_id": a2.id,
            "idempotency_key": uuid.uuid4().hex,
            "response": {"path": walked, "trace": [], "rating": 2},
        },
    )
    assert r.status_code == 200, r.text
    ann2 = session.get(Annotation, r.json()["annotation"])
    assert ann2.scores == metrics.score_trajectory(graph, ref2, walked)
    assert ann2.scores["success"] and ann2.scores["spl"] < 1 and ann2.scores["ndtw"] < 1


def test_who_may_see_a_building(session, app, client):
    from fastapi.testclient import TestClient

    owner = make_user(session, "researcher")
    house, study = create_nav_study(session, owner)
    tom = create_tom_study(session, owner, title="ToM beside")
    url = f"/env/{house.scan}/view.json"
    assert client.get(url).status_code == 403  # anonymous
    enter(client, tom.slug, "tom-worker")
    assert client.get(url).status_code == 403  # a worker of another kind's study
    enter(client, study.slug, "nav-worker")
    r = client.get(url)
    assert r.status_code == 200
    view = r.json()
    graph = get_graph(house.scan)
    assert set(view["viewpoints"]) == set(graph.viewpoints)
    v0 = graph.viewpoints[0]
    assert [n["id"] for n in view["viewpoints"][v0]["neighbours"]] == graph.neighbours(v0)
    n0 = view["viewpoints"][v0]["neighbours"][0]
    assert n0["heading"] == graph.heading(v0, n0["id"]) and n0["distance"] == graph.distance(v0, n0["id"])
    assert view["semantics"]["rooms"]
    assert not keys_in(view) & {"path", "paths", "goal", "reference", "instructions", "instruction"}
    assert client.get("/env/no-such-house/view.json").status_code == 404
    with TestClient(app) as researcher:
        login(researcher, owner)
        assert researcher.get(url).status_code == 200
