"""STS scoring (app/kinds/sts/score.py) against numbers worked out by hand from the paper's
definitions: majority outcome per continuation (a tie is half), success share over
continuations with sqrt(p(1-p)/n) and a Wilson interval (never [1, 1] at p = 1; "too few" under
5 continuations), the share corrected by the annotators' measured error (Rogan-Gladen), time
to completion per successful continuation (appendix A.4), annotators' sensitivity,
specificity and balanced accuracy on reference episodes only, a mining rule's tag dropped where
the takeover no longer matches it, and `proctor sts score`'s table and JSON."""

from __future__ import annotations

import json
import math

import pytest

from app.errors import InputError
from app.kinds.sts.score import read_markers, score, share, time_to_completion
from app.leaderboards.correction import rogan_gladen_estimate
from app.leaderboards.stats import wilson_interval


def _line(annotator, agent, scenario, continuation, marker, step, category="go to", **extra):
    return json.dumps(
        {
            "annotator": annotator,
            "agent": agent,
            "scenario": scenario,
            "continuation": continuation,
            "category": category,
            "marker": marker,
            "step": step,
            "reference": False,
            **extra,
        }
    )


def _ref(annotator, marker, label, step=3):
    return json.dumps(
        {
            "annotator": annotator,
            "agent": "expert",
            "scenario": "r1",
            "continuation": 0,
            "category": "go to",
            "marker": marker,
            "step": step,
            "reference": True,
            "label": label,
        }
    )


LINES = [
    # agent A, scenario s1 (go to): continuation 0 by three annotators 2:1 success -> 1
    _line("w1", "A", "s1", 0, "success", 4),
    _line("w2", "A", "s1", 0, "success", 6),
    _line("w3", "A", "s1", 0, "failure", 9),
    # continuation 1: 1:1 -> a tie, half a success
    _line("w1", "A", "s1", 1, "success", 10),
    _line("w2", "A", "s1", 1, "failure", 2),
    # scenario s2 (pick up), continuation 0: failure -> 0
    _line("w1", "A", "s2", 0, "failure", 12, category="pick up"),
    # agent B: one continuation, success -> 1
    _line("w3", "B", "s1", 0, "success", 7),
    # reference episodes: w1 right on both labels; w2 sees only success-labelled ones;
    # w3 marks a success-labelled one failure and a failure-labelled one failure
    _ref("w1", "success", "success"),
    _ref("w1", "failure", "failure"),
    _ref("w1", "success", "failure"),
    _ref("w2", "success", "success"),
    _ref("w2", "failure", "success"),
    _ref("w3", "failure", "success"),
    _ref("w3", "failure", "failure"),
]


def test_agents_success_share_per_category_scenario_and_time_to_completion():
    got = score(read_markers(LINES))
    a = got["agents"]["A"]
    # outcomes 1, 0.5, 0 over n = 3 continuations
    assert a["n"] == 3 and a["success"] == pytest.approx(0.5)
    assert a["se"] == pytest.approx(math.sqrt(0.5 * 0.5 / 3))
    cats = {c: (e["n"], e["success"], e["se"], e["note"]) for c, e in a["per_category"].items()}
    assert cats == {
        "go to": (2, pytest.approx(0.75), pytest.approx(math.sqrt(0.75 * 0.25 / 2)), "too few: n = 2"),
        "pick up": (1, 0.0, 0.0, "too few: n = 1"),
    }
    assert a["per_scenario"] == {"s1": pytest.approx(0.75), "s2": 0.0}
    # Time to completion, one per successful continuation (A.4): s1/0 (2:1 success) at the
    # median of its success markers 4 and 6; the tie s1/1 did not succeed. (Before issue 25:
    # 6, the median over every success marker, the tie's 10 included.)
    assert a["ttc_median"] == 5 and a["ttc"]["steps"] == [5] and a["ttc"]["n"] == 1
    b = got["agents"]["B"]
    assert (b["n"], b["success"], b["se"], b["ttc_median"]) == (1, 1.0, 0.0, 7)
    assert set(got["agents"]) == {"A", "B"}  # the reference episodes' "expert" is no agent


