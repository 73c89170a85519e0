"""The admin's replay shows each answer as the worker saw its item, with their answer and the
right one, for every kind; neither it nor the audit log shows a raw dict."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from app.demo import simulate_task
from app.quality import service as quality
from app.studies import services
from app.studies.models import Annotation, Item, Participant
from tests.conftest import create_tom_study, login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "pages rendered from stored answers read through the ORM"
)

RAW = re.compile(r"\{&#39;|\{&#34;|&#39;: ")  # a Python dict's repr, escaped


def _replay(client, session, study) -> str:
    pid = session.scalar(select(Participant.id).where(Participant.study_id == study.id))
    r = client.get(f"/admin/studies/{study.id}/participants/{pid}")
    assert r.status_code == 200, r.text
    assert not RAW.search(r.text), RAW.search(r.text)
    return r.text


def _live(session, owner, kind, data, fmt, **settings):
    s = services.StudySettings(
        title=f"Replay {kind}", **{"bundle_size": 2, "gold_rate": 0.0, "annotations_per_item": 1, **settings}
    )
    study = services.create_study(session, owner, kind, s, data, fmt)
    services.set_state(session, study, "live", owner)
    return study


def test_tom_replay_shows_the_dialogue_question_and_both_answers(session, client):
    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    study = create_tom_study(session, owner, bundle_size=5, gold_rate=0.4, annotations_per_item=1)
    simulate_task(session, study, "w1", lambda item, rng: {"answer": "Yes"}, 8.0, seed=1)
    login(client, admin)
    html = _replay(client, session, study)
    items = session.scalars(
        select(Item).join(Annotation, Annotation.item_id == Item.id).where(Item.study_id == study.id)
    ).all()
    gold = [i for i in items if i.is_gold]
    assert gold and len(items) == 5
    for item in items:  # every answered item's dialogue lines and question are on the page
        assert item.payload["window"][0]["text"].replace("'", "&#39;") in html
    assert html.count('class="tom-given">Yes<') == 5
    assert html.count('class="tom-right">') == 5
    assert "Gold item" in html and 'alt="stop sign' in html

    # The audit log lists a decision's details as fields.
    quality.decide(
        session,
        study,
        [session.scalar(select(Participant.id).where(Participant.study_id == study.id))],
        "rejected",
        admin,
        reason="always Yes",
    )
    audit = client.get("/admin/audit").text
    assert not RAW.search(audit)
    assert re.search(r"<dt>reason</dt><dd>always Yes</dd>", audit)
    assert re.search(rf"<dt>study</dt><dd>{study.id}</dd>", audit)


def test_a3ds_replay_shows_the_caption_pictures_and_picks(session, client):
    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    design = {"pairs": {"z": {"1": 2}}, "speakers": ["literal"], "seed": 1, "gold": 0}
    study = _live(session, owner, "a3ds", json.dumps(design).encode(), "design")
    simulate_task(session, study, "w1", lambda item, rng: {"choice": "1"}, 3.0, seed=1)
    login(client, admin)
    html = _replay(client, session, study)
    for item in session.scalars(select(Item).where(Item.study_id == study.id)):
        assert f"“{item.payload['caption']}”".replace("'", "&#39;") in html
        for scene in item.payload["scenes"]:
            assert f"/a3ds/scenes/{scene}?size=256" in html
    assert html.count('class="a3ds-given">the left picture<') == 2
    assert html.count('class="a3ds-right">the ') == 2


def test_hexagons_replay_draws_their_boards_beside_the_gold_ones(session, client, hexagons_kind):
    blank, one, two = [0] * 180, [4] + [0] * 179, [4, 5] + [0] * 178
    line = {
        "index": 1,
        "annotation_round": 1,
        "category": "simple",
        "image_id": "P1",
        "instructor_id": 3,
        "number_of_drawing_steps": 2,
        "agreement_tags": ["A", "A"],
        "agreement_scores": [[1, 1, 1]] * 2,
        "drawing_procedure": [[0, "NONE", blank], [1, "tile 0 red", one], [2, "tile 1 blue", two]],
    }
    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    study = _live(session, owner, "hexagons", json.dumps(line).encode(), "procedures", bundle_size=1)
    steps = json.dumps([{"board": one, "actions": [[0, 4, 900]]}, {"board": one, "actions": []}])
    simulate_task(session, study, "w1", lambda item, rng: {"steps": steps}, 30.0, seed=1)
    login(client, admin)
    html = _replay(client, session, study)
    assert "tile 0 red" in html and "tile 1 blue" in html
    assert html.count('class="hex-replay-board"') == 4  # theirs and the gold, two steps
    assert 'aria-label="Their board after step 2: 1 tiles painted"' in html
    assert 'aria-label="The gold board after step 2: 2 tiles painted"' in html
    assert "score 0.83" in html  # step 1 right, step 2 left undone: the kind's mean metric


def test_sts_replay_shows_the_frames_and_both_markers(session, client):
    from app.kinds.sts.demo import demo_lines

    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    every = demo_lines()
    lines = [x for x in every if x.get("reference")][:2] + [x for x in every if not x.get("reference")][:2]
    study = _live(
        session,
        owner,
        "sts",
        "\n".join(json.dumps(x) for x in lines).encode(),
        "continuations",
        bundle_size=4,
        gold_rate=0.5,
    )
    assert simulate_task(session, study, "w1", lambda item, rng: {"marker": "success", "step": 1}, 20.0, seed=1) == 4
    login(client, admin)
    html = _replay(client, session, study)
    assert html.count('class="sts-replay-frames"') == 4
    assert html.count(">Their marker: success (step 1 after the takeover)</figcaption>") == 4
    assert "The reference: " in html and 'class="sts-right">' in html
    assert lines[0]["mission"] in html


def test_a_kind_without_a_replay_template_gets_readable_fields(session, client):
    """The example kind (tests/example_kind) has no replay template: its item, answer and
    right answer are listed as fields."""
    from tests.integration.test_example_kind import answer_all, make_study

    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    study = make_study(session, owner)
    answer_all(session, study, "counter", right=False)
    login(client, admin)
    html = _replay(client, session, study)
    assert html.count("<h4>What the worker saw</h4>") == 3
    assert "<dt>sentence</dt><dd>Proctor counts words here</dd>" in html
    assert "<dt>words</dt><dd>5</dd>" in html  # their answer: one more than the right 4
    assert "<dt>words</dt><dd>4</dd>" in html
    assert len(re.findall(r"\(task slot \d\):\s*wrong", html)) == 3
