"""The STS scorer with an automatic judge (issue 28.4): `proctor sts score --judge J.jsonl`
adds each agent's agreement between the judge and people and the PPI++ share from both; a
judge file is refused by line and field; the share covers in simulation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from app.errors import InputError
from app.kinds.sts.cli import sts
from app.kinds.sts.score import Marker, read_judge, score
from app.leaderboards import stats
from tests.conftest import untraced


def _marker(agent: str, k: int, success: bool) -> Marker:
    return Marker(
        annotator="p1",
        marker="success" if success else "failure",
        reference=False,
        agent=agent,
        scenario=f"s{k % 4}",
        continuation=str(k),
        category="go to",
        step=3.0,
    )


def _files(tmp_path, people: dict[int, bool], judge: dict[int, bool]):
    ann = tmp_path / "a.jsonl"
    ann.write_text(
        "".join(
            json.dumps(
                {
                    "annotator": "p1",
                    "agent": "A",
                    "scenario": f"s{k % 4}",
                    "continuation": str(k),
                    "category": "go to",
                    "reference": False,
                    "marker": "success" if v else "failure",
                    "step": 3,
                }
            )
            + "\n"
            for k, v in people.items()
        )
    )
    j = tmp_path / "j.jsonl"
    j.write_text(
        "".join(
            json.dumps({"agent": "A", "scenario": f"s{k % 4}", "continuation": str(k), "success": v}) + "\n"
            for k, v in judge.items()
        )
    )
    return ann, j


def test_agreement_and_ppi_per_agent_by_hand(tmp_path):
    # People saw continuations 0-11 (8 successes); the judge saw all 40 and agrees on 10 of the
    # 12 (it calls 10 and 11 successes, people failures); on 12-39 it says success for 14.
    people = {k: k < 8 for k in range(12)}
    judge = {k: k < 8 or k in (10, 11) for k in range(12)} | {k: k < 26 for k in range(12, 40)}
    ann, j = _files(tmp_path, people, judge)
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--judge", str(j), "--json"])
    assert out.exit_code == 0, out.output
    a = json.loads(out.output)["agents"]["A"]
    assert a["judge_agreement"]["mean"] == pytest.approx(10 / 12) and a["judge_agreement"]["n"] == 12
    expected = stats.ppi_mean(
        [float(people[k]) for k in range(12)],
        [float(judge[k]) for k in range(12)],
        [float(judge[k]) for k in range(12, 40)],
    )
    assert (a["ppi"]["n_human"], a["ppi"]["n_judge"]) == (12, 28)
    assert a["ppi"]["mean"] == pytest.approx(expected["mean"]) and a["ppi"]["low"] < a["ppi"]["high"]
    assert a["success"] == pytest.approx(8 / 12)  # people's own share is unchanged
    table = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--judge", str(j)]).output
    assert "PPI++" in table and "judge agrees" in table and "83.3%" in table


def test_the_scorer_plans_how_many_continuations_people_must_mark(tmp_path):
    # The same 12 marked of 40 as the pilot: the plan is the statistics core's for those 12
    # pairs over the agent's 40 continuations, and the table says "n of 40" under "for ±w".
    people = {k: k < 8 for k in range(12)}
    judge = {k: k < 8 or k in (10, 11) for k in range(12)} | {k: k < 26 for k in range(12, 40)}
    ann, j = _files(tmp_path, people, judge)
    args = ["score", "--annotations", str(ann), "--judge", str(j)]
    out = CliRunner().invoke(sts, [*args, "--half-width", "0.2", "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)["agents"]["A"]["plan"]
    expected = stats.ppi_people_needed(
        [float(people[k]) for k in range(12)], [float(judge[k]) for k in range(12)], 40, 0.2
    )
    assert plan == expected and plan["of"] == 40 and plan["half_width"] == 0.2
    assert plan["people"] < plan["people_alone"] <= 40  # the judge saves people's marks
    table = CliRunner().invoke(sts, [*args, "--half-width", "0.2"]).output
    assert "for ±0.2" in table and f"{plan['people']} of 40" in table
    # ±0.01 on 40 continuations is out of reach, even with people on all of them.
    far = json.loads(CliRunner().invoke(sts, [*args, "--half-width", "0.01", "--json"]).output)
    assert far["agents"]["A"]["plan"]["reachable"] is False
    assert "all 40 (wider)" in CliRunner().invoke(sts, [*args, "--half-width", "0.01"]).output
    refused = CliRunner().invoke(sts, [*args, "--half-width", "0"])
    assert refused.exit_code == 2 and "--half-width" in refused.output


@pytest.mark.parametrize(
    "line, field, words",
    [
        ('{"agent": "A", "scenario": "s", "continuation": "1"}', "success", "true or false"),
        ('{"agent": "A", "scenario": "s", "continuation": "1", "success": "yes"}', "success", "true or false"),
        ('{"scenario": "s", "continuation": "1", "success": true}', "agent", "missing"),
        ("[1, 2]", None, "JSON object"),
    ],
)
def test_a_bad_judge_line_names_its_line_and_field(line, field, words):
    with pytest.raises(InputError, match=words) as refused:
        read_judge(['{"agent": "A", "scenario": "s", "continuation": "0", "success": true}', line])
    assert (refused.value.line, refused.value.field) == (2, field)


def test_a_continuation_judged_twice_or_annotated_but_not_judged_is_refused(tmp_path):
    twice = '{"agent": "A", "scenario": "s", "continuation": "0", "success": true}'
    with pytest.raises(InputError, match="line 1 already"):
        read_judge([twice, twice])
    ann, j = _files(tmp_path, {0: True, 1: False}, {0: True})
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--judge", str(j)])
    assert out.exit_code != 0 and "no verdict on agent 'A', scenario 's1', continuation '1'" in out.output
    assert str(j) in out.output  # the judge's file lacks it, so that file is named
    j.write_bytes(b"\xff\xfe{}")
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--judge", str(j)])
    assert out.exit_code == 1 and "not UTF-8" in out.output and "Traceback" not in out.output
    j.write_text("\n\n")
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--judge", str(j)])
    assert out.exit_code != 0 and "holds no verdicts" in out.output and str(j) in out.output


def test_the_scorers_ppi_share_covers_in_simulation():
    # 1,650 continuations of one agent (success 40%); people mark a random 150 of them (their
    # outcome is the truth), a judge right 85% of the time marks all. 600 studies (94.3% here).
    rng = np.random.default_rng(5)
    covered, n, big_n = 0, 150, 1500
    with untraced():
        for _ in range(600):
            truth = rng.uniform(size=n + big_n) < 0.4
            verdict = np.where(rng.uniform(size=n + big_n) < 0.85, truth, ~truth)
            markers = [_marker("A", k, bool(truth[k])) for k in range(n)]
            judge = {("A", f"s{k % 4}", str(k)): float(verdict[k]) for k in range(n + big_n)}
            ppi = score(markers, judge=judge)["agents"]["A"]["ppi"]
            covered += ppi["low"] <= 0.4 <= ppi["high"]
    assert 0.93 <= covered / 600 <= 0.97, covered / 600
