"""People judge a random sample of a study's items and an automatic judge the rest (issue 28.3):
the researcher sets how many, the draw is random and recorded, items people have begun stay
theirs, and workers (the engine on SQLite, the one-statement hot path on PostgreSQL) are only
ever given items of the sample."""

from __future__ import annotations

import random

import pytest

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.audit import AuditEntry
from app.studies.models import Annotation, Item
from tests.conftest import login, make_user
from tests.integration.test_crowd_integrity import api_start, tiny_study


def _work_until_none_left(app, slug: str, first: int) -> None:
    """Workers (each from their own address) enter one after another and answer all they are
    given, until one is given nothing."""
    for n in range(first, first + 12):
        worker = TestClient(app, client=(f"10.0.{n}.1", 5000))
        api_start(worker, slug, {"PROLIFIC_PID": f"w{n}", "SESSION_ID": "s"})
        for k in range(10):
            nxt = worker.get(f"/api/v1/crowd/{slug}/next").json()
            if nxt["state"] != "item":
                break
            body = {"assignment_id": nxt["assignment_id"], "idempotency_key": f"k{n}-{k}", "response": {"answer": "No"}}
            assert worker.post(f"/api/v1/crowd/{slug}/submit", json=body).status_code == 200
        if k == 0:
            assert nxt["state"] in ("wait", "done"), nxt
            return
    raise AssertionError("work never ran out")


def _answered(session, study) -> list[int]:
    session.expire_all()
    return sorted(session.scalars(select(Annotation.item_id).where(Annotation.study_id == study.id)))


def test_people_get_only_the_random_sample_and_the_draw_is_recorded(app, session):
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=2, annotations_per_item=1)
    session.commit()
    ids = sorted(session.scalars(select(Item.id).where(Item.study_id == study.id)))

    # A first worker answers two items before the researcher samples.
    first = TestClient(app)
    api_start(first, study.slug, {"PROLIFIC_PID": "early", "SESSION_ID": "s"})
    for k in range(2):
        nxt = first.get(f"/api/v1/crowd/{study.slug}/next").json()
        body = {"assignment_id": nxt["assignment_id"], "idempotency_key": f"e{k}", "response": {"answer": "Yes"}}
        assert first.post(f"/api/v1/crowd/{study.slug}/submit", json=body).status_code == 200
    begun = _answered(session, study)
    assert len(begun) == 2

    researcher = TestClient(app)
    csrf = {"X-CSRF-Token": login(researcher, owner)}
    r = researcher.put(f"/api/v1/studies/{study.id}/people-sample", headers=csrf, json={"n": 5, "seed": 7})
    assert r.status_code == 200, r.text
    progress = r.json()
    assert progress["items"] == 5 and progress["target"] == 5 and progress["completed"] == 2
    sample = progress["people_sample"]
    assert {k: sample[k] for k in ("n", "of", "begun", "seed")} == {"n": 5, "of": 12, "begun": 2, "seed": 7}

    # The draw: the begun items, and 3 of the other 10 drawn with the recorded seed.
    drawn = random.Random(7).sample([i for i in ids if i not in begun], 3)
    session.expire_all()
    chosen = sorted(session.scalars(select(Item.id).where(Item.study_id == study.id, Item.for_people.is_(True))))
    assert chosen == sorted(begun + drawn)

    # Workers are given the sample's three open items and nothing else; then there is no work.
    _work_until_none_left(app, study.slug, 1)
    assert _answered(session, study) == chosen
    assert researcher.get(f"/api/v1/studies/{study.id}/progress").json()["fraction"] == 1.0

    # People judge everything again: the other seven items go out.
    r = researcher.delete(f"/api/v1/studies/{study.id}/people-sample", headers=csrf)
    assert r.status_code == 200 and r.json()["items"] == 12 and r.json()["people_sample"] is None
    _work_until_none_left(app, study.slug, 100)
    assert _answered(session, study) == ids

    actions = session.scalars(select(AuditEntry.detail).where(AuditEntry.action == "study.people_sample")).all()
    assert [a.get("seed") for a in actions] == [7, None] and actions[1]["n"] == "all"


def test_a_sample_people_cannot_give_is_refused_and_nothing_changes(app, session):
    owner = make_user(session, "researcher")
    other = make_user(session, "researcher")
    study = tiny_study(session, owner, 6, bundle_size=3, annotations_per_item=1)
    session.commit()
    worker = TestClient(app)
    api_start(worker, study.slug, {"PROLIFIC_PID": "early", "SESSION_ID": "s"})
    worker.get(f"/api/v1/crowd/{study.slug}/next")  # one item leased: begun

    researcher = TestClient(app)
    csrf = {"X-CSRF-Token": login(researcher, owner)}
    url = f"/api/v1/studies/{study.id}/people-sample"
    for body, field, words in (
        ({"n": 0}, "n", "greater than or equal to 1"),
        ({"n": 7}, "n", "from 1 to 6"),
        ({"n": "many"}, "n", "integer"),
        ({"n": 3, "items": [1]}, "items", "Extra inputs"),
        ({"n": 3, "seed": -1}, "seed", "greater than or equal to 0"),
        ({"n": 3, "seed": False}, "seed", "integer"),
        ({"n": True}, "n", "integer"),
    ):
        r = researcher.put(url, headers=csrf, json=body)
        assert r.status_code == 422, (body, r.text)
        assert field in r.text and words in r.text, (body, r.text)
    assert researcher.put(url, headers=csrf, json={"n": 1, "seed": 3}).status_code == 200  # the begun item
    assert researcher.get(f"/api/v1/studies/{study.id}/progress").json()["items"] == 1

    # Someone else's study: not found, and the sample stays as it was.
    stranger = TestClient(app)
    r = stranger.put(url, headers={"X-CSRF-Token": login(stranger, other)}, json={"n": 6})
    assert r.status_code == 404
    session.expire_all()
    assert session.get(type(study), study.id).people_sample["n"] == 1
    assert TestClient(app).put(url, json={"n": 6}).status_code == 401


