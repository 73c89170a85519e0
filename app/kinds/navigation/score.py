"""Score R2R leaderboard predictions against R2R reference paths (the core of
`proctor navigation score --connectivity DIR --references R2R.json --predictions PRED.json [--json]`).

Each prediction's instr_id ("<path_id>_<k>") names an instruction of the references; its
trajectory is scored against that instruction's path on the path's building
(app.kinds.navigation.metrics). Buildings are loaded from the connectivity folder on first
use, with their all-pairs shortest paths computed once each. Reference instructions without a
prediction are not scored; they are listed under "unpredicted".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from app.errors import InputError
from app.kinds.navigation.formats import parse_predictions, parse_r2r, r2r_instructions
from app.kinds.navigation.graph import load_scans
from app.kinds.navigation.metrics import METRICS, mean_scores, score_trajectory

EXIT_OK = 0
EXIT_INPUT = 2

_COLUMNS = (("ne", "NE"), ("success", "SR"), ("spl", "SPL"), ("ndtw", "nDTW"), ("sdtw", "SDTW"), ("path_length", "PL"))


def score_predictions(
    connectivity_dir: str | Path, references_path: str | Path | bytes, predictions_path: str | Path | bytes
) -> dict:
    """{"per_instruction": {instr_id: {ne, success, spl, ndtw, sdtw, path_length}},
        "mean": {the same keys; success's mean is the success rate},
        "unpredicted": [reference instr_ids without a prediction]}

    InputError, naming the instruction, for an unknown instr_id, a scan without a
    connectivity file, a trajectory that does not start at the reference's start, a viewpoint
    the scan lacks, or a broken file.
    """
    graphs = load_scans(connectivity_dir)
    instructions = r2r_instructions(parse_r2r(references_path))
    predictions = parse_predictions(predictions_path)
    if not predictions:
        raise InputError("the predictions file holds no predictions", field="predictions")
    per_instruction: dict[str, dict] = {}
    for instr_id, prediction in predictions.items():
        instruction = instructions.get(instr_id)
        if instruction is None:
            raise InputError(f"instruction {instr_id}: no such instruction in the references", field="instr_id")
        ref = instruction.path
        try:
            graph = graphs[ref.scan]
        except KeyError:
            raise InputError(
                f"instruction {instr_id}: scan {ref.scan} has no connectivity file in {str(connectivity_dir)!r}",
                field="scan",
            ) from None
        try:
            per_instruction[instr_id] = score_trajectory(graph, ref.path, prediction.viewpoints)
        except InputError as e:
            raise InputError(f"instruction {instr_id}: {e.message}", field=e.field) from None
    return {
        "per_instruction": per_instruction,
        "mean": mean_scores(per_instruction.values()),
        "unpredicted": [i for i in instructions if i not in predictions],
    }


def main_text(result: dict) -> str:
    """A plain table, one row per instruction, then the means."""
    per = result["per_instruction"]
    width = max([len("instr_id"), len("mean")] + [len(k) for k in per])
    head = f"{'instr_id':<{width}}" + "".join(f"{title:>9}" for _, title in _COLUMNS)
    lines = [head, "-" * len(head)]

    def row(name: str, scores: dict, mean: bool) -> str:
        cells = []
        for key, _ in _COLUMNS:
            v = scores[key]
            if key == "success" and not mean:
                cells.append(f"{int(bool(v)):>9d}")
            else:
                cells.append(f"{float(v):>9.3f}")
        return f"{name:<{width}}" + "".join(cells)

    for instr_id, scores in per.items():
        lines.append(row(instr_id, scores, mean=False))
    lines.append("-" * len(head))
    lines.append(row("mean", result["mean"], mean=True))
    unpredicted = result.get("unpredicted") or []
    note = f"{len(per)} instructions scored"
    if unpredicted:
        shown = ", ".join(unpredicted[:5]) + (", ..." if len(unpredicted) > 5 else "")
        note += f"; {len(unpredicted)} reference instructions have no prediction ({shown})"
    lines.append(note)
    lines.append("NE and PL in metres; SR = success (NE <= 3 m); SPL, nDTW, SDTW in [0, 1].")
    return "\n".join(lines) + "\n"


def report(compute, as_text, as_json: bool, out: TextIO, err: TextIO | None = None) -> int:
    """A command's body: compute a result and print it (text, or one JSON object); exit code 0,
    or 2 with `error: <message>` on stderr when the input is bad."""
    err = err if err is not None else sys.stderr
    try:
        result = compute()
    except InputError as e:
        print(f"error: {e}", file=err)
        return EXIT_INPUT
    if as_json:
        json.dump(result, out)
        out.write("\n")
    else:
        out.write(as_text(result))
    return EXIT_OK


def run(
    connectivity: str | Path,
    references: str | Path,
    predictions: str | Path,
    as_json: bool,
    out: TextIO,
    err: TextIO | None = None,
) -> int:
    """Score and print (a table, or the JSON object)."""
    return report(lambda: score_predictions(connectivity, references, predictions), main_text, as_json, out, err)


__all__ = ["METRICS", "main_text", "run", "score_predictions"]
