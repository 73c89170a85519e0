"""The paper's rule-based executor (app/kinds/hexagons/rule_executor.py): hand-written
instructions in the coordinate forms the released data use, their exact actions and scores,
and `proctor hex rule-baseline` on a slice of the released test split (skipped, with the reason
shown, without ../shared/data/hexagons)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.kinds.hexagons import rule_executor as rule
from app.kinds.hexagons.cli import hexagons as hex_cli
from app.kinds.hexagons.formats import parse_procedures

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hexagons"
BLUE, GREEN, RED, YELLOW, ORANGE = 5, 3, 4, 2, 7

CASES = [
    # The paper's own example: Paint((2, 1), blue).
    ("In the first column, color the 2nd tile blue", [(2, 1, BLUE)]),
    # Released forms (test 6/1, dev 16/1, dev 17/1, dev 47/3, dev 55/1, dev 55/7).
    (
        "using only blue for the whole drawing, paint the 2nd through 4th tiles in the 1st and 5th columns",
        [(2, 1, BLUE), (2, 5, BLUE), (3, 1, BLUE), (3, 5, BLUE), (4, 1, BLUE), (4, 5, BLUE)],
    ),
    ("In columns, #6 and #12 paint the fifth tile down yellow.", [(5, 6, YELLOW), (5, 12, YELLOW)]),
    ("With yellow, paint the cell at the 9th column from the left and 4th row from he top.", [(4, 9, YELLOW)]),
    (
        "In column 2 color tiles 1 and 2 blue, tiles 4 and 5 purple and tiles 7 and 8 yellow.",
        [(1, 2, BLUE), (2, 2, BLUE), (4, 2, 6), (5, 2, 6), (7, 2, YELLOW), (8, 2, YELLOW)],
    ),
    ("In the 7th column from the left, color the 5th tile from the bottom RED. ", [(6, 7, RED)]),
    (
        "In the 10th column from the left, color the topmost tile GREEN and the bottom-most tile BLUE.",
        [(1, 10, GREEN), (10, 10, BLUE)],
    ),
    # Rows and columns named as such, a tile counted along a row, columns from the right.
    ("row 3, column 5: red", [(3, 5, RED)]),
    ("paint the 4th tile in the 2nd row green", [(2, 4, GREEN)]),
    (
        "In the second column from the right, paint tiles four through seven from the top in orange",
        [(4, 17, ORANGE), (5, 17, ORANGE), (6, 17, ORANGE), (7, 17, ORANGE)],
    ),
    ("On ninth row from left go to the fifth tile from the top, color it black.", [(5, 9, 1)]),
    # The columns carry over to the next sentence of the instruction.
    ("In column 3 paint the 1st tile red. Next paint the 4th tile green.", [(1, 3, RED), (4, 3, GREEN)]),
    # No colour in the instruction, no position, or a colour named only in an earlier step: nothing.
    ("paint the 1st and 4th tiles in columns 2 and 4", []),
    ("Make a blue dog bone shape", []),
    ("Connect these 2 tiles with a straight green line.", []),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_positions_of_hand_written_instructions(text, expected):
    assert rule.positions(text) == expected
    assert rule.actions(text) == [((r - 1) * 18 + c - 1, colour) for r, c, colour in expected]


def test_example_patterns_read_one_action_a_sentence():
    text = "In column 2 color tiles 1 and 2 blue, tiles 4 and 5 purple. In the first column, color the 2nd tile blue"
    assert rule.positions(text, "example") == [(1, 2, BLUE), (2, 1, BLUE)]
    with pytest.raises(ValueError):
        rule.positions(text, "most")


def test_execute_paints_in_order_on_the_board():
    board = [0] * 180
    board[18] = RED
    after = rule.execute("In the first column, color the 2nd tile blue and the 2nd tile green", board)
    assert after[18] == GREEN and sum(1 for c in after if c) == 1 and board[18] == RED


def _procedure(index: int, steps: list[tuple[str, dict[int, int]]]) -> str:
    boards, board = [[0] * 180], [0] * 180
    for _, paint in steps:
        board = list(board)
        for t, c in paint.items():
            board[t] = c
        boards.append(board)
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple",
            "image_id": f"P{index}",
            "instructor_id": 1,
            "number_of_drawing_steps": len(steps),
            "agreement_tags": ["A"] * len(steps),
            "agreement_scores": [[1, 1, 1]] * len(steps),
            "drawing_procedure": [[0, "NONE", boards[0]]]
            + [[k + 1, text, boards[k + 1]] for k, (text, _) in enumerate(steps)],
        }
    )


def test_action_f1_and_em_of_a_small_procedure():
    """Step 1 exact (F1 1, EM 1); step 2 paints 2 of the 3 gold tiles (P 1, R 2/3, F1 0.8);
    step 3 is a shape, nothing painted (F1 0); the means are over steps."""
    line = _procedure(
        1,
        [
            ("In the first column, color the 2nd tile blue", {18: BLUE}),
            ("paint the 1st and 4th tiles in column 3 red", {2: RED, 56: RED, 74: RED}),
            ("Make a green flower around it", {19: GREEN, 20: GREEN}),
        ],
    )
    [proc] = parse_procedures(line.encode())
    result = rule.evaluate([proc])
    steps = [result["per_step"][f"1_{k}"] for k in (1, 2, 3)]
    assert [s["action_f1"] for s in steps] == pytest.approx([1.0, 0.8, 0.0])
    assert [s["action_em"] for s in steps] == [1.0, 0.0, 0.0]
    assert [s["action_precision"] for s in steps] == [1.0, 1.0, 0.0]
    assert result["mean"]["action_f1"] == pytest.approx(0.6)
    assert result["mean"]["action_em"] == pytest.approx(1 / 3)
    # On its own board the executor's step 3 starts without the gold's third red tile.
    own = rule.evaluate([proc], on="own")
    assert own["mean"]["action_f1"] == pytest.approx(0.6) and own["per_step"]["1_3"]["board_f1"] < 1


def test_the_command_refuses_bad_input_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_procedure(1, [("tile 1 red", {0: RED})]) + "\n" + '{"index": 2}\n')
    out = CliRunner().invoke(hex_cli, ["rule-baseline", "--data", str(bad)])
    assert out.exit_code == 1 and f"{bad}: line 2" in out.output
    out = CliRunner().invoke(hex_cli, ["rule-baseline", "--data", str(tmp_path), "--split", "dev"])
    assert out.exit_code == 1 and "dev.jsonl" in out.output


@pytest.mark.skipif(not (DATA / "test.jsonl").exists(), reason=f"Hexagons data not found under {DATA}")
def test_the_command_on_a_slice_of_the_released_test_split(tmp_path):
    lines = (DATA / "test.jsonl").read_text("utf-8").splitlines()[:6]
    part = tmp_path / "test.jsonl"
    part.write_text("\n".join(lines) + "\n")
    n_steps = sum(json.loads(x)["number_of_drawing_steps"] for x in lines)
    out = CliRunner().invoke(hex_cli, ["rule-baseline", "--data", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert (got["procedures"], got["steps"]) == (6, n_steps)
    assert set(got["rule_based"]) == set(rule.PATTERNS)
    assert got["paper"]["action_f1"] == pytest.approx(0.1315) and got["paper"]["action_em"] == pytest.approx(0.0596)
    for means in got["rule_based"].values():
        assert 0 <= means["action_em"] <= means["action_f1"] <= 1
    table = CliRunner().invoke(hex_cli, ["rule-baseline", "--data", str(part)])
    assert table.exit_code == 0
    rows = {line[:44].strip(): line[44:].split() for line in table.stdout.splitlines() if line[:44].strip()}
    assert rows["paper, Table 7 (test)"][:2] == ["13.15", "5.96"]
    assert float(rows["rule-based, all patterns"][0]) == pytest.approx(
        100 * got["rule_based"]["all"]["action_f1"], abs=0.006
    )
