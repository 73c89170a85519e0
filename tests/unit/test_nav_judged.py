"""Offline, people and a listener ensemble together (issue 28.4): `proctor navigation judged`
gives per speaker PPI++ from people's follows of a sample of the instructions and the
ensemble's success rate on every one, the same numbers as stats.ppi_mean on the files."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from app.kinds.navigation.cli import navigation
from app.leaderboards import stats


def _write(path, rows) -> str:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def test_people_and_a_listener_ensemble_per_speaker(tmp_path):
    rng = random.Random(8)
    judge, people = {}, {}
    for speaker in ("greedy", "sampled"):
        for k in range(60):
            # The ensemble's share of 4 rollouts reaching the goal; people succeed more often
            # where it does, following a random 30 of the 60 instructions.
            rate = rng.randint(0, 4) / 4
            judge[(speaker, f"i{k}")] = rate
        for k in rng.sample(range(60), 30):
            people[(speaker, f"i{k}")] = rng.random() < 0.2 + 0.6 * judge[(speaker, f"i{k}")]
    judge_file = _write(
        tmp_path / "judge.jsonl", [{"speaker": s, "instruction": i, "success": v} for (s, i), v in judge.items()]
    )
    people_file = _write(
        tmp_path / "people.jsonl", [{"speaker": s, "instruction": i, "success": v} for (s, i), v in people.items()]
    )
    out = CliRunner().invoke(navigation, ["judged", "--people", people_file, "--judge", judge_file, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert list(doc) == ["greedy", "sampled"]
    for speaker, got in doc.items():
        seen = [i for (s, i) in people if s == speaker]
        rest = [v for (s, i), v in judge.items() if s == speaker and i not in seen]
        want = stats.ppi_mean(
            [float(people[(speaker, i)]) for i in seen], [judge[(speaker, i)] for i in seen], rest, unit="instruction"
        )
        assert got["ppi"]["n_human"] == 30 and got["ppi"]["n_judge"] == 30
        assert (got["ppi"]["mean"], got["ppi"]["low"], got["ppi"]["high"]) == pytest.approx(
            (want["mean"], want["low"], want["high"])
        )
        assert got["ppi"]["effective_n"] == pytest.approx(want["effective_n"])
        assert got["judge"] == pytest.approx(sum(v for (s, _), v in judge.items() if s == speaker) / 60)
        assert got["judge_agreement"]["n"] == 30 and got["plan"]["of"] == 60
    table = CliRunner().invoke(navigation, ["judged", "--people", people_file, "--judge", judge_file])
    assert table.exit_code == 0 and "greedy" in table.output and "PPI++" in table.output


def test_what_ppi_cannot_use_is_refused_with_its_line(tmp_path):
    judge = _write(tmp_path / "judge.jsonl", [{"speaker": "a", "instruction": 1, "success": 0.5}])
    people = _write(tmp_path / "people.jsonl", [{"speaker": "a", "instruction": 2, "success": True}])
    out = CliRunner().invoke(navigation, ["judged", "--people", people, "--judge", judge])
    assert out.exit_code != 0 and "the judge has no value for a's instruction 2" in out.output
    bad = _write(tmp_path / "bad.jsonl", [{"speaker": "a", "instruction": 1, "success": 1.5}])
    out = CliRunner().invoke(navigation, ["judged", "--people", people, "--judge", bad])
    assert out.exit_code != 0 and "line 1" in out.output and "success must be" in out.output


def test_a_speaker_people_never_followed_has_the_judges_figures_and_no_plan(tmp_path):
    """The ensemble judged speaker b's instructions, people followed none of them: b's row shows
    the ensemble's 0.500 and says why there is no PPI++ and no plan (nothing of people's to plan
    from), where a's row, followed 12 times, has both."""
    judge = _write(
        tmp_path / "judge.jsonl",
        [{"speaker": s, "instruction": k, "success": (k % 4) / 4} for s in ("a", "b") for k in range(20)],
    )
    people = _write(
        tmp_path / "people.jsonl", [{"speaker": "a", "instruction": k, "success": k % 3 == 0} for k in range(12)]
    )
    out = CliRunner().invoke(navigation, ["judged", "--people", people, "--judge", judge, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["b"]["judge"] == pytest.approx(0.375) and doc["b"]["judge_agreement"] is None
    assert doc["b"]["plan"] == {"reason": "no instruction judged by people"}
    assert doc["b"]["ppi"]["n_human"] == 0 and doc["b"]["ppi"]["low"] is None
    assert doc["a"]["plan"]["of"] == 20 and doc["a"]["ppi"]["n_human"] == 12
    table = CliRunner().invoke(navigation, ["judged", "--people", people, "--judge", judge])
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    row = next(line.split() for line in lines if line.startswith("b "))
    # judge, agreement, PPI++, interval, people, judge only, worth, plan
    assert row[1:] == ["0.375", "-", "-", "-", "0", "20", "-", "-"], lines
