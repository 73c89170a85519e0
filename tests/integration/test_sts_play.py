"""The STS play study on both backends (issue 11, recordings made by people): missions uploaded
as items (each line checked in BabyAI), a worker plays one on the real pages with the grid drawn
by the server, the answer is replayed when it is sent, the leaderboard scores the simulator's
success, and the study owner stores the plays as recordings, once, under pseudonyms, ready to
mine into scenarios."""

from __future__ import annotations

import base64
import json
import re

import pytest
from sqlalchemy import func, select

from app.errors import InputError
from app.kinds import get_kind
from app.images import decode_png
from app.kinds.sts.models import Recording
from app.kinds.sts.recordings import expert_recording
from app.studies import assignment, services
from app.studies.models import Annotation, Assignment, Item, Study
from tests.conftest import consent_version_of, login, make_user

LEVEL = "BabyAI-GoToLocal-v0"


def _jsonl(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(x) for x in lines).encode()


def _play_study(session, owner, lines=None, live=True, **settings) -> Study:
    lines = lines or [{"level": LEVEL, "seed": 2, "id": "m2"}, {"level": LEVEL, "seed": 3, "id": "m3"}]
    settings = {"title": "Play", "bundle_size": 1, "annotations_per_item": 2, **settings}
    study = services.create_study(session, owner, "sts", services.StudySettings(**settings), _jsonl(lines), "missions")
    if live:
        services.set_state(session, study, "live", owner)
    return study


def _items(session, study) -> dict[str, Item]:
    return {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}


def test_missions_become_play_items_whose_seed_the_worker_never_sees(session):
    owner = make_user(session, "researcher")
    rephrased = {"level": LEVEL, "seed": 3, "instruction": "find it", "mission": expert_recording(LEVEL, 3).mission}
    study = _play_study(session, owner, [{"level": LEVEL, "seed": 2}, rephrased], live=False)
    assert study.kind_settings == {"mode": "play"} and study.gold_rate == 0.0
    assert study.instructions.startswith("Do what the instruction says")
    items = _items(session, study)
    assert set(items) == {f"{LEVEL}:2", f"{LEVEL}:3"}  # the default id: level and seed
    first = items[f"{LEVEL}:2"]
    expert = expert_recording(LEVEL, 2)
    assert first.payload == {
        "mode": "play",
        "level": LEVEL,
        "seed": 2,
        "mission": expert.mission,
        "instruction": expert.mission,
        "max_steps": first.payload["max_steps"],
        "tile": 16,
    }
    assert first.payload["max_steps"] > len(expert.actions) and first.category == "go to" and not first.is_gold
    assert items[f"{LEVEL}:3"].payload["instruction"] == "find it"
    public = get_kind("sts").public_payload(first.payload)
    assert public == {
        "mode": "play",
        "instruction": expert.mission,
        "max_steps": first.payload["max_steps"],
        "tile": 16,
    }
    # The same missions as CSV with a header row.
    csv_study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="CSV"),
        f"level,seed,id\n{LEVEL},2,a\n\n{LEVEL},3,b\n".encode(),
        "missions",
    )
    assert {i.external_id: i.payload["seed"] for i in _items(session, csv_study).values()} == {"a": 2, "b": 3}


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"level": "BabyAI-Nowhere-v0"}, "level", "Nowhere"),
        ({"level": None}, "level", "missing 'level'"),
        ({"seed": -1}, "seed", "seed -1"),
        ({"seed": "three"}, "seed", "'three'"),
        ({"mission": "go to the moon"}, "mission", "not 'go to the moon'"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"id": "m1"}, "id", "already on line 1"),
        ({"id": "x" * 201}, "id", "longer than 200"),
    ],
)
def test_a_bad_mission_line_names_its_line_and_field_and_nothing_is_stored(client, session, change, field, words):
    owner = make_user(session, "researcher")
    lines = [
        {"level": LEVEL, "seed": 1, "id": "m1"},
        {"level": LEVEL, "seed": 2, "id": "m2"},
        {"level": LEVEL, "seed": 3, "id": "m3"},
    ]
    lines[2] = {k: v for k, v in {**lines[2], **change}.items() if v is not None}
    csrf = login(client, owner)
    r = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": csrf},
        data={"kind": "sts", "format": "missions", "settings": json.dumps({"title": "Bad"})},
        files={"file": ("m.jsonl", _jsonl(lines), "application/json")},
    )
    assert r.status_code == 422, r.text
    assert (r.json()["line"], r.json()["field"]) == (3, field) and words in r.json()["detail"], r.json()
    assert session.scalar(select(Study).where(Study.title == "Bad")) is None


