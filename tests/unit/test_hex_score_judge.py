"""`proctor hexagons score --judge` (issue 28, offline): people's executions of 30 of 40
procedures in --predictions, a model executor's boards on all 40 in --judge; the JSON's
`judged` holds their board F1 agreement, PPI++ (checked against ppi-python itself) with what it
is worth, and the plan for ±0.05, over every procedure and per instructor; a judge that misses
a procedure, people's procedure executed in part and --judge with --no-action are refused with
the file, procedure and step named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from app.kinds.hexagons.cli import hexagons as hex_cli
from app.leaderboards import stats

BLANK = [0] * 180
ONE = [4] + [0] * 179
TWO = [4, 5] + [0] * 178
N = 40


def _gold(i: int) -> dict:
    return {
        "index": i,
        "annotation_round": 1,
        "category": "simple" if i % 2 else "symmetry",
        "image_id": f"P{i}",
        "instructor_id": "A7" if i % 4 < 2 else "B3",
        "number_of_drawing_steps": 2,
        "agreement_tags": ["A", "A"],
        "agreement_scores": [[1, 1, 1]] * 2,
        "drawing_procedure": [[0, "NONE", BLANK], [1, "tile 0 red", ONE], [2, "tile 1 blue", TWO]],
    }


def _person(i: int) -> tuple[list[int], list[int]]:
    """Nothing on every fourth procedure, step 2 undone on every third, else exact."""
    return (BLANK, BLANK) if i % 4 == 0 else (ONE, ONE) if i % 3 == 0 else (ONE, TWO)


def _executor(i: int) -> tuple[list[int], list[int]]:
    """Fails where people do, and on every seventh procedure besides."""
    return (BLANK, ONE) if i % 4 == 0 or i % 7 == 0 else (ONE, ONE) if i % 3 == 0 else (ONE, TWO)


def _board_f1(gold: list[int], hyp: list[int]) -> float:
    g, h = {(t, c) for t, c in enumerate(gold) if c}, {(t, c) for t, c in enumerate(hyp) if c}
    if not g and not h:
        return 1.0
    tp = len(g & h)
    return 0.0 if tp == 0 else 2 * tp / (len(g) + len(h))


def _value(boards: tuple[list[int], list[int]]) -> float:
    return (_board_f1(ONE, boards[0]) + _board_f1(TWO, boards[1])) / 2


def _write(path, lines) -> str:
    path.write_text("\n".join(json.dumps(x) for x in lines))
    return str(path)


def _files(tmp_path, people: range, judged: range) -> list[str]:
    return [
        "score",
        "--gold",
        _write(tmp_path / "gold.jsonl", [_gold(i) for i in range(1, N + 1)]),
        "--predictions",
        _write(
            tmp_path / "people.jsonl",
            [{"index": i, "step": k + 1, "board": b} for i in people for k, b in enumerate(_person(i))],
        ),
        "--judge",
        _write(
            tmp_path / "judge.jsonl",
            [{"index": i, "step": k + 1, "board": b} for i in judged for k, b in enumerate(_executor(i))],
        ),
    ]


PEOPLE = range(1, 31)


def test_people_and_a_model_executor_together(tmp_path):
    got = CliRunner().invoke(hex_cli, [*_files(tmp_path, PEOPLE, range(1, N + 1)), "--json"])
    assert got.exit_code == 0, got.output
    out = json.loads(got.output)
    assert out["mean"]["board_f1"] == pytest.approx(np.mean([_value(_person(i)) for i in PEOPLE]))
    judged = out["judged"]
    assert set(judged["by_instructor"]) == {"A7", "B3"}
    groups = {"all": (judged, range(1, N + 1))} | {
        who: (judged["by_instructor"][who], [i for i in range(1, N + 1) if (i % 4 < 2) == (who == "A7")])
        for who in ("A7", "B3")
    }
    for name, (row, ids) in groups.items():
        seen = [i for i in ids if i in PEOPLE]
        y = np.array([_value(_person(i)) for i in seen])
        yhat = np.array([_value(_executor(i)) for i in seen])
        yhat_u = np.array([_value(_executor(i)) for i in ids if i not in PEOPLE])
        assert row["judge"] == pytest.approx(np.mean([_value(_executor(i)) for i in ids]))
        assert row["judge_agreement"]["mean"] == pytest.approx(float(np.mean(1 - np.abs(y - yhat))))
        low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
        c_low, c_high = (float(v[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=0))
        p = row["ppi"]
        assert (p["n_human"], p["n_judge"]) == (len(seen), len(ids) - len(seen)), name
        assert p["mean"] == pytest.approx(float(ppi_mean_pointestimate(y, yhat, yhat_u)[0]))
        assert (p["low"], p["high"]) == pytest.approx((max(low, 0.0), min(high, 1.0)))
        assert p["effective_n"] == pytest.approx(len(y) * ((c_high - c_low) / (high - low)) ** 2)
        assert row["plan"] == stats.ppi_people_needed(y.tolist(), yhat.tolist(), len(ids), 0.05, unit="procedure")
    # The executor fails mostly where people do: worth more procedures than people executed.
    assert judged["ppi"]["effective_n"] > 30

    table = CliRunner().invoke(hex_cli, [*_files(tmp_path, PEOPLE, range(1, N + 1)), "--half-width", "0.2"])
    assert table.exit_code == 0, table.output
    assert "all procedures" in table.output and "for ±0.2" in table.output and "B3" in table.output


def test_what_the_judge_refuses(tmp_path):
    args = _files(tmp_path, PEOPLE, range(1, N))  # the judge misses procedure 40
    got = CliRunner().invoke(hex_cli, args)
    assert (
        got.exit_code == 1 and "judge.jsonl: field 'index': the judge has no prediction for procedure 40" in got.output
    )
    args = _files(tmp_path, PEOPLE, range(1, N + 1))
    people = tmp_path / "people.jsonl"
    people.write_text(people.read_text() + "\n" + json.dumps({"index": 35, "step": 1, "board": ONE}))
    got = CliRunner().invoke(hex_cli, args)
    assert got.exit_code == 1 and "people.jsonl: field 'step': procedure 35 has no prediction for step 2" in got.output
    got = CliRunner().invoke(hex_cli, ["score", "--gold", args[2], "--no-action", "--judge", args[6]])
    assert got.exit_code == 2 and "--judge goes with --predictions" in got.output
