"""A navigation study's own settings: its Likert questions (asked after Stop, answers required
and checked), the baseline speaker and the coop speaker's name, set on the new-study form or
over the API; the stop/resume events of "Keep walking"; and the Likert means per speaker in the
leaderboard. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from sqlalchemy import func, select

from app.kinds.navigation.environments import get_graph, import_house
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Annotation, Assignment, Item, Study
from tests.conftest import login, make_user
from tests.integration.test_navigation import enter, house_r2r
from tests.integration.test_navigation_leaderboard import coop_file, house

LIKERT = (
    "clarity | How clear was the wording? | Unclear; Somewhat; Very clear\n"
    "\n"
    "confidence | How sure are you that you ended in the right place? | Not sure; Sure"
)


def _csrf(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def _form(client, data: bytes, action: str = "create", **options):
    """The new-study form, its navigation options named as the form names them."""
    token = _csrf(client.get("/studies/new").text)
    form = {
        "title": "Nav form",
        "kind": "navigation",
        "format": "coop",
        "gold_rate": "0",
        "bundle_size": "4",
        "action": action,
        "csrf_token": token,
        **{f"navigation.{name}": value for name, value in options.items()},
    }
    return client.post(
        "/studies/new", data=form, files={"file": ("coop.json", data, "application/json")}, follow_redirects=False
    )


def test_new_study_form_sets_speaker_baseline_and_likert(session, client):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    login(client, owner)
    page = client.get("/studies/new").text
    for name in (
        'name="navigation.speaker"',
        'name="navigation.baseline"',
        'name="navigation.likert"',
        'value="coop"',
        'value="r2r"',
    ):
        assert name in page

    r = _form(client, coop_file(h), speaker="t5-greedy", baseline="human", likert=LIKERT)
    assert r.status_code == 303, r.text
    study = session.get(Study, int(r.headers["location"].rsplit("/", 1)[1]))
    assert study.kind_settings["baseline"] == "human"
    assert study.kind_settings["likert"] == [
        {"key": "clarity", "question": "How clear was the wording?", "labels": ["Unclear", "Somewhat", "Very clear"]},
        {
            "key": "confidence",
            "question": "How sure are you that you ended in the right place?",
            "labels": ["Not sure", "Sure"],
        },
    ]
    cats = set(session.scalars(select(Item.category).where(Item.study_id == study.id, Item.source == "agent")))
    assert cats == {"t5-greedy"}

    # Refusals name the line (or the field), keep what was typed and store no study.
    n = session.scalar(select(func.count()).select_from(Study))
    for fields, says in (
        (
            {"likert": "clarity | Clear? | Unclear; Clear\nsecond line without labels"},
            "line 2, field &#39;navigation.likert&#39;: write key | question | label",
        ),
        (
            {"likert": "clarity | Clear? | Only one"},
            "line 1, field &#39;navigation.likert&#39;: 1 label; a question needs 2 to 7",
        ),
        (
            {"likert": "\n".join(f"q{k} | Q{k}? | a; b" for k in range(6))},
            "line 6, field &#39;navigation.likert&#39;: at most 5",
        ),
        ({"likert": "clarity | Clear? | " + "; ".join(str(k) for k in range(8))}, "8 labels"),
        ({"likert": "Clarity | Clear? | a; b"}, "the key &#39;Clarity&#39; must be"),
        ({"baseline": "nobody"}, "field &#39;navigation.baseline&#39;: the baseline &#39;nobody&#39; is not a speaker"),
        ({"speaker": "human"}, "field &#39;navigation.speaker&#39;"),
    ):
        r = _form(client, coop_file(h), **fields)
        assert r.status_code == 422 and says in r.text, (fields, r.text[-600:])
        typed = next(iter(fields.values()))
        assert typed.split("\n")[0].replace("'", "&#39;") in r.text  # the form keeps the input
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Study)) == n

    # The preview lists the parsed questions.
    r = _form(client, coop_file(h), likert=LIKERT, action="preview")
    assert r.status_code == 200 and 'id="preview"' in r.text
    assert "How clear was the wording?" in r.text and "Unclear / Somewhat / Very clear" in r.text


def test_api_takes_the_same_fields(session, client):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    token = login(client, owner)
    items = [{"key": "clarity", "question": "How clear?", "labels": ["No", "Somewhat", "Yes"]}]
    r = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": token},
        data={
            "kind": "navigation",
            "format": "coop",
            "speaker": "t5",
            "baseline": "t5",
            "likert": json.dumps(items),
            "settings": json.dumps({"title": "API nav"}),
        },
        files={"file": ("coop.json", coop_file(h), "application/json")},
    )
    assert r.status_code == 201, r.text
    assert r.json()["kind_settings"]["likert"] == items and r.json()["kind_settings"]["baseline"] == "t5"
    r = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": token},
        data={
            "kind": "navigation",
            "format": "coop",
            "likert": json.dumps([{"key": "x"}]),
            "settings": json.dumps({"title": "API nav"}),
        },
        files={"file": ("coop.json", coop_file(h), "application/json")},
    )
    assert r.status_code == 422 and r.json()["field"] == "likert" and "item 1" in r.json()["detail"]


def _nav_study(session, likert: str | None):
    house_obj, data = house_r2r(3, 2)
    import_house(session, house_obj)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Likert", bundle_size=2, gold_rate=0.0)
    study = services.create_study(session, owner, "navigation", s, data, "r2r", {"likert": likert} if likert else {})
    services.set_state(session, study, "live", owner)
    return house_obj, study


def _submit(client, slug: str, assignment_id: int, **response):
    return client.post(
        f"/api/v1/crowd/{slug}/submit",
        json={"assignment_id": assignment_id, "idempotency_key": uuid.uuid4().hex, "response": response},
    )


def test_likert_answers_are_required_and_checked(session, client):
    house_obj, study = _nav_study(session, LIKERT)
    enter(client, study.slug)
    nxt = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    a_id = nxt["assignment_id"]
    ref = session.get(Item, session.get(Assignment, a_id).item_id).reference["path"]
    base = {"path": ref, "trace": [], "rating": 3}
    for likert, field in (
        ({}, "likert.clarity"),
        ({"clarity": 2}, "likert.confidence"),
        ({"clarity": 4, "confidence": 1}, "likert.clarity"),
        ({"clarity": "very", "confidence": 1}, "likert.clarity"),
        ({"clarity": 0, "confidence": 1}, "likert.clarity"),
        ({"clarity": 1, "confidence": 2, "speed": 1}, "likert"),
    ):
        r = _submit(client, study.slug, a_id, **base, likert=likert)
        assert r.status_code == 422 and r.json()["field"] == field, (likert, r.text)
    r = _submit(client, study.slug, a_id, **base)
    assert r.status_code == 422 and r.json()["field"] == "likert.clarity"
    assert "How clear was the wording?" in r.json()["detail"]
    assert session.scalar(select(func.count()).select_from(Annotation)) == 0

    # As the page sends it: one form field per question.
    r = _submit(client, study.slug, a_id, **base, **{"likert.clarity": "3", "likert.confidence": "1"})
    assert r.status_code == 200, r.text
    ann = session.get(Annotation, r.json()["annotation"])
    assert ann.response["likert"] == {"clarity": 3, "confidence": 1} and ann.response["rating"] == 3


def test_no_likert_questions_no_likert_answers(session, client):
    house_obj, study = _nav_study(session, None)
    enter(client, study.slug)
    a_id = client.get(f"/api/v1/crowd/{study.slug}/next").json()["assignment_id"]
    ref = session.get(Item, session.get(Assignment, a_id).item_id).reference["path"]
    r = _submit(client, study.slug, a_id, path=ref, rating=2, likert={"clarity": 1})
    assert r.status_code == 422 and r.json()["field"] == "likert"
    r = _submit(client, study.slug, a_id, path=ref, rating=2)
    assert r.status_code == 200
    assert "likert" not in session.get(Annotation, r.json()["annotation"]).response


def test_stop_and_resume_events(session, client):
    house_obj, study = _nav_study(session, None)
    graph = get_graph(house_obj.scan)
    enter(client, study.slug)
    a_id = client.get(f"/api/v1/crowd/{study.slug}/next").json()["assignment_id"]
    ref = session.get(Item, session.get(Assignment, a_id).item_id).reference["path"]
    assert len(ref) >= 3 and graph.is_edge(ref[0], ref[1])
    stop = lambda step, t: {"type": "stop", "step": step, "t": t}  # noqa: E731
    resume = lambda step, t: {"type": "resume", "step": step, "t": t}  # noqa: E731
    last = len(ref) - 1
    for events in (
        [resume(0, 1.0)],  # no stop first
        [stop(1, 5.0)],  # the last stop is not the end
        [stop(1, 5.0), resume(1, 4.0), stop(last, 9.0)],  # time runs back
        [stop(1, 5.0), resume(2, 6.0), stop(last, 9.0)],  # resumed elsewhere
        [stop(1, 5.0), resume(1, 6.0)],  # ends walking
        [stop(last + 1, 5.0)],  # past the path
        [{"type": "pause", "step": 0, "t": 1.0}],
    ):
        r = _submit(client, study.slug, a_id, path=ref, rating=2, events=json.dumps(events))
        assert r.status_code == 422 and r.json()["field"].startswith("events"), (events, r.text)
    events = [stop(1, 5.0), resume(1, 7.5), stop(last, 12.0)]
    r = _submit(client, study.slug, a_id, path=ref, rating=2, events=json.dumps(events))
    assert r.status_code == 200, r.text
    assert session.get(Annotation, r.json()["annotation"]).response["events"] == events


def test_leaderboard_has_likert_means_per_speaker(session, client):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Speakers", bundle_size=4, gold_rate=0.0, annotations_per_item=2)
    study = services.create_study(
        session, owner, "navigation", s, coop_file(h), "coop", {"speaker": "toy", "likert": LIKERT}
    )
    services.set_state(session, study, "live", owner)
    for w in range(5):
        bundle = assignment.enter(session, study, "prolific", f"lk-{w}")
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {
                    "path": item.reference["path"],
                    "rating": 1 + (w + a.id) % 4,
                    "likert": {"clarity": 1 + (w * 7 + a.id) % 3, "confidence": 1 + (w + a.id) % 2},
                },
                uuid.uuid4().hex,
            )
    board = compute(session, study)
    table = next(t for t in board["extra"]["tables"] if t["key"] == "navigation_likert")
    assert [c["key"] for c in table["columns"]] == ["category", "n", "clarity", "confidence"]
    rows = {r["category"]: r for r in table["rows"]}
    answers = session.execute(
        select(Item.category, Item.id, Annotation.response)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False))
    ).all()
    assert set(rows) == {"human", "toy"} == {c for c, _, _ in answers}
    for cat, row in rows.items():
        mine = [(item, resp["likert"]) for c, item, resp in answers if c == cat]
        assert row["n"] == len(mine)
        for key in ("clarity", "confidence"):
            # Each instruction counts once: the mean of its followers' levels.
            per_item: dict[int, list[int]] = {}
            for item, m in mine:
                per_item.setdefault(item, []).append(m[key])
            means = [sum(v) / len(v) for v in per_item.values()]
            assert len(means) < len(mine)  # several followers per instruction: the test means something
            assert row[key]["n"] == len(means)
            assert row[key]["mean"] == pytest.approx(sum(means) / len(means))
            assert row[key]["low"] - 1e-12 <= row[key]["mean"] <= row[key]["high"] + 1e-12
    assert "How clear was the wording?" in table["note"]
    # The interval: stats.mean_interval on (level - 1) / (L - 1) over the paths, mapped back.
    from app.leaderboards import stats

    for cat, row in rows.items():
        per_item: dict[int, list[int]] = {}
        for c, item, resp in answers:
            if c == cat:
                per_item.setdefault(item, []).append(resp["likert"]["clarity"])
        paths = dict(session.execute(select(Item.id, Item.cluster).where(Item.id.in_(list(per_item)))).all())
        unit = stats.mean_interval([(sum(v) / len(v) - 1) / 2 for v in per_item.values()], [paths[i] for i in per_item])
        assert row["clarity"]["low"] == pytest.approx(1 + 2 * unit.low, abs=1e-12)
        assert row["clarity"]["high"] == pytest.approx(1 + 2 * unit.high, abs=1e-12)
        assert row["clarity"]["method"] == f"{unit.method}, on (level - 1) / 2, mapped back"
    # Each Likert question is ordinal in the followers' agreement table, beside the rating.
    agree = next(t for t in board["extra"]["tables"] if t["key"] == "navigation_followers_agreement")
    levels = {r["question"].split(":")[0]: r["level"] for r in agree["rows"]}
    assert levels == {"Rating": "ordinal", "clarity": "ordinal", "confidence": "ordinal", "Success": "nominal"}
    json.dumps(board, allow_nan=False)
    login(client, owner)
    assert 'id="navigation_likert"' in client.get(f"/studies/{study.id}/leaderboard").text