def test_a_bad_csv_line_names_its_line_and_field(session):
    kind = get_kind("sts")
    with pytest.raises(InputError) as err:
        kind.import_items(f"level,seed\n{LEVEL},1\n{LEVEL},x1\n".encode(), "missions", {})
    assert (err.value.line, err.value.field) == (3, "seed")
    with pytest.raises(InputError) as err:
        kind.import_items(f"level,seed,colour\n{LEVEL},1,red\n".encode(), "missions", {})
    assert (err.value.line, err.value.field) == (1, "colour")


def test_a_play_is_replayed_when_it_is_sent(session):
    owner = make_user(session, "researcher")
    payload = _items(session, _play_study(session, owner, live=False))["m2"].payload
    kind = get_kind("sts")
    expert = expert_recording(LEVEL, 2).actions
    # The page's form sends the list as JSON text; the simulator's success step is computed here.
    parsed = kind.parse_response({"actions": json.dumps(expert), "success_step": 0}, payload)
    assert parsed == {"actions": expert, "success_step": len(expert)}
    assert kind.score(payload, None, parsed) == 1.0
    assert kind.score_details(payload, None, parsed) == {"success_step": len(expert), "steps": len(expert)}
    unfinished = kind.parse_response({"actions": [0, "forward"]}, payload)
    assert unfinished == {"actions": [0, 2], "success_step": None} and kind.score(payload, None, unfinished) == 0.0
    assert kind.parse_response({"actions": ""}, payload) == {"actions": [], "success_step": None}
    refusals = [
        ({"actions": [0, 7]}, "actions[1]"),  # out of range
        ({"actions": [*expert, 2]}, f"actions[{len(expert)}] comes after the episode ended"),
        ({"actions": [0] * (payload["max_steps"] + 1)}, f"ends after at most {payload['max_steps']}"),
        ({"actions": "[0, 1"}, "list of action numbers"),
        ({"actions": [True]}, "actions[0]"),
        ({"marker": "success", "step": 1}, "list of action numbers"),  # a marker is no play
    ]
    for data, words in refusals:
        with pytest.raises(InputError) as err:
            kind.parse_response(data, payload)
        assert err.value.field == "actions" and words in err.value.message, (data, err.value.message)
    # Marker items are untouched: their answers are still markers.
    with pytest.raises(InputError) as err:
        kind.parse_response({"actions": [0]}, {"n_frames": 10, "takeover": 3})
    assert err.value.field == "marker"


def _enter(client, slug: str, pid: str) -> str:
    page = client.get(f"/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=S&SESSION_ID=Q")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    return client.post(
        f"/task/{slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(page.text)}
    ).text


