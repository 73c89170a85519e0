"""`proctor pairwise score` as a user runs it: the installed command on a judgements file
(issue 30.5), its JSON and table, and its refusals (a bad line named, a file over the cap)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from app.leaderboards.pairwise import read_judgements, score

ROOT = Path(__file__).resolve().parents[2]
PROCTOR = Path(sys.executable).parent / "proctor"  # the installed command, as a user runs it


def proctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PROCTOR), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def write(path: Path, rows: list[dict[str, object] | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def study() -> list[dict[str, object] | str]:
    """Three agents on 8 scenarios, every pair once each: the strong one wins most, with ties."""
    outcomes = {("strong", "middle"): "aababtaa", ("middle", "weak"): "abaatbaa", ("strong", "weak"): "aaatabaa"}
    rows: list[dict[str, object] | str] = []
    for (a, b), results in outcomes.items():
        for i, w in enumerate(results):
            winner = {"a": "a", "b": "b", "t": "tie"}[w]
            rows.append({"judge": f"p{i % 2}", "item": f"scenario-{i}", "a": a, "b": b, "winner": winner})
    return rows


def test_the_json_gives_each_agent_its_rating_rank_and_intervals(tmp_path):
    path = write(tmp_path / "P.jsonl", study())
    ran = proctor("pairwise", "score", "--judgements", str(path), "--json")
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert got == json.loads(json.dumps(score(read_judgements(path.read_bytes()))))  # the core's numbers
    assert list(got["agents"]) == ["strong", "middle", "weak"]
    for a in got["agents"].values():
        assert set(a) == {"rating", "low", "high", "rank", "rank_low", "rank_high", "n"}
        assert a["n"] == 16 and a["low"] <= a["rating"] <= a["high"]
        assert a["rank_low"] <= a["rank"] <= a["rank_high"]
    assert [a["rank"] for a in got["agents"].values()] == [1, 2, 3]
    assert got["win_matrix"]["strong"]["weak"] == {"share": 6.5 / 8, "n": 8, "wins": 6, "ties": 1, "losses": 1}
    assert (got["judgements"], got["items"], got["judges"]) == (24, 8, 2)
    assert got["interval"]["unit"] == "item" and got["interval"]["n_boot"] == 1000


def test_the_table_reads_without_json(tmp_path):
    path = write(tmp_path / "P.jsonl", study())
    ran = proctor("pairwise", "score", "--judgements", str(path), "--n-boot", "200", "--seed", "3")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].split() == ["agent", "rating", "95%", "interval", "rank", "95%", "ranks", "n"]
    assert [line.split()[0] for line in lines[1:4]] == ["strong", "middle", "weak"]
    assert (
        "24 judgements of 8 items by 2 judges; intervals: bootstrap over items (percentile), 200 resamples, seed 3"
        in ran.stdout
    )
    matrix = lines[next(i for i, line in enumerate(lines) if line.startswith("win rate")) + 2 :]
    assert matrix[0].split() == ["strong", "69%", "(8)", "81%", "(8)"]


def test_a_bad_line_is_named_and_nothing_is_printed(tmp_path):
    rows = study()
    rows[2] = {"judge": "p0", "item": "scenario-2", "a": "strong", "b": "middle", "winner": "draw"}
    ran = proctor("pairwise", "score", "--judgements", str(write(tmp_path / "P.jsonl", rows)), "--json")
    assert ran.returncode == 1 and ran.stdout == ""
    assert f'{tmp_path / "P.jsonl"}: line 3, field \'winner\': must be "a", "b" or "tie", not "draw"' in ran.stderr
    assert "Traceback" not in ran.stderr
    rows[2] = '{"judge": "p0", "item": "scenario-2",'
    ran = proctor("pairwise", "score", "--judgements", str(write(tmp_path / "P.jsonl", rows)))
    assert ran.returncode == 1 and "line 3: not valid JSON" in ran.stderr and "Traceback" not in ran.stderr


def test_a_file_over_the_upload_cap_is_refused_before_parsing(tmp_path):
    path = write(tmp_path / "P.jsonl", study())
    ran = proctor("pairwise", "score", "--judgements", str(path), env={"MAX_UPLOAD_BYTES": "1000"})
    assert ran.returncode == 1
    assert "the file is larger than the 1000 byte limit (MAX_UPLOAD_BYTES)" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_control_length_takes_the_judges_taste_for_length_out(tmp_path):
    # The hand-worked case of tests/unit/test_pairwise.py: A longer (30 words to 10) in 5
    # judgements, winning 4; shorter in 2, winning 1. Controlled: A - B = ln 2, and the
    # judges add ln 2 log-odds per 0.5 of normalised length difference.
    rows: list[dict[str, object] | str] = [
        {"judge": "p", "item": f"s{i}", "a": "A", "b": "B", "winner": w, "a_length": 30, "b_length": 10}
        for i, w in enumerate("aaaab")
    ]
    rows += [
        {"judge": "p", "item": "s5", "a": "B", "b": "A", "winner": "a", "a_length": 30, "b_length": 10},
        {"judge": "p", "item": "s6", "a": "A", "b": "B", "winner": "a", "a_length": 10, "b_length": 30},
    ]
    path = write(tmp_path / "P.jsonl", rows)
    ran = proctor("pairwise", "score", "--judgements", str(path), "--control-length", "--json")
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert abs(got["agents"]["A"]["rating"] - 0.5 * math.log(2)) < 1e-5
    assert abs(got["length"]["coefficient"] - math.log(2)) < 1e-5 and got["length"]["scale"] == 0.5
    plain = json.loads(proctor("pairwise", "score", "--judgements", str(path), "--json").stdout)
    assert plain["length"] is None and abs(plain["agents"]["A"]["rating"] - 0.5 * math.log(5 / 2)) < 1e-5
    table = proctor("pairwise", "score", "--judgements", str(path), "--control-length")
    assert "controlled for length: a judge adds 0.693" in table.stdout
    # without lengths on every line the flag is refused, saying why
    bare = write(tmp_path / "Q.jsonl", study())
    refused = proctor("pairwise", "score", "--judgements", str(bare), "--control-length")
    assert refused.returncode != 0 and "needs both lengths of every judgement; 24 of 24 have none" in refused.stderr
