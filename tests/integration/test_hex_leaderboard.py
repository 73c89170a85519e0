"""The Hexagons leaderboard section on both backends: two workers execute eight procedures
through the crowd engine (one exactly, one skipping every second step), an agent's
predictions are imported, and the section shows them in their sections with their counts,
the breakdowns by category, step position and abstraction level, interval plots, and the
paired tests with the differences a hand computation gives."""

from __future__ import annotations

import json

import pytest
import scipy.stats
from sqlalchemy import select
from sqlalchemy.orm.attributes import flag_modified

from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Item
from tests.conftest import login, make_user

BLANK = [0] * 180
ONE = [4] + [0] * 179
TWO = [4, 5] + [0] * 178


def _line(index: int) -> str:
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple" if index % 2 else "symmetry",
            "image_id": f"P{index}",
            "instructor_id": 3,
            "number_of_drawing_steps": 2,
            "agreement_tags": ["A", "A"],
            "agreement_scores": [[1, 1, 1]] * 2,
            "drawing_procedure": [[0, "NONE", BLANK], [1, "tile 0 red", ONE], [2, "tile 1 blue", TWO]],
        }
    )


pytestmark = pytest.mark.usefixtures("hexagons_kind")  # tests/conftest.py


def _execute(session, study, worker: str, second_step: list[int]) -> str:
    bundle = assignment.enter(session, study, "prolific", worker)
    a = assignment.next_item(session, study, bundle.id)
    while a is not None:
        steps = [
            {"board": ONE, "actions": [[0, 4, 500]]},
            {"board": second_step, "actions": [[1, 5, 700]] if second_step == TWO else []},
        ]
        assignment.submit(session, study, bundle.id, a.id, {"steps": json.dumps(steps)}, f"{worker}-{a.id}")
        a = assignment.next_item(session, study, bundle.id)
    return assignment.pseudonym("prolific", worker)


def test_sections_breakdowns_and_paired_tests(app, client, session):
    owner = make_user(session, "researcher")
    data = "\n".join(_line(i) for i in range(1, 9)).encode()
    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Hex", bundle_size=8, gold_rate=0.0, annotations_per_item=2),
        data,
        "procedures",
    )
    # Abstraction labels as a labelling study writes them: step 1 level 1, step 2 level 2 on
    # odd procedures; even ones unlabelled.
    for item in session.scalars(select(Item).where(Item.study_id == study.id)):
        if int(item.external_id) % 2:
            item.reference["abstraction"] = [{"level": 1, "mechanisms": []}, {"level": 2, "mechanisms": ["repetition"]}]
            flag_modified(item, "reference")
    session.commit()
    services.set_state(session, study, "live", owner)
    exact = _execute(session, study, "EXACT01", TWO)
    lazy = _execute(session, study, "LAZY001", ONE)  # paints nothing in step 2
    agent = services.register_agent(session, owner, "hexagons", "copier", "1")
    preds = "\n".join(
        json.dumps({"index": i, "step": k, "board": b}) for i in range(1, 9) for k, b in ((1, ONE), (2, ONE))
    ).encode()
    services.import_agent_outputs(session, study, agent, preds)
    session.expire_all()

    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    rows = {r["who"]: r for r in tables["hexagons_metrics"]["rows"]}
    assert [r["section"] for r in tables["hexagons_metrics"]["rows"]] == [
        "Agents",
        "Human executors (skyline)",
        "Human executors (skyline)",
        "Human executors (skyline)",
        "Baselines",
    ]
    assert set(rows) == {"copier v1", "All human executors", exact, lazy, "No action (paints nothing)"}
    assert (rows[exact]["procedures"], rows[exact]["steps"]) == (8, 16)
    assert (rows["All human executors"]["executions"], rows["All human executors"]["steps"]) == (16, 32)
    # Every step right on 8 procedures: stats.mean_interval with no spread takes the 8 procedures
    # as the effective n, Wilson at p = 1 with t on 7 df: low = 8 / (8 + t^2) = 0.5886. (The old
    # figure, [1, 1] from a bootstrap of procedures, was the wrong one: a zero-width interval.)
    t = scipy.stats.t.ppf(0.975, 7)
    assert rows[exact]["board_f1"] == {
        "n": 16,
        "mean": 1.0,
        "low": pytest.approx(8 / (8 + t * t)),
        "high": 1.0,
        "method": "Wilson (effective n, clusters)",
        "units": 8,
        "unit": "procedure",
    }
    # Step 2 left undone: board P 1, R 1/2, F1 2/3; no action where one was due: action F1 0.
    assert rows[lazy]["board_f1"]["mean"] == pytest.approx((1 + 2 / 3) / 2)
    assert rows[lazy]["action_f1"]["mean"] == pytest.approx(0.5)
    assert rows["All human executors"]["board_f1"]["mean"] == pytest.approx((1 + (1 + 2 / 3) / 2) / 2)
    assert rows["copier v1"]["board_f1"]["mean"] == rows[lazy]["board_f1"]["mean"]

    levels = {r["who"]: r for r in tables["hexagons_by_level"]["rows"]}
    assert [c["label"] for c in tables["hexagons_by_level"]["columns"][2:]] == ["level 1", "level 2"]
    assert levels[lazy]["g:level 1"]["mean"] == 1.0 and levels[lazy]["g:level 2"]["mean"] == pytest.approx(2 / 3)
    assert levels[lazy]["g:level 2"]["n"] == 4  # the four odd procedures' second steps
    steps = {r["who"]: r for r in tables["hexagons_by_step"]["rows"]}
    assert steps["No action (paints nothing)"]["g:step 1"]["mean"] == 0.0
    cats = {r["who"]: r for r in tables["hexagons_by_category"]["rows"]}
    assert cats[exact]["g:category: simple"]["n"] == 8

    pairs = {(r["a"], r["b"]): r for r in tables["hexagons_paired"]["rows"]}
    # Annotators are ordered by their pseudonyms: the pair may be either way round.
    p, sign = (pairs[(exact, lazy)], 1) if (exact, lazy) in pairs else (pairs[(lazy, exact)], -1)
    # The same difference on all 8 procedures: the sign-flip p is 2 / 2**8 and the interval a point.
    assert p["procedures"] == 8 and p["steps"] == 16
    assert sign * p["board_f1"]["mean"] == pytest.approx(1 / 6) and p["board_f1"]["low"] == pytest.approx(
        p["board_f1"]["high"]
    )
    assert sign * p["action_f1"]["mean"] == pytest.approx(0.5) and p["board_f1_p"] == "0.008"
    assert pairs[("copier v1", lazy)]["board_f1"]["mean"] == 0.0 and pairs[("copier v1", lazy)]["board_f1_p"] == "1.000"
    assert ("copier v1", "No action (paints nothing)") in pairs

    figures = [f["title"] for f in board["extra"]["figures"]]
    assert figures == [
        "Board F1, averaged over steps (95% intervals)",
        "Board F1 per category (95% intervals)",
        "Board F1 per step position (95% intervals)",
        "Board F1 per abstraction level (95% intervals)",
    ]
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200
    assert 'aria-label="Board F1 with 95% intervals"' in page.text and "Paired differences in F1" in page.text
    assert "level 2 · " + lazy in page.text and "cdn" not in page.text.lower()
    api = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert api.status_code == 200 and {t["key"] for t in api.json()["extra"]["tables"]} == set(tables)
