"""The paper's rule-based executor is a baseline row of a Hexagons execution study's
leaderboard (Hexagons.baselines), computed on the same path as "No action": each step executed
on the gold board before it, scored by execution_metrics with the study's score metric."""

from __future__ import annotations

import json

import pytest

from app.kinds.hexagons import KIND, rule_executor
from app.studies import services
from tests.conftest import make_user

BLANK = [0] * 180
ONE = [4] + [0] * 179
TWO = [4, 5] + [0] * 178

pytestmark = pytest.mark.usefixtures("hexagons_kind")


def _line(index, first="In the first column, color the 1st tile red", second="tile 1 blue"):
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple",
            "image_id": f"P{index}",
            "instructor_id": 3,
            "number_of_drawing_steps": 2,
            "agreement_tags": ["A", "A"],
            "agreement_scores": [[1, 1, 1]] * 2,
            "drawing_procedure": [[0, "NONE", BLANK], [1, first, ONE], [2, second, TWO]],
        }
    )


def test_the_rule_based_row_beside_no_action(session):
    owner = make_user(session, "researcher")
    data = "\n".join([_line(1), _line(2)]).encode()
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Hex rules"), data, "procedures"
    )
    rows = {r["name"]: r for r in KIND.baselines(session, study)}
    assert list(rows) == ["No action (paints nothing)", rule_executor.NAME]
    # Board F1 (the default score): the rule paints step 1 exactly (1); step 2 names no column,
    # so it keeps tile 0 (P 1, R 1/2, F1 2/3). No action: 0 then 2/3.
    assert rows[rule_executor.NAME]["accuracy"]["mean"] == pytest.approx(5 / 6)
    assert rows[rule_executor.NAME]["answered"] == 2 and rows[rule_executor.NAME]["type"] == "baseline"
    assert rows[rule_executor.NAME]["by_category"]["simple"]["mean"] == pytest.approx(5 / 6)
    assert rows["No action (paints nothing)"]["accuracy"]["mean"] == pytest.approx(1 / 3)


def test_no_rule_row_where_the_rules_paint_nothing(session):
    owner = make_user(session, "researcher")
    data = _line(1, first="Make a red dot", second="then a blue one").encode()
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Hex shapes"), data, "procedures"
    )
    assert [r["name"] for r in KIND.baselines(session, study)] == ["No action (paints nothing)"]


def test_the_rule_based_row_is_in_the_section_with_the_generic_figure(session):
    # The section's metrics table has the rule-based row too, computed by the same function
    # (leaderboard.baseline_rows, then stats.mean_interval over steps clustered by procedure).
    from app.kinds.hexagons.leaderboard import section

    owner = make_user(session, "researcher")
    data = "\n".join([_line(1), _line(2)]).encode()
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Hex rules"), data, "procedures"
    )
    agent = services.register_agent(session, owner, "hexagons", "copier", "1")
    preds = "\n".join(
        json.dumps({"index": i, "step": k, "board": b}) for i in (1, 2) for k, b in ((1, ONE), (2, ONE))
    ).encode()
    services.import_agent_outputs(session, study, agent, preds)
    tables = {t["key"]: t for t in section(session, study)["tables"]}
    rows = {r["who"]: r for r in tables["hexagons_metrics"]["rows"]}
    assert rows[rule_executor.NAME]["section"] == "Baselines" and rows[rule_executor.NAME]["coverage"] == 1.0
    generic = {r["name"]: r for r in KIND.baselines(session, study)}
    for name in (rule_executor.NAME, "No action (paints nothing)"):
        # The same estimate; the section's also counts the procedures its interval resamples.
        section_cell = rows[name]["board_f1"]
        generic_cell = generic[name]["accuracy"]
        assert section_cell == generic_cell  # the unit count too: the generic row says it as well
        assert (section_cell["unit"], section_cell["units"]) == ("procedure", rows[name]["procedures"])
    assert rows[rule_executor.NAME]["board_f1"]["mean"] == pytest.approx(5 / 6)
