"""The Hexagons core: the board's layout decided by the released executions, the metrics (set
reference against the vectorised one on every released step), the importers' refusals, and
`proctor hex score` / `stats` on the real files. Real-data tests skip without ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from app.errors import InputError
from app.kinds.hexagons import metrics
from app.kinds.hexagons.board import neighbours, tile
from app.kinds.hexagons.cli import hexagons as hex_cli
from app.kinds.hexagons.formats import parse_predictions, parse_procedures
from app.kinds.hexagons.score import no_action, score_predictions

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hexagons"
real = pytest.mark.skipif(not (DATA / "test.jsonl").exists(), reason=f"Hexagons data not found under {DATA}")


@pytest.fixture(scope="module")
def procs():
    return {s: parse_procedures((DATA / f"{s}.jsonl").read_bytes()) for s in ("train", "dev", "test")}


def _step(procs, index, position):
    p = next(p for ps in procs.values() for p in ps if p.index == index)
    b = p.boards
    return {t for t in range(180) if b[position - 1][t] != b[position][t]}, b[position - 1]


def test_neighbours_of_even_and_odd_columns():
    # Column 8 (even) touches the row above at its sides; column 1 (odd, lowered) the row below.
    assert sorted(neighbours(tile(4, 8))) == [61, 62, 63, 79, 81, 98]
    assert sorted(neighbours(tile(1, 1))) == [1, 18, 20, 36, 37, 38]
    assert sorted(neighbours(0)) == [1, 18]
    assert all(t in neighbours(u) for t in range(180) for u in neighbours(t))


@real
@pytest.mark.parametrize("index,position,centre", [("10", 2, 80), ("24", 1, 19), ("34", 1, 81)])
def test_rings_around_a_tile_are_its_neighbours_with_odd_columns_lowered(procs, index, position, centre):
    changed, _ = _step(procs, index, position)
    assert changed == set(neighbours(centre, "odd"))
    assert not any(changed == set(neighbours(t, "even")) for t in range(180))


@real
def test_lower_right_and_diagonal_steps_are_neighbours_only_with_odd_columns_lowered(procs):
    # 319/3 "the hex to the lower-right of the right-most yellow hex" (59) paints 78;
    # 549/3 "to the right and slightly down from the bottom purple tile" (37) paints 56.
    for index, position, source, painted in (("319", 3, 59, 78), ("549", 3, 37, 56), ("549", 4, 56, 39)):
        changed, before = _step(procs, index, position)
        assert changed == {painted} and (before[source] != 0 or position == 4)
        assert painted in neighbours(source, "odd") and painted not in neighbours(source, "even")


@real
def test_steps_and_procedures_match_the_paper(procs):
    assert [len(procs[s]) for s in procs] == [496, 62, 62]
    assert [sum(len(p.steps) for p in procs[s]) for s in procs] == [3278, 446, 453]
    assert sorted(p.index for p in procs["train"] if not p.tagged) == ["617", "618", "619"]


def test_metrics_by_hand():
    blank = [0] * 180
    gold = blank.copy()
    gold[0] = 2
    gold[1] = 3
    hyp = blank.copy()
    hyp[0] = 2
    hyp[5] = 4
    m = metrics.step_metrics(blank, gold, blank, hyp)
    assert (m["board_precision"], m["board_recall"], m["board_f1"], m["board_em"]) == (0.5, 0.5, 0.5, 0.0)
    # Nothing to paint and nothing painted: 1 everywhere; painting white is an action.
    assert set(metrics.step_metrics(gold, gold, gold, gold).values()) == {1.0}
    white = gold.copy()
    white[0] = 0
    m = metrics.step_metrics(gold, gold, gold, white)
    assert (m["action_precision"], m["action_recall"], m["action_f1"], m["action_em"]) == (0.0, 0.0, 0.0, 0.0)
    assert metrics.agreement_tag(gold, gold, hyp) == "V1" and metrics.agreement_tag(gold, hyp, hyp) == "VV"
    assert metrics.agreement_tag(gold, hyp, blank) == "F" and metrics.agreement_scores(gold, gold, hyp) == (
        1.0,
        0.5,
        0.5,
    )


@real
def test_vectorised_metrics_equal_the_reference_on_every_step(procs):
    rows = []
    rng = np.random.default_rng(0)
    for p in (p for ps in procs.values() for p in ps):
        b = p.boards
        for k in range(1, len(b)):
            # Hypotheses: the next step's board, the board two steps on, and random noise.
            hyp = list(b[min(k + 1, len(b) - 1)])
            hyp[int(rng.integers(180))] = int(rng.integers(8))
            rows.append((b[k - 1], b[k], b[k - 1], hyp))
    assert len(rows) == 4177
    fast = metrics.score_arrays(*(metrics.as_array(r[i] for r in rows) for i in range(4)))
    for i, r in enumerate(rows):
        assert {k: float(fast[k][i]) for k in metrics.KEYS} == metrics.step_metrics(*r)


def _preds(procs, split, board=lambda p, k: p.boards[k]):
    return "".join(
        json.dumps({"index": p.index, "step": k, "board": list(board(p, k))}) + "\n"
        for p in procs[split]
        for k in range(1, len(p.boards))
    ).encode()


@real
def test_gold_against_gold_scores_one_on_every_step(procs):
    every = [p for ps in procs.values() for p in ps]
    preds = parse_predictions("".join(_preds(procs, s).decode() for s in procs), {p.index: len(p.steps) for p in every})
    r = score_predictions(every, preds)
    assert r["n"] == 4177 and set(r["mean"].values()) == {1.0}
    assert all(set(v.values()) == {1.0} for v in r["per_step"].values())


@real
def test_no_action_baseline(procs):
    r = no_action(procs["test"])
    assert r["n"] == 453
    # Action sets: the hypothesis paints nothing, so only steps with nothing to paint score 1.
    quiet = sum(p.boards[k] == p.boards[k - 1] for p in procs["test"] for k in range(1, len(p.boards)))
    assert r["mean"]["action_em"] == pytest.approx(quiet / 453)
    assert r["mean"]["action_f1"] == r["mean"]["action_em"]
    print({k: round(v, 4) for k, v in r["mean"].items()})


@real
def test_the_cli_scores_the_test_split(procs, tmp_path):
    pred = tmp_path / "pred.jsonl"
    pred.write_bytes(_preds(procs, "test", lambda p, k: p.boards[k - 1]))
    out = CliRunner().invoke(
        hex_cli, ["score", "--gold", str(DATA / "test.jsonl"), "--predictions", str(pred), "--json"]
    )
    assert out.exit_code == 0, out.output
    r = json.loads(out.output)
    assert len(r["per_step"]) == 453 and set(r["mean"]) == set(metrics.KEYS)
    assert r["mean"] == no_action(procs["test"])["mean"]
    # Each metric's interval is the leaderboard's: the core's mean_interval over the steps with
    # the procedure as the unit (its steps share one drawing), never a plain mean.
    from app.leaderboards.stats import mean_interval

    procs_of = [key.rsplit("_", 1)[0] for key in r["per_step"]]  # step keys: "<index>_<step>"
    board_f1 = mean_interval([v["board_f1"] for v in r["per_step"].values()], clusters=procs_of).as_dict()
    assert r["estimates"]["board_f1"] == pytest.approx(board_f1)
    assert r["estimates"]["board_f1"]["method"] == "Wilson (effective n, clusters)"
    assert r["estimates"]["board_f1"]["low"] < r["mean"]["board_f1"] < r["estimates"]["board_f1"]["high"]
    table = CliRunner().invoke(hex_cli, ["score", "--gold", str(DATA / "test.jsonl"), "--predictions", str(pred)])
    assert table.exit_code == 0 and "step position" in table.output and "95% intervals" in table.output
    stats = CliRunner().invoke(hex_cli, ["stats", "--data", str(DATA), "--json"])
    s = json.loads(stats.output)["splits"]
    assert (s["train"]["agreed_steps_pct"], s["dev"]["agreed_steps_pct"], s["test"]["agreed_steps_pct"]) == (
        87.19,
        85.43,
        83.22,
    )
    assert (s["dev"]["agreed_procedures"], s["test"]["agreed_procedures"], s["train"]["agreed_procedures"]) == (
        49,
        43,
        394,
    )


LINE = {
    "index": 7,
    "annotation_round": 1,
    "category": "simple",
    "image_id": "P01",
    "instructor_id": 2,
    "number_of_drawing_steps": 1,
    "agreement_tags": ["A"],
    "agreement_scores": [[1.0, 1.0, 1.0]],
    "drawing_procedure": [[0, "NONE", [0] * 180], [1, "paint tile 0 red", [4] + [0] * 179]],
}


@pytest.mark.parametrize(
    "change,line,field",
    [
        (lambda o: o.pop("category"), 2, "category"),
        (lambda o: o["drawing_procedure"][1].__setitem__(2, [0] * 179), 2, "drawing_procedure.1.board"),
        (lambda o: o["drawing_procedure"][1][2].__setitem__(3, 8), 2, "drawing_procedure.1.board"),
        (lambda o: o.__setitem__("agreement_tags", ["B"]), 2, "agreement_tags.0"),
        (lambda o: o.__setitem__("number_of_drawing_steps", 2), 2, "number_of_drawing_steps"),
    ],
)
def test_bad_procedures_are_refused_naming_line_and_field(change, line, field):
    bad = json.loads(json.dumps(LINE))
    change(bad)
    with pytest.raises(InputError) as exc:
        parse_procedures((json.dumps({**LINE, "index": 6}) + "\n" + json.dumps(bad)).encode())
    assert (exc.value.line, exc.value.field) == (line, field)
    with pytest.raises(InputError) as exc:
        parse_procedures(b"{not json")
    assert exc.value.line == 1
    p = parse_procedures(json.dumps(LINE).encode())[0]
    assert (p.index, p.instructor_id, p.annotation_round, p.steps[0].tag) == ("7", "2", "1", "A")


@pytest.mark.parametrize(
    "pred,field",
    [
        ({"index": 8, "step": 1, "board": [0] * 180}, "index"),
        ({"index": 7, "step": 2, "board": [0] * 180}, "step"),
        ({"index": 7, "step": 1, "board": [0] * 181}, "board"),
        ({"index": 7, "step": 1, "board": [9] + [0] * 179}, "board"),
    ],
)
def test_bad_predictions_are_refused(pred, field):
    with pytest.raises(InputError) as exc:
        parse_predictions(json.dumps(pred).encode(), {"7": 1})
    assert (exc.value.line, exc.value.field) == (1, field)
    twice = (json.dumps({"index": "7", "step": 1, "board": [0] * 180}) + "\n") * 2
    with pytest.raises(InputError) as exc:
        parse_predictions(twice.encode(), {"7": 1})
    assert (exc.value.line, exc.value.field) == (2, "step")


@real
def test_flowers_are_rings_of_neighbours_with_odd_columns_lowered(procs):
    # docs/kinds/hexagons.md: a tile whose six neighbours are painted one other colour, over
    # every released board after a step: 2,203 with odd columns lowered, 107 with even.
    def flowers(shifted):
        rings = {t: neighbours(t, shifted) for t in range(180) if len(neighbours(t, shifted)) == 6}
        n = 0
        for s in (s for ps in procs.values() for p in ps for s in p.steps):
            for t, ring in rings.items():
                colours = {s.board[u] for u in ring}
                n += len(colours) == 1 and 0 not in colours and s.board[t] not in colours
        return n

    assert (flowers("odd"), flowers("even")) == (2203, 107)


@real
def test_the_statistics_the_docs_claim(procs):
    """The figures in docs/kinds/hexagons.md's statistics section, beside the paper's."""
    from app.kinds.hexagons.stats import dataset_stats

    s = dataset_stats(procs)
    splits = s["splits"]
    assert [
        (splits[k]["agreed_procedures"], splits[k]["agreed_procedures_pct"], splits[k]["agreed_steps_pct"])
        for k in ("train", "dev", "test", "total")
    ] == [(394, 79.92, 87.19), (49, 79.03, 85.43), (43, 69.35, 83.22), (486, 78.77, 86.57)]
    assert splits["total"]["tags"] == {"A": 2395, "V1": 661, "V2": 514, "VV": 73, "F": 481}
    assert splits["total"]["all_A_procedures"] == 195
    # Images: 180 ids; the five redrawn ones (an "a" after a base id, procedures 492-496)
    # counted as their base give the paper's 175 and 17/101/63 per round.
    assert (s["images"], s["base_images"], s["redrawn"]) == (180, 175, ["492", "493", "494", "495", "496"])
    assert [
        (r["steps"], r["procedures"], r["unique_images"], r["base_images"], r["tokens"]) for r in s["rounds"].values()
    ] == [(1045, 123, 17, 17, 18576), (1909, 304, 102, 101, 37496), (1223, 193, 67, 63, 31779)]
    # Every released tag is the one its score triple implies.
    assert (s["tag_consistency"]["steps"], s["tag_consistency"]["inconsistent"]) == (4124, 0)
    assert s["agreed_definitions"]["train"] == {
        "last": 394,
        "last_A": 227,
        "last_not_F": 403,
        "last_changing_step": 393,
        "every_step": 355,
        "no_F": 369,
        "last_without_redrawn": 390,
        "tagged": 493,
    }
    assert s["verifiers"] == {
        "steps": 4124,
        "f1": {"mean": 91.1, "max": 96.36, "min": 85.83},
        "em": {"mean": 72.32, "max": 86.57, "min": 58.07},
    }


def test_tags_against_their_scores():
    from app.kinds.hexagons.formats import Step
    from app.kinds.hexagons.stats import base_image, tag_consistency, tag_from_scores

    assert [tag_from_scores(t) for t in ((1, 1, 1), (1, 0.4, 0.4), (0.3, 1, 0.3), (0.5, 0.5, 1), (0.5, 0.2, 0.4))] == [
        "A",
        "V1",
        "V2",
        "VV",
        "F",
    ]
    board = tuple([0] * 180)
    steps = (
        Step(1, "x", board, "A", (1.0, 1.0, 1.0)),
        Step(2, "x", board, "A", (1.0, 0.5, 0.5)),
        Step(3, "x", board, "V1", (1.0, 0.5, 0.6)),
        Step(4, "x", board, None, None),
    )
    from app.kinds.hexagons.formats import Procedure

    c = tag_consistency([Procedure("9", "1", "simple", "P1", "2", board, steps)])
    assert (c["steps"], c["inconsistent"]) == (3, 2)
    assert c["by_tag"]["A"]["examples"] == ["9/2"] and c["by_tag"]["V1"]["examples"] == ["9/3"]
    assert (base_image("P01C03T07a"), base_image("P01C03T07"), base_image("Pa")) == ("P01C03T07", "P01C03T07", "Pa")