def test_the_study_page_draws_the_sample_and_says_so(app, session):
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 8, bundle_size=2, annotations_per_item=1)
    session.commit()
    page = TestClient(app)
    csrf = login(page, owner)
    r = page.post(f"/studies/{study.id}/people-sample", data={"csrf_token": csrf, "n": "nine"})
    assert r.status_code == 422 and "n must be a whole number" in r.text and 'id="sample-error"' in r.text
    r = page.post(f"/studies/{study.id}/people-sample", data={"csrf_token": csrf, "n": "3"})
    assert r.status_code == 200 and "People now judge a random 3 of the items." in r.text
    assert "People judge a random sample: 3 of 8 items (seed " in r.text and 'value="3"' in r.text
    r = page.post(f"/studies/{study.id}/people-sample", data={"csrf_token": csrf, "n": ""})
    assert "People now judge every item." in r.text and 'id="people-sample"' not in r.text
    session.expire_all()
    assert session.get(type(study), study.id).people_sample is None


def test_a_target_width_gives_the_sample_a_power_analysis_needs(app, session):
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 60, bundle_size=2, annotations_per_item=1)
    session.commit()
    researcher = TestClient(app)
    csrf = {"X-CSRF-Token": login(researcher, owner)}
    url = f"/api/v1/studies/{study.id}/people-sample"
    # By hand: people alone need ceil((1.96 x 0.5 / 0.15)^2) = 43 for ±0.15; beside a judge
    # agreeing 90% (rho 0.8) on all 60, 43 x 60 x 0.36 / (60 - 0.64 x 43) = 28.6 -> 29.
    r = researcher.put(url, headers=csrf, json={"width": 0.3, "agreement": 0.9, "seed": 5})
    assert r.status_code == 200, r.text
    sample = r.json()["people_sample"]
    assert sample["n"] == 29 and sample["of"] == 60 and sample["seed"] == 5 and r.json()["items"] == 29
    plan = sample["plan"]
    assert {k: plan[k] for k in ("width", "agreement", "people", "people_alone", "reachable")} == {
        "width": 0.3,
        "agreement": 0.9,
        "people": 29,
        "people_alone": 43,
        "reachable": True,
    }
    assert plan["expected_width"] == pytest.approx(0.2978, abs=1e-4)
    # Still a random draw with the recorded seed.
    ids = sorted(session.scalars(select(Item.id).where(Item.study_id == study.id)))
    session.expire_all()
    chosen = sorted(session.scalars(select(Item.id).where(Item.study_id == study.id, Item.for_people.is_(True))))
    assert chosen == sorted(random.Random(5).sample(ids, 29))

    for body, field, words in (
        ({"width": 0, "agreement": 0.9}, "width", "greater than or equal to 0.001"),
        ({"width": -0.1, "agreement": 0.9}, "width", "greater than or equal to 0.001"),
        ({"width": 5e-324, "agreement": 0.0}, "width", "greater than or equal to 0.001"),
        ({"width": 1.5, "agreement": 0.9}, "width", "less than or equal to 1"),
        ({"width": 0.2, "agreement": 1.2}, "agreement", "less than or equal to 1"),
        ({"width": 0.2}, "agreement", "width and agreement go together"),
        ({"n": 5, "width": 0.2, "agreement": 0.9}, "n", "one of them"),
        ({}, "n", "one of them"),
    ):
        r = researcher.put(url, headers=csrf, json=body)
        assert r.status_code == 422, (body, r.text)
        assert field in r.text and words in r.text, (body, r.text)
    session.expire_all()
    assert session.get(type(study), study.id).people_sample["n"] == 29  # unchanged by the refusals

    # The page's form: the same plan, and the width it expects shown.
    r = researcher.post(
        f"/studies/{study.id}/people-sample",
        data={"csrf_token": csrf["X-CSRF-Token"], "width": "0.3", "agreement": "0.9"},
    )
    assert r.status_code == 200 and "People now judge a random 29 of the items: a power analysis" in r.text
    assert "expected width 0.2978" in r.text and 'id="people-sample-plan"' in r.text
    r = researcher.post(
        f"/studies/{study.id}/people-sample",
        data={"csrf_token": csrf["X-CSRF-Token"], "width": "2", "agreement": "0.9"},
    )
    assert r.status_code == 422 and "width is the interval&#39;s width on a 0-1 scale: from 0.001 to 1" in r.text