def test_annotators_are_measured_on_reference_episodes_only():
    got = score(read_markers(LINES))["annotators"]
    assert got["w1"] == {"n_reference": 3, "sensitivity": 1.0, "specificity": 0.5, "balanced_accuracy": 0.75}
    assert got["w2"] == {"n_reference": 2, "sensitivity": 0.5, "specificity": None, "balanced_accuracy": None}
    assert got["w3"] == {"n_reference": 2, "sensitivity": 0.0, "specificity": 1.0, "balanced_accuracy": 0.5}


def test_an_agent_without_success_markers_has_no_time_to_completion():
    got = score(read_markers([_line("w1", "C", "s1", 0, "failure", 5)]))
    c = got["agents"]["C"]
    assert (c["n"], c["success"], c["se"], c["per_scenario"], c["ttc_median"]) == (1, 0.0, 0.0, {"s1": 0.0}, None)
    assert (c["ttc"]["median"], c["ttc"]["n"], c["ttc"]["steps"]) == (None, 0, [])
    assert c["per_category"]["go to"]["n"] == 1 and c["corrected"]["mean"] is None
    assert got["annotators"]["w1"]["n_reference"] == 0


def test_ids_keep_their_text_whatever_their_json_type():
    got = score(read_markers([_line(7, 12, 3, "0", "success", 1)]))
    assert list(got["agents"]) == ["12"] and list(got["agents"]["12"]["per_scenario"]) == ["3"]
    assert list(got["annotators"]) == ["7"]


@pytest.mark.parametrize(
    "line, field, words",
    [
        (
            '{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "yes", "step": 1, '
            '"reference": false}',
            "marker",
            'not "yes"',
        ),
        (
            '{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
            '"reference": false}',
            "step",
            "is missing",
        ),
        (
            '{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
            '"step": -1, "reference": false}',
            "step",
            "0 or more",
        ),
        (
            '{"annotator": "w", "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
            '"step": 1, "reference": "no"}',
            "reference",
            "true or false",
        ),
        ('{"annotator": "w", "marker": "success", "step": 1, "reference": true}', "label", "not null"),
        (
            '{"agent": "A", "scenario": "s", "continuation": 0, "marker": "success", "step": 1, "reference": false}',
            "annotator",
            "is missing",
        ),
        (
            '{"annotator": "w", "scenario": "s", "continuation": 0, "marker": "success", "step": 1, '
            '"reference": false}',
            "agent",
            "is missing",
        ),
        (
            '{"annotator": ["w"], "agent": "A", "scenario": "s", "continuation": 0, "marker": "success", '
            '"step": 1, "reference": false}',
            "annotator",
            "not list",
        ),
    ],
)
def test_bad_lines_name_the_line_and_the_field(line, field, words):
    with pytest.raises(InputError) as err:
        list(read_markers([_line("w1", "A", "s1", 0, "success", 1), "", line]))
    assert (err.value.line, err.value.field) == (3, field) and words in err.value.message


def test_a_line_that_is_not_json_or_a_continuation_in_two_categories_is_refused():
    with pytest.raises(InputError, match="line 2: not valid JSON"):
        list(read_markers([_line("w1", "A", "s1", 0, "success", 1), "{oops"]))
    with pytest.raises(InputError) as err:
        list(
            read_markers(
                [_line("w1", "A", "s1", 0, "success", 1), _line("w2", "A", "s1", 0, "success", 1, category="open")]
            )
        )
    assert (err.value.line, err.value.field) == (2, "category") and "line 1" in err.value.message