def test_a_worker_plays_a_mission_on_the_pages_with_the_grid_drawn_by_the_server(app, client, session):
    from fastapi.testclient import TestClient

    owner = make_user(session, "researcher")
    study = _play_study(session, owner)
    page = _enter(client, study.slug, "PLAYER1")
    assert 'id="sts-play"' in page and 'id="sts-player"' not in page
    aid = int(re.search(r'name="assignment_id" value="(\d+)"', page).group(1))
    url = re.search(r'data-url="([^"]+)"', page).group(1)
    assert url == f"/api/v1/sts/play/{study.slug}/{aid}"
    item = session.get(Item, session.get(Assignment, aid).item_id)
    assert item.payload["level"] not in page  # nor the seed: nothing to solve the mission offline with
    expert = expert_recording(LEVEL, item.payload["seed"]).actions

    start = client.get(url).json()
    assert (start["step"], start["done"], start["success"]) == (0, False, False)
    assert start["max_steps"] == item.payload["max_steps"]
    frame = decode_png(base64.b64decode(start["frame"].split(",", 1)[1]))
    assert frame.shape[0] == frame.shape[1] and frame.shape[0] % 16 == 0  # the grid, 16 px a cell
    after_one = client.get(url, params={"actions": str(expert[0])}).json()
    assert after_one["step"] == 1 and after_one["frame"] != start["frame"]
    end = client.get(url, params={"actions": ",".join(map(str, expert))}).json()
    assert (end["step"], end["done"], end["success"]) == (len(expert), True, True)
    # Nothing follows the end; a wrong action, someone else's assignment or another browser: refused.
    r = client.get(url, params={"actions": ",".join(map(str, [*expert, 2]))})
    assert r.status_code == 422 and r.json()["field"] == "actions"
    assert client.get(url, params={"actions": "9"}).json()["field"] == "actions"
    other = assignment.enter(session, study, "prolific", "PLAYER2")
    theirs = assignment.next_item(session, study, other.id)
    assert client.get(f"/api/v1/sts/play/{study.slug}/{theirs.id}").status_code == 404
    with TestClient(app) as stranger:
        assert stranger.get(url).status_code == 403

    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    key = re.search(r'name="idempotency_key" value="([^"]+)"', page).group(1)
    bad = client.post(
        f"/task/{study.slug}/answer",
        data={
            "csrf_token": csrf,
            "assignment_id": str(aid),
            "idempotency_key": key,
            "actions": json.dumps([*expert, 2]),
        },
    )
    assert bad.status_code == 422 and "actions" in bad.text
    done = client.post(
        f"/task/{study.slug}/answer",
        data={"csrf_token": csrf, "assignment_id": str(aid), "idempotency_key": key, "actions": json.dumps(expert)},
    )
    assert done.status_code == 200 and "Thank you" in done.text
    session.expire_all()
    ann = session.scalar(select(Annotation).where(Annotation.assignment_id == aid))
    assert ann.response == {"actions": expert, "success_step": len(expert)} and ann.score == 1.0


def _play(session, study, pid: str, actions_of) -> None:
    """A worker's bundle through the engine, each mission played as `actions_of(payload)`."""
    bundle = assignment.enter(session, study, "prolific", pid)
    a = assignment.next_item(session, study, bundle.id)
    while a is not None:
        payload = session.get(Item, a.item_id).payload
        assignment.submit(session, study, bundle.id, a.id, {"actions": actions_of(payload)}, f"k{a.id}")
        a = assignment.next_item(session, study, bundle.id)


