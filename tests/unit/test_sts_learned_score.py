"""`proctor sts score --learned-judge F.jsonl` (issue 28.1 offline): per agent a success
predictor learned from people's outcomes on each continuation's features, cross-fitted; its
agreement with held-out people and the cross-prediction-powered share, the numbers
stats.crossppi_mean and a Wilson interval give by hand; a features file refused by line and
field."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from statsmodels.stats.proportion import proportion_confint

from app.kinds.sts.cli import sts
from app.leaderboards import stats
from tests.unit.test_sts_judge import _files


def _features(tmp_path, x: dict[int, list[float]]):
    f = tmp_path / "f.jsonl"
    f.write_text(
        "".join(
            json.dumps({"agent": "A", "scenario": f"s{k % 4}", "continuation": str(k), "features": v}) + "\n"
            for k, v in x.items()
        )
    )
    return f


def test_the_learned_share_and_its_agreement(tmp_path):
    # People marked continuations 0-23; a feature that mostly tells success (k % 3 != 0) from
    # failure, and 36 more continuations people did not mark.
    people = {k: k % 3 != 0 for k in range(24)}
    x = {k: [1.0 if k % 3 != 0 else 0.0, float(k % 5)] for k in range(60)}
    x[4] = [0.0, 4.0]  # one continuation the feature gets wrong
    ann, _ = _files(tmp_path, people, {})
    f = _features(tmp_path, x)
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--learned-judge", str(f), "--json"])
    assert out.exit_code == 0, out.output
    a = json.loads(out.output)["agents"]["A"]
    y = [float(people[k]) for k in range(24)]
    want = stats.crossppi_mean([x[k] for k in range(24)], y, [x[k] for k in range(24, 60)], unit="continuation")
    assert a["learned"]["mean"] == pytest.approx(want["mean"]) and a["learned"]["low"] == pytest.approx(want["low"])
    assert a["learned"]["high"] == pytest.approx(want["high"])
    assert (a["learned"]["n_human"], a["learned"]["n_judge"]) == (24, 36)
    hits = sum((p >= 0.5) == (h > 0.5) for h, p in zip(y, want["predictions"]))
    assert a["learned_agreement"]["mean"] == pytest.approx(hits / 24) and a["learned_agreement"]["n"] == 24
    low, high = proportion_confint(hits, 24, alpha=0.05, method="wilson")
    assert (a["learned_agreement"]["low"], a["learned_agreement"]["high"]) == pytest.approx((low, high))
    assert 20 <= hits < 24  # the wrong continuation is missed by a model not trained on it
    table = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--learned-judge", str(f)]).output
    assert "cross-PPI" in table and "learned agrees" in table


@pytest.mark.parametrize(
    "line, field",
    [
        ({"agent": "A", "scenario": "s0", "continuation": "0", "features": "x"}, "features"),
        ({"agent": "A", "scenario": "s0", "continuation": "0", "features": [1.0, True]}, "features"),
        ({"agent": "A", "scenario": "s0", "continuation": "0", "features": [1.0]}, "features"),  # one number, not two
        ({"agent": "A", "scenario": "s1", "continuation": "1", "features": [1.0, 2.0]}, "continuation"),  # twice
        ({"scenario": "s0", "continuation": "9", "features": [1.0, 2.0]}, "agent"),
    ],
)
def test_a_bad_features_file_names_line_and_field(tmp_path, line, field):
    ann, _ = _files(tmp_path, {k: k % 2 == 0 for k in range(12)}, {})
    f = tmp_path / "f.jsonl"
    good = {"agent": "A", "scenario": "s1", "continuation": "1", "features": [0.0, 1.0]}
    f.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--learned-judge", str(f)])
    assert out.exit_code != 0 and "line 2" in out.output and field in out.output, out.output


def test_a_continuation_people_marked_but_the_features_lack(tmp_path):
    ann, _ = _files(tmp_path, {k: k % 2 == 0 for k in range(12)}, {})
    f = _features(tmp_path, {k: [float(k)] for k in range(11)})
    out = CliRunner().invoke(sts, ["score", "--annotations", str(ann), "--learned-judge", str(f)])
    assert out.exit_code != 0 and str(f) in out.output and "continuation '11'" in out.output, out.output