def test_spearman_against_a_reference_and_undefined_cases():
    from app.kinds.sts.leaderboard import spearman
    from app.leaderboards.correction import rogan_gladen

    # Ranks (1, 2, 3, 4) and (1, 3, 2, 4): d^2 = 2, rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    got = spearman([0.1, 0.2, 0.3, 0.9], [0.0, 0.5, 0.4, 1.0])
    assert got["rho"] == pytest.approx(0.8) and 0 < got["p"] < 1
    assert spearman([0.1, 0.2], [0.3, 0.4]) == {"rho": None, "p": None}
    assert spearman([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) == {"rho": None, "p": None}
    # Rogan-Gladen: observed 0.6 with sensitivity 0.9 and specificity 0.8 -> (0.6 + 0.8 - 1) / 0.7.
    assert rogan_gladen(0.6, 0.9, 0.8) == pytest.approx(0.4 / 0.7)
    assert rogan_gladen(0.05, 0.9, 0.8) == 0.0 and rogan_gladen(0.99, 0.9, 0.8) == 1.0
    assert rogan_gladen(0.6, 0.5, 0.5) is None and rogan_gladen(0.6, None, 0.8) is None


def _many(agent, outcomes, scenarios=1):
    """One annotator's marker per continuation: 1 a success at step 3 + i, 0 a failure."""
    return [
        _line("w1", agent, f"s{i % scenarios}", i, "success" if o else "failure", 3 + i) for i, o in enumerate(outcomes)
    ]


def test_the_share_has_a_wilson_interval_that_does_not_collapse_at_one():
    a = score(read_markers(_many("A", [1] * 10, scenarios=10)))["agents"]["A"]
    assert (a["mean"], a["success"], a["se"], a["n"]) == (1.0, 1.0, 0.0, 10)
    assert (a["low"], a["high"]) == wilson_interval(10, 10) and 0.65 < a["low"] < 0.75 and a["high"] == 1.0
    assert "Wilson" in a["method"] and "note" not in a
    # Ten continuations of one scenario say nothing of the suite's other scenarios: the
    # scenario is the unit, and one unit leaves the whole range.
    one = score(read_markers(_many("A", [1] * 10, scenarios=1)))["agents"]["A"]
    assert (one["mean"], one["low"], one["high"], one["method"]) == (1.0, 0.0, 1.0, "whole range (one unit)")
    # A tie's half success: the closed form at 1.5 of 3, between the intervals of 1 and 2 of 3.
    e = share([1.0, 0.5, 0.0])
    assert wilson_interval(1, 3)[0] < e["low"] < wilson_interval(2, 3)[0]
    assert wilson_interval(1, 3)[1] < e["high"] < wilson_interval(2, 3)[1]
    assert e["low"] == pytest.approx(1 - e["high"])  # symmetric about 1/2


def test_a_cell_too_small_says_so():
    assert share([1, 1, 1])["note"] == "too few: n = 3"
    assert "note" not in share([1, 1, 1, 0, 1])
    assert share([])["note"] == "too few: n = 0" and share([])["mean"] is None


def test_the_corrected_share_uses_the_pooled_reference_episodes():
    got = score(read_markers(LINES))
    # Pooled: success-labelled marked success 2 of 4 (w1, w2 yes; w2, w3 no); failure-labelled
    # marked failure 2 of 3. One annotator's rates correct what one annotator says: A's shares
    # of success markers are 2/3, 1/2 and 0, p = 7/18: (7/18 + 2/3 - 1) / (1/2 + 2/3 - 1)
    # = (1/18) / (1/6) = 1/3.
    assert got["reference"] == {"n_success": 4, "n_failure": 3, "sensitivity": 0.5, "specificity": pytest.approx(2 / 3)}
    c = got["agents"]["A"]["corrected"]
    assert c["mean"] == pytest.approx(1 / 3) and c["n"] == 3 and c["note"] == "too few: n = 3"
    direct = rogan_gladen_estimate(
        [2 / 3, 0.5, 0.0],
        [True, True, False, False],
        [True, False, True],
        clusters=["s1", "s1", "s2"],
        cluster_name="scenarios",
    )
    assert {k: c[k] for k in ("mean", "low", "high", "n", "method")} == direct
    assert "scenarios" in c["method"]
    # No failure-labelled reference episodes: none, with the reason.
    c = score(read_markers(_many("A", [1, 0] * 5) + [_ref("w1", "success", "success")]))["agents"]["A"]["corrected"]
    assert c["mean"] is None and "labelled failure" in c["reason"]


def test_time_to_completion_median_and_its_order_statistic_interval():
    # n = 10: P(Bin(10, 1/2) <= 1) = 0.0107 <= 2.5% < P(<= 2) = 0.0547, so x_(2) to x_(9).
    got = time_to_completion([9, 1, 8, 2, 7, 3, 6, 4, 5, 10])
    assert (got["median"], got["low"], got["high"], got["n"]) == (5.5, 2, 9, 10)
    # n = 5: even (x_(1), x_(5)) covers only 1 - 2/32 = 93.75%: no interval.
    few = time_to_completion([1, 2, 3, 4, 5])
    assert (few["median"], few["low"], few["high"]) == (3, None, None) and "n = 5" in few["note"]
    assert time_to_completion([1, 2, 3, 4, 5, 6])["low"] == 1  # 1 - 2/64 = 96.9%


def test_a_mining_rule_tag_counts_only_where_the_takeover_still_matches():
    from app.kinds.sts.mining import UNKNOWN, tags_now

    assert tags_now(["rule:first step", "small"], 0) == ["rule:first step", "small"]
    assert tags_now(["rule:first step", "small"], 2) == ["small"]  # moved from step 0 to 2
    assert tags_now(["rule:mission given"], 1) == []
    assert tags_now(["rule:before success"], 3, 5) == ["rule:before success"]  # k = 2
    assert tags_now(["rule:before success"], 5, 5) == []  # at the success: no k >= 1
    assert tags_now(["rule:before success"], 3, None) == []  # the recording never succeeds
    assert tags_now(["rule:before success"], 9, UNKNOWN) == ["rule:before success"]  # cannot tell
    assert tags_now(["rule:first step"], None) == ["rule:first step"]  # no takeover known


def test_the_command_prints_intervals_corrected_shares_and_time_to_completion(tmp_path):
    from click.testing import CliRunner

    from app.kinds.sts.cli import sts

    path = tmp_path / "a.jsonl"
    path.write_text(
        "\n".join(
            _many("A", [1] * 6 + [0] * 4, scenarios=5)
            + _many("B", [1, 1, 1])
            + [_ref("w1", "success", "success"), _ref("w1", "failure", "failure")]
        )
    )
    out = CliRunner().invoke(sts, ["score", "--annotations", str(path), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    a = got["agents"]["A"]
    # Two continuations per scenario (s0: 1, 1; s1-s4: 1, 0): the scenario is the unit. Cluster
    # totals 2, 1, 1, 1, 1 about 0.6 x 2: squares 0.8^2 + 4 x 0.2^2 = 0.8, variance of the mean
    # 5/4 x 0.8 / 10^2 = 0.01, n_eff = 0.6 x 0.4 / 0.01 = 24, Wilson at 24 with t(4) = 2.776.
    from app.leaderboards.stats import _wilson_real

    low, high = _wilson_real(0.6, 24.0, 2.7764451051977934)
    assert (a["success"], a["n"]) == (0.6, 10) and (a["low"], a["high"]) == pytest.approx((low, high))
    assert a["method"] == "Wilson (effective n, clusters)"
    assert a["corrected"]["mean"] == 0.6 and set(a["corrected"]) == {"mean", "low", "high", "n", "method"}
    assert a["ttc"]["steps"] == [3, 4, 5, 6, 7, 8] and a["ttc_median"] == 5.5
    table = CliRunner().invoke(sts, ["score", "--annotations", str(path)]).output
    assert "95% interval" in table and "corrected" in table and "ttc median" in table
    assert f"[{low:.1%}, {high:.1%}]" in table and "too few: n = 3" in table


def test_the_correction_is_unbiased_with_three_markers_per_continuation():
    """Three annotators per continuation, each right with probability 0.8 either way; 20% of
    2,000 continuations truly succeed. The majority of three errs less than one annotator
    (0.896 right), so correcting the majority's share by one annotator's rates over-corrects
    (about 0.12, an interval that leaves out 0.2); the share of success markers is what one
    annotator says: 0.2 x 0.8 + 0.8 x 0.2 = 0.32 observed, corrected back to about 0.2."""
    import random

    rng = random.Random(4)
    lines = []
    for c in range(2000):
        truth = rng.random() < 0.2
        for w in ("w1", "w2", "w3"):
            said = truth if rng.random() < 0.8 else not truth
            lines.append(_line(w, "A", f"s{c % 200}", c, "success" if said else "failure", 3))
    for i in range(2000):
        label = "success" if i % 2 else "failure"
        right = rng.random() < 0.8
        lines.append(_ref(f"w{i % 3 + 1}", label if right else ("failure" if label == "success" else "success"), label))
    a = score(read_markers(lines))["agents"]["A"]
    c = a["corrected"]
    assert c["low"] <= 0.2 <= c["high"] and abs(c["mean"] - 0.2) < 0.04, c
    # What the majority's share corrected by one annotator's rates would say: well below 0.2.
    from app.leaderboards.correction import rogan_gladen

    ref = score(read_markers(lines))["reference"]
    assert rogan_gladen(a["success"], ref["sensitivity"], ref["specificity"]) < 0.16