def test_plays_become_the_owners_recordings_once_under_pseudonyms(client, session):
    from app.leaderboards.service import compute

    owner = make_user(session, "researcher")
    study = _play_study(session, owner, bundle_size=2)
    _play(session, study, "EXPERTISH", lambda p: expert_recording(LEVEL, p["seed"]).actions)
    _play(session, study, "LOST", lambda p: [0, 0])  # turns on the spot: never succeeds
    # The generic table: each player's success rate; the STS section has no markers to show.
    board = compute(session, study)
    rates = {r["name"]: r["accuracy"]["mean"] for r in board["rows"] if r["type"] == "annotator"}
    assert rates == {assignment.pseudonym("prolific", "EXPERTISH"): 1.0, assignment.pseudonym("prolific", "LOST"): 0.0}
    assert board["extra"] is None
    api = login(client, owner)
    r = client.get(f"/studies/{study.id}/leaderboard")
    assert r.status_code == 200
    r = client.get(f"/studies/{study.id}")
    assert r.status_code == 200 and 'action="/sts/studies/' in r.text

    r = client.post(
        "/api/v1/sts/recordings/from-study",
        json={"study_id": study.id, "only_successes": True},
        headers={"X-CSRF-Token": api},
    )
    assert r.status_code == 201, r.text
    assert (r.json()["created"], r.json()["failed"]) == (2, 2)
    r = client.post("/api/v1/sts/recordings/from-study", json={"study_id": study.id}, headers={"X-CSRF-Token": api})
    assert (r.json()["created"], r.json()["existing"]) == (2, 2), r.json()
    again = client.post(
        "/api/v1/sts/recordings/from-study", json={"study_id": study.id}, headers={"X-CSRF-Token": api}
    ).json()
    assert (again["created"], again["existing"]) == (0, 4)
    rows = session.scalars(select(Recording).where(Recording.owner_id == owner.id).order_by(Recording.id)).all()
    expert_name, lost_name = assignment.pseudonym("prolific", "EXPERTISH"), assignment.pseudonym("prolific", "LOST")
    assert sorted(r.external_id for r in rows) == sorted(
        f"play:{study.id}:{m}:{who}" for m in ("m2", "m3") for who in (expert_name, lost_name)
    )
    for row in rows:
        assert row.actor == f"human:{row.external_id.rsplit(':', 1)[1]}"
        assert "EXPERTISH" not in row.actor + row.external_id and "LOST" not in row.actor + row.external_id
        if row.actor == f"human:{expert_name}":
            assert row.success_step == row.n_actions == len(expert_recording(LEVEL, row.seed).actions)
        else:
            assert (row.actions, row.success_step) == ([0, 0], None)

    # They mine into scenarios like any other recording.
    suite = client.post("/api/v1/sts/suites", json={"name": "Human plays"}, headers={"X-CSRF-Token": api}).json()
    mined = client.post(
        f"/api/v1/sts/suites/{suite['id']}/versions/1/scenarios",
        json={"rule": "before success", "k": 2, "continuation": 10, "recordings": [r.id for r in rows]},
        headers={"X-CSRF-Token": api},
    )
    # The failed plays never succeed, so they have no step before success (refused by name).
    assert mined.status_code == 409 and mined.json()["field"] == "actions"  # the recording's
    assert f"recording play:{study.id}:" in mined.json()["detail"] and "never succeeds" in mined.json()["detail"]
    mined = client.post(
        f"/api/v1/sts/suites/{suite['id']}/versions/1/scenarios",
        json={
            "rule": "before success",
            "k": 2,
            "continuation": 10,
            "recordings": [r.id for r in rows if r.success_step is not None],
        },
        headers={"X-CSRF-Token": api},
    )
    assert mined.status_code == 201 and len(mined.json()["added"]) == 2, mined.text

    # Only the owner or an admin; the recordings are the owner's either way.
    other = make_user(session, "researcher")
    client.post("/logout", headers={"X-CSRF-Token": api})
    theirs = login(client, other)
    r = client.post("/api/v1/sts/recordings/from-study", json={"study_id": study.id}, headers={"X-CSRF-Token": theirs})
    assert r.status_code == 404
    assert session.scalar(select(func.count()).select_from(Recording).where(Recording.owner_id == other.id)) == 0
    admin = make_user(session, "admin")
    client.post("/logout", headers={"X-CSRF-Token": theirs})
    admin_csrf = login(client, admin)
    r = client.post(
        "/api/v1/sts/recordings/from-study", json={"study_id": study.id}, headers={"X-CSRF-Token": admin_csrf}
    )
    assert r.status_code == 201 and (r.json()["owner"], r.json()["existing"]) == (owner.id, 4)
    # A study of markers has no plays.
    from app.kinds.sts.demo import demo_lines

    markers = services.create_study(
        session, owner, "sts", services.StudySettings(title="Markers"), _jsonl(demo_lines()[:2]), "continuations"
    )
    r = client.post(
        "/api/v1/sts/recordings/from-study", json={"study_id": markers.id}, headers={"X-CSRF-Token": admin_csrf}
    )
    assert r.status_code == 409 and r.json()["field"] == "study_id"  # a study, not one of plays


def test_the_study_page_button_stores_the_plays(client, session):
    owner = make_user(session, "researcher")
    study = _play_study(session, owner)
    _play(session, study, "P1", lambda p: expert_recording(LEVEL, p["seed"]).actions)
    csrf = login(client, owner)
    r = client.post(f"/sts/studies/{study.id}/recordings", data={"csrf_token": csrf}, follow_redirects=True)
    assert r.status_code == 200 and "Stored 1 plays as recordings" in r.text
    r = client.post(f"/sts/studies/{study.id}/recordings", data={"csrf_token": csrf}, follow_redirects=True)
    assert "Stored 0 plays as recordings (skipped: 1 stored before)" in r.text
    assert session.scalar(select(func.count()).select_from(Recording).where(Recording.owner_id == owner.id)) == 1
