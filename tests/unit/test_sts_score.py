"""STS scoring (app/kinds/sts/score.py) against numbers worked out by hand from the paper's
definitions: majority outcome per continuation (a tie is half), success share over
continuations with sqrt(p(1-p)/n), time to completion from success markers, and annotators'
sensitivity, specificity and balanced accuracy on reference episodes only."""

from __future__ import annotations

import json
import math

import pytest

from app.errors import InputError
from app.kinds.sts.score import read_markers, score


def _line(annotator, agent, scenario, continuation, marker, step, category="go to", **extra):
    return json.dumps({"annotator": annotator, "agent": agent, "scenario": scenario,
                       "continuation": continuation, "category": category, "marker": marker,
                       "step": step, "reference": False, **extra})


def _ref(annotator, marker, label, step=3):
    return json.dumps({"annotator": annotator, "agent": "expert", "scenario": "r1", "continuation": 0,
                       "category": "go to", "marker": marker, "step": step, "reference": True,
                       "label": label})


LINES = [
    # agent A, scenario s1 (go to): continuation 0 by three annotators 2:1 success -> 1
    _line("w1", "A", "s1", 0, "success", 4), _line("w2", "A", "s1", 0, "success", 6),
    _line("w3", "A", "s1", 0, "failure", 9),
    # continuation 1: 1:1 -> a tie, half a success
    _line("w1", "A", "s1", 1, "success", 10), _line("w2", "A", "s1", 1, "failure", 2),
    # scenario s2 (pick up), continuation 0: failure -> 0
    _line("w1", "A", "s2", 0, "failure", 12, category="pick up"),
    # agent B: one continuation, success -> 1
    _line("w3", "B", "s1", 0, "success", 7),
    # reference episodes: w1 right on both labels; w2 sees only success-labelled ones;
    # w3 marks a success-labelled one failure and a failure-labelled one failure
    _ref("w1", "success", "success"), _ref("w1", "failure", "failure"), _ref("w1", "success", "failure"),
    _ref("w2", "success", "success"), _ref("w2", "failure", "success"),
    _ref("w3", "failure", "success"), _ref("w3", "failure", "failure"),
]


def test_agents_success_share_per_category_scenario_and_time_to_completion():
    got = score(read_markers(LINES))
    a = got["agents"]["A"]
    # outcomes 1, 0.5, 0 over n = 3 continuations
    assert a["n"] == 3 and a["success"] == pytest.approx(0.5)
    assert a["se"] == pytest.approx(math.sqrt(0.5 * 0.5 / 3))
    assert a["per_category"] == {
        "go to": {"n": 2, "success": pytest.approx(0.75), "se": pytest.approx(math.sqrt(0.75 * 0.25 / 2))},
        "pick up": {"n": 1, "success": 0.0, "se": 0.0}}
    assert a["per_scenario"] == {"s1": pytest.approx(0.75), "s2": 0.0}
    assert a["ttc_median"] == 6  # success markers at 4, 6, 10
    b = got["agents"]["B"]
    assert (b["n"], b["success"], b["se"], b["ttc_median"]) == (1, 1.0, 0.0, 7)
    assert set(got["agents"]) == {"A", "B"}  # the reference episodes' "expert" is no agent


def test_annotators_are_measured_on_reference_episodes_only():
    got = score(read_markers(LINES))["annotators"]
    assert got["w1"] == {"n_reference": 3, "sensitivity": 1.0, "specificity": 0.5,
                         "balanced_accuracy": 0.75}
    assert got["w2"] == {"n_reference": 2, "sensitivity": 0.5, "specificity": None,
                         "balanced_accuracy": None}
    assert got["w3"] == {"n_reference": 2, "sensitivity": 0.0, "specificity": 1.0,
                         "balanced_accuracy": 0.5}


def test_an_agent_without_success_markers_has_no_time_to_completion():
    got = score(read_markers([_line("w1", "C", "s1", 0, "failure", 5)]))
    assert got["agents"]["C"] == {"n": 1, "success": 0.0, "se": 0.0, "per_category": {
        "go to": {"n": 1, "success": 0.0, "se": 0.0}}, "per_scenario": {"s1": 0.0}, "ttc_median": None}
    assert got["annotators"]["w1"]["n_reference"] == 0


def test_ids_keep_their_text_whatever_their_json_type():
    got = score(read_markers([_line(7, 12, 3, "0", "success", 1)]))
    assert list(got["agents"]) == ["12"] and list(got["agents"]["12"]["per_scenario"]) == ["3"]
    assert list(got["annotators"]) == ["7"]


@pytest.mark.parametrize("line, field, words", [
    ('{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "yes", "step": 1, '
     '"reference": false}', "marker", 'not "yes"'),
    ('{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
     '"reference": false}', "step", "is missing"),
    ('{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
     '"step": -1, "reference": false}', "step", "0 or more"),
    ('{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
     '"step": 1, "reference": "no"}', "reference", "true or false"),
    ('{"annotator": "w", "marker": "success", "step": 1, "reference": true}', "label", "not null"),
    ('{"agent": "A", "scenario": "s", "continuation": 0, "marker": "success", "step": 1, '
     '"reference": false}', "annotator", "is missing"),
    ('{"annotator": "w", "scenario": "s", "continuation": 0, "marker": "success", "step": 1, '
     '"reference": false}', "agent", "is missing"),
    ('{"annotator": ["w"], "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
     '"step": 1, "reference": false}', "annotator", "not list"),
])
def test_bad_lines_name_the_line_and_the_field(line, field, words):
    with pytest.raises(InputError) as err:
        list(read_markers([_line("w1", "A", "s1", 0, "success", 1), "", line]))
    assert (err.value.line, err.value.field) == (3, field) and words in err.value.message


def test_a_line_that_is_not_json_or_a_continuation_in_two_categories_is_refused():
    with pytest.raises(InputError, match="line 2: not JSON"):
        list(read_markers([_line("w1", "A", "s1", 0, "success", 1), "{oops"]))
    with pytest.raises(InputError) as err:
        list(read_markers([_line("w1", "A", "s1", 0, "success", 1),
                           _line("w2", "A", "s1", 0, "success", 1, category="open")]))
    assert (err.value.line, err.value.field) == (2, "category") and "line 1" in err.value.message


def test_spearman_against_a_reference_and_undefined_cases():
    from app.kinds.sts.leaderboard import rogan_gladen, spearman

    # Ranks (1, 2, 3, 4) and (1, 3, 2, 4): d^2 = 2, rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    got = spearman([0.1, 0.2, 0.3, 0.9], [0.0, 0.5, 0.4, 1.0])
    assert got["rho"] == pytest.approx(0.8) and 0 < got["p"] < 1
    assert spearman([0.1, 0.2], [0.3, 0.4]) == {"rho": None, "p": None}
    assert spearman([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) == {"rho": None, "p": None}
    # Rogan-Gladen: observed 0.6 with sensitivity 0.9 and specificity 0.8 -> (0.6 + 0.8 - 1) / 0.7.
    assert rogan_gladen(0.6, 0.9, 0.8) == pytest.approx(0.4 / 0.7)
    assert rogan_gladen(0.05, 0.9, 0.8) == 0.0 and rogan_gladen(0.99, 0.9, 0.8) == 1.0
    assert rogan_gladen(0.6, 0.5, 0.5) is None and rogan_gladen(0.6, None, 0.8) is None
