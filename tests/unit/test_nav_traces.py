"""Pose traces out and back in (PanGEA JSONL), and the listener-agreement arithmetic.

The export must be read back by our own PanGEA parser as the same path, headings, elevations
and times: on a generated two-floor house with random poses, and on the released PanGEA trace
(skipped, saying why, when ../shared/data is absent). Agreement is nDTW with the human path as
the reference, checked on the DESIGN section 6 grid vectors."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path

import pytest

from app.errors import InputError
from app.kinds.navigation import formats
from app.kinds.navigation.agreement import instruction_agreement, path_ndtw
from app.kinds.navigation.graph import load_connectivity
from app.kinds.navigation.metrics import dedupe
from app.kinds.navigation.house import generate_house
from app.kinds.navigation.traces import (
    exmat_for,
    export_trace,
    parse_listener_outputs,
    run_trace,
    trace_records,
    trace_rows,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
PANGEA = DATA / "pangea"
CONN = DATA / "r2r" / "connectivity"
TWO_PI = 2 * math.pi


def angle_gap(a: float, b: float) -> float:
    return abs((a - b + math.pi) % TWO_PI - math.pi)


def assert_same_poses(rows: list[list], trace: formats.PoseTrace, tol: float = 1e-6) -> None:
    assert len(trace.frames) == len(rows)
    for row, f in zip(rows, trace.frames):
        assert f.viewpoint == row[0]
        assert angle_gap(f.heading, row[1]) < tol, (row, f)
        assert abs(f.elevation - row[2]) < tol, (row, f)
        assert f.time_ms == pytest.approx(row[3], abs=1e-9)


@pytest.fixture(scope="module")
def house():
    return generate_house(7, floors=2)


def random_walk_trace(graph, rng: random.Random, steps: int = 25) -> list[list]:
    """A follower's trace: turns on the spot (several poses per viewpoint), looking up and
    down, walks along edges; times in ms, 0.1 ms resolution as the viewer records them."""
    v = rng.choice(graph.viewpoints)
    t, rows = 0.0, []
    for _ in range(steps):
        for _ in range(rng.randint(1, 4)):
            rows.append([v, rng.uniform(0, TWO_PI), rng.uniform(-1.4, 1.4), t])
            t = round(t + rng.uniform(16, 400), 1)
        v = rng.choice(graph.neighbours(v))
    return rows


def test_export_reads_back_the_same_path_headings_elevations_and_times(house):
    graph = house.graph()
    rng = random.Random(5)
    for _ in range(5):
        rows = random_walk_trace(graph, rng)
        data = export_trace(graph, rows)
        back = formats.parse_pangea_trace(data)  # auto: the export is in milliseconds
        assert back.time_unit == "ms"
        assert_same_poses(rows, back)
        assert back.path == dedupe(r[0] for r in rows)
        # Each record's translation is its viewpoint's connectivity position.
        for line, row in zip(data.decode().splitlines(), rows):
            rec = json.loads(line)
            assert set(rec) == {"id", "exmat", "inmat", "time"}
            assert len(rec["exmat"]) == 16 and len(rec["inmat"]) == 16
            pos = formats.position_from_exmat(rec["exmat"])
            assert pos == pytest.approx(tuple(graph.position(row[0])), abs=1e-9)


def test_exmat_is_a_rotation_and_keeps_the_heading_at_steep_elevations():
    for heading in (0.0, 1.0, math.pi, 5.5):
        for elevation in (-1.5, -0.3, 0.0, 0.7, 1.5):
            m = exmat_for((1.0, 2.0, 3.0), heading, elevation)
            r = [[m[4 * i + j] for j in range(3)] for i in range(3)]
            for i in range(3):
                for j in range(3):
                    dot = sum(r[k][i] * r[k][j] for k in range(3))
                    assert dot == pytest.approx(1.0 if i == j else 0.0, abs=1e-12)
            h, e = formats.heading_elevation_from_exmat(m)
            assert angle_gap(h, heading) < 1e-9 and e == pytest.approx(elevation, abs=1e-12)


def test_export_refuses_a_viewpoint_outside_the_building(house):
    graph = house.graph()
    with pytest.raises(InputError) as e:
        trace_records(graph, [[graph.viewpoints[0], 0.0, 0.0, 0.0], ["nowhere", 0.0, 0.0, 5.0]])
    assert e.value.field == "trace" and "trace[1]" in str(e.value) and "'nowhere'" in str(e.value)


@pytest.mark.skipif(
    not ((PANGEA / "snapshots.jsonl").exists() and (CONN / "1LXtFkjw3qL_connectivity.json").exists()),
    reason=f"the released PanGEA trace or its building is absent under {DATA}",
)
def test_real_pangea_trace_round_trip():
    original = formats.parse_pangea_trace(PANGEA / "snapshots.jsonl")
    assert original.time_unit == "s"
    args = json.loads((PANGEA / "args.json").read_text())
    graph = load_connectivity(CONN / f"{args['scan']}_connectivity.json", scan=args["scan"])
    rows = trace_rows(original)
    back = formats.parse_pangea_trace(export_trace(graph, rows))
    assert back.time_unit == "ms" and back.path == original.path == args["path"]
    assert_same_poses(rows, back)
    # The released camera positions are the connectivity positions to 0.1 mm; ours are exact.
    released = [json.loads(x) for x in (PANGEA / "snapshots.jsonl").read_text().splitlines() if x.strip()]
    ours = [json.loads(x) for x in export_trace(graph, rows).decode().splitlines()]
    for a, b in zip(released, ours):
        pa, pb = formats.position_from_exmat(a["exmat"]), formats.position_from_exmat(b["exmat"])
        assert max(abs(x - y) for x, y in zip(pa, pb)) < 2e-4


def test_trace_command_reports_a_broken_trace(tmp_path):
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"id": "a", "exmat": [1, 2], "inmat": [], "time": 0}\n')
    err = io.StringIO()
    assert run_trace(bad, tmp_path, None, "auto", True, io.StringIO(), err) == 2
    assert "line 1" in err.getvalue() and "exmat" in err.getvalue()


# -- agreement arithmetic on the DESIGN grid ----------------------------------------------------


def vp(x: int, y: int) -> str:
    return f"g{x}{y}"


@pytest.fixture(scope="module")
def grid():
    cells = [(x, y) for y in range(3) for x in range(4)]
    records = [
        {
            "image_id": vp(x, y),
            "pose": [1, 0, 0, float(x), 0, 1, 0, float(y), 0, 0, 1, 1.5, 0, 0, 0, 1],
            "included": True,
            "visible": [True] * len(cells),
            "unobstructed": [abs(x - a) + abs(y - b) == 1 for a, b in cells],
            "height": 1.5,
        }
        for x, y in cells
    ]
    return load_connectivity(json.dumps(records).encode(), scan="grid")


HUMAN = [vp(0, 0), vp(1, 0), vp(2, 1), vp(3, 2)]
LISTENER = [vp(0, 0), vp(1, 0), vp(2, 0), vp(3, 0)]


def test_agreement_of_identical_paths_is_one(grid):
    assert path_ndtw(grid, HUMAN, HUMAN) == 1.0
    # Turning on the spot records a viewpoint twice; it is one visit.
    assert path_ndtw(grid, HUMAN, [HUMAN[0], *HUMAN]) == 1.0
    assert instruction_agreement(grid, [HUMAN, HUMAN], HUMAN) == 1.0


def test_agreement_is_ndtw_with_the_human_path_as_reference(grid):
    # DESIGN section 6: DTW 3.0 over |R| = 4 -> e^-0.25.
    assert path_ndtw(grid, HUMAN, LISTENER) == pytest.approx(math.exp(-0.25), abs=1e-12)
    # The normaliser is the human path's length. R = g00, g01 against the same listener:
    # row g00: 0, 1, 3, 6; row g01 (d = 1, 2, 3, 4): 1, 2 + min(1, 1, 0) = 2,
    # 3 + min(3, 2, 1) = 4, 4 + min(6, 4, 3) = 7 -> DTW 7 over |R| = 2.
    short = [vp(0, 0), vp(0, 1)]
    assert path_ndtw(grid, short, LISTENER) == pytest.approx(math.exp(-7 / 6), abs=1e-12)
    # Two people: the mean of the listener's nDTW against each.
    assert instruction_agreement(grid, [HUMAN, LISTENER], LISTENER) == pytest.approx(
        (math.exp(-0.25) + 1.0) / 2, abs=1e-12
    )


def test_listener_outputs_are_checked_against_the_building_and_start(grid):
    payloads = {"1_0": {"scan": "grid", "start": vp(0, 0)}, "1_1": {"scan": "grid", "start": vp(0, 0)}}
    graphs = {"grid": grid}.__getitem__
    preds = [
        {"instr_id": "1_0", "trajectory": [[v, 0.0, 0.0] for v in [vp(0, 0), vp(0, 0), vp(1, 0)]]},
        {"instr_id": "1_1", "trajectory": [vp(0, 0), vp(2, 2)]},
    ]  # a jump: allowed, as in nav score
    out = parse_listener_outputs(json.dumps(preds).encode(), set(payloads), payloads, graphs)
    assert out == {"1_0": {"path": [vp(0, 0), vp(1, 0)]}, "1_1": {"path": [vp(0, 0), vp(2, 2)]}}

    def refused(data, field: str, *words: str) -> None:
        with pytest.raises(InputError) as e:
            parse_listener_outputs(json.dumps(data).encode(), set(payloads), payloads, graphs)
        assert e.value.field == field, str(e.value)
        assert all(w in str(e.value) for w in words), str(e.value)

    refused([{"instr_id": "9_9", "trajectory": [vp(0, 0)]}], "instr_id", "9_9")
    refused([{"instr_id": "1_0", "trajectory": [vp(0, 0), "gXX"]}], "trajectory", "1_0", "'gXX'")
    refused([{"instr_id": "1_1", "trajectory": [vp(1, 0), vp(2, 0)]}], "trajectory", "1_1", "start")
    refused({"1_0": {"path": [vp(1, 1)]}}, "path", "'1_0'", "start")
    refused({"1_0": {"path": [vp(0, 0)], "trace": []}}, "key", "'1_0'")
    refused({"nope": {"path": [vp(0, 0)]}}, "key", "'nope'")
    refused({"1_0": {"trace": [{"id": vp(0, 0), "exmat": [0] * 16, "time": 0}]}}, "exmat", "'1_0'", "trace[0]")
    refused("just text", "outputs")


def test_the_worked_example_in_the_docs():
    """docs/kinds/navigation-listeners.md: A B C D on a line, people walked A B C D and A B."""
    records = [
        {
            "image_id": v,
            "pose": [1, 0, 0, float(x), 0, 1, 0, 0.0, 0, 0, 1, 1.5, 0, 0, 0, 1],
            "included": True,
            "visible": [True] * 4,
            "unobstructed": [abs(x - y) == 1 for y in range(4)],
            "height": 1.5,
        }
        for x, v in enumerate("ABCD")
    ]
    line = load_connectivity(json.dumps(records).encode(), scan="line")
    people = [list("ABCD"), list("AB")]
    assert path_ndtw(line, list("AB"), list("ABCD")) == pytest.approx(math.exp(-0.5))
    assert path_ndtw(line, list("ABCD"), list("AB")) == pytest.approx(math.exp(-0.25))
    assert round(instruction_agreement(line, people, list("ABCD")), 3) == 0.803
    assert round(instruction_agreement(line, people, list("AB")), 3) == 0.889
