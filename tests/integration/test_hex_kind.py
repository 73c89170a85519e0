"""The Hexagons kind on both backends: procedures become items (instructions only in the
payload), a worker's execution is validated and scored against the gold boards, agent
predictions import, and the "no action" baseline is a leaderboard row.

Until the venv is reinstalled with the `hexagons` entry point, the kind is registered by
conftest's `hexagons_kind`."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.errors import InputError
from app.kinds.hexagons import KIND
from app.studies import services
from app.studies.models import Item
from tests.conftest import make_user

BLANK = [0] * 180
ONE = [4] + [0] * 179
TWO = [4, 5] + [0] * 178


def _line(index, tags=("A", "A")):
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple",
            "image_id": f"P{index}",
            "instructor_id": 3,
            "number_of_drawing_steps": 2,
            "agreement_tags": list(tags),
            "agreement_scores": [[1, 1, 1]] * 2,
            "drawing_procedure": [[0, "NONE", BLANK], [1, "tile 0 red", ONE], [2, "tile 1 blue", TWO]],
        }
    )


pytestmark = pytest.mark.usefixtures("hexagons_kind")


def test_items_scores_outputs_and_baseline(session):
    owner = make_user(session, "researcher")
    data = "\n".join([_line(1), _line(2, ("A", "F"))]).encode()
    study = services.create_study(session, owner, "hexagons", services.StudySettings(title="Hex"), data, "procedures")
    items = {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    assert set(items) == {"1", "2"}
    assert KIND.public_payload(items["1"].payload).keys() == {"instructions", "initial", "layout"}
    assert "boards" not in items["1"].payload and items["1"].reference["boards"] == [ONE, TWO]

    # The page sends steps as JSON; step 2 paints tile 1 green instead of blue.
    wrong = [4, 3] + [0] * 178
    resp = KIND.parse_response(
        {"steps": json.dumps([{"board": ONE, "actions": [[0, 4, 900]]}, {"board": wrong, "actions": [[1, 3, 400]]}])},
        items["1"].payload,
    )
    details = KIND.score_details(items["1"].payload, items["1"].reference, resp)
    assert [s["board_f1"] for s in details["per_step"]] == [1.0, 0.5]
    assert details["action_f1"] == 0.5 and KIND.score(items["1"].payload, items["1"].reference, resp) == 0.75
    with pytest.raises(InputError) as exc:  # actions that do not make the board
        KIND.parse_response({"steps": [{"board": ONE, "actions": [[2, 4, 10]]}, {"board": TWO}]}, items["1"].payload)
    assert exc.value.field == "steps.0.board"
    with pytest.raises(InputError) as exc:
        KIND.parse_response({"steps": [{"board": ONE + [0]}, {"board": TWO}]}, items["1"].payload)
    assert exc.value.field == "steps.0.board"
    with pytest.raises(InputError) as exc:
        KIND.parse_response({"steps": [{"board": ONE}]}, items["1"].payload)
    assert exc.value.field == "steps"

    preds = "\n".join(json.dumps({"index": 1, "step": k, "board": b}) for k, b in ((1, ONE), (2, ONE))).encode()
    out = KIND.import_agent_outputs(preds, set(items), {k: v.payload for k, v in items.items()})
    assert KIND.score_details(items["1"].payload, items["1"].reference, out["1"])["board_recall"] == 0.75
    from app.kinds.hexagons.leaderboard import section

    agent = services.register_agent(session, owner, "hexagons", "copier", "1")
    services.import_agent_outputs(session, study, agent, preds)
    tables = {t["key"]: t for t in section(session, study)["tables"]}
    rows = {r["who"]: r for r in tables["hexagons_metrics"]["rows"]}
    # Step 1 right (board F1 1), step 2 missed tile 1 (board F1 2/3); the agent has no output
    # for the study's second procedure, whose two steps count 0 (as the generic table counts a
    # missing answer): (1 + 2/3 + 0 + 0) / 4 = 5/12 over the study's 4 steps.
    assert rows["copier v1"]["board_f1"]["mean"] == pytest.approx(5 / 12)
    assert {r["who"]: r for r in tables["hexagons_by_step"]["rows"]}["copier v1"]["g:step 2"]["n"] == 2
    [row] = KIND.baselines(session, study)
    # No action: step 1 paints nothing (board F1 0), step 2 keeps tile 0 (P 1, R 1/2, F1 2/3).
    assert row["accuracy"]["mean"] == pytest.approx(1 / 3) and row["answered"] == 2


def test_gold_are_all_agreed_procedures(session):
    data = "\n".join([_line(1), _line(2, ("A", "F"))]).encode()
    result = KIND.import_items(data, "procedures", {"gold_count": 5})
    assert [i.external_id for i in result.items if i.is_gold] == ["1"]
