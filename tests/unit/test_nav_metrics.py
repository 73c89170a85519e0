"""Navigation core: connectivity graphs, the DESIGN section 6 metrics, file formats, scoring.

The metric cases run on a 4 x 3 grid with unit edges built here in code (viewpoint "gXY" at
x = X, y = Y), where shortest-path distance is the Manhattan distance. tests/nav_fixtures.py
writes the same grid as a connectivity file (plus an excluded and an unreachable viewpoint);
tests/fixtures/nav holds R2R references and predictions on it, and a PanGEA-style trace in
milliseconds.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from app.errors import InputError
from app.kinds.navigation import formats
from app.kinds.navigation.graph import NavGraph, heading_between, load_connectivity, load_scans
from app.kinds.navigation.metrics import (
    METRICS,
    NUMPY_ROW_FROM,
    _dtw_numpy_rows,
    _dtw_python_rows,
    dedupe,
    dtw,
    mean_scores,
    score_trajectory,
)
from app.kinds.navigation.score import main_text, run, score_predictions
from tests.nav_fixtures import connectivity_dir, grid_file, grid_records, vp

FIX = Path(__file__).parents[1] / "fixtures" / "nav"
CONN = connectivity_dir()
GRID_FILE = grid_file()


@pytest.fixture(scope="module")
def grid() -> NavGraph:
    return load_connectivity(json.dumps(grid_records()).encode(), scan="grid")


# Test vectors from DESIGN section 6.
PRED = [vp(0, 0), vp(1, 0), vp(2, 0), vp(3, 0)]
REF = [vp(0, 0), vp(1, 0), vp(2, 1), vp(3, 2)]


# --- the DESIGN test vectors ---------------------------------------------------------------


def test_design_vector_dtw_ndtw_sdtw(grid):
    cost = grid.distances[np.ix_(grid.indices(REF), grid.indices(PRED))]
    assert dtw(cost) == 3.0
    s = score_trajectory(grid, REF, PRED)
    assert s["ndtw"] == pytest.approx(0.7788007830714049, abs=1e-15)
    assert s["ndtw"] == pytest.approx(math.exp(-0.25), abs=1e-15)
    assert s["sdtw"] == s["ndtw"]
    assert s["success"] is True and s["ne"] == 2.0


def test_design_vector_first_two_steps_fail(grid):
    s = score_trajectory(grid, REF, PRED[:2])
    assert s["sdtw"] == 0.0 and s["success"] is False
    assert s["ne"] == 4.0  # (1,0) to (3,2)
    assert s["spl"] == 0.0
    # DTW: 0 + 0 + d((2,1),(1,0)) + d((3,2),(1,0)) = 6, nDTW = exp(-6 / 12)
    assert s["ndtw"] == pytest.approx(math.exp(-0.5), abs=1e-15)


# --- hand-checked cases --------------------------------------------------------------------


def test_path_length_and_spl_of_the_design_prediction(grid):
    s = score_trajectory(grid, REF, PRED)
    assert s["path_length"] == 3.0
    # shortest start-goal distance is 5; SPL = 1 * 5 / max(5, 3) = 1
    assert s["spl"] == 1.0


def test_spl_halves_when_the_follower_walks_twice_the_distance(grid):
    ref = [vp(0, 0), vp(0, 1), vp(0, 2)]
    q = [vp(0, 0), vp(1, 0), vp(1, 1), vp(0, 1), vp(0, 2)]
    s = score_trajectory(grid, ref, q)
    assert (s["ne"], s["success"], s["path_length"]) == (0.0, True, 4.0)
    assert s["spl"] == 0.5


def test_identical_path_scores_one(grid):
    s = score_trajectory(grid, REF, REF)
    assert s == {"ne": 0.0, "success": True, "spl": 1.0, "ndtw": 1.0, "sdtw": 1.0, "path_length": 5.0}


def test_success_boundary_is_inclusive(grid):
    ref = [vp(0, 0), vp(1, 0), vp(2, 0), vp(3, 0)]
    stay = score_trajectory(grid, ref, [vp(0, 0)])
    assert stay["ne"] == 3.0 and stay["success"] is True  # NE <= 3
    # never moved: path length 0, SPL = 3 / max(3, 0) = 1 by the formula
    assert stay["path_length"] == 0.0 and stay["spl"] == 1.0
    far = score_trajectory(grid, [vp(0, 0), vp(0, 1), vp(0, 2), vp(1, 2), vp(2, 2)], [vp(0, 0), vp(1, 0)])
    assert far["ne"] == 3.0 and far["success"] is True
    past = score_trajectory(grid, ref + [vp(3, 1)], [vp(0, 0)])
    assert past["ne"] == 4.0 and past["success"] is False and past["sdtw"] == 0.0


def test_run_length_deduplication(grid):
    stutter = [vp(0, 0), vp(0, 0), vp(1, 0), vp(1, 0), vp(1, 0), vp(2, 0), vp(3, 0), vp(3, 0)]
    assert dedupe(stutter) == PRED
    assert score_trajectory(grid, REF, stutter) == score_trajectory(grid, REF, PRED)
    # a later return to a viewpoint is a new visit, not a repeat
    assert dedupe(["a", "b", "a", "a"]) == ["a", "b", "a"]


def test_degenerate_reference_at_its_goal(grid):
    s = score_trajectory(grid, [vp(1, 1)], [vp(1, 1)])
    assert s == {"ne": 0.0, "success": True, "spl": 1.0, "ndtw": 1.0, "sdtw": 1.0, "path_length": 0.0}
    moved = score_trajectory(grid, [vp(1, 1)], [vp(1, 1), vp(2, 1)])
    assert moved["spl"] == 0.0 and moved["success"] is True  # 0 / max(0, 1)
    assert moved["ndtw"] == pytest.approx(math.exp(-1 / 3))


def test_wandering_back_and_forth_costs_dtw(grid):
    ref = [vp(0, 0), vp(0, 1), vp(0, 2)]
    q = [vp(0, 0), vp(1, 0), vp(0, 0), vp(0, 1), vp(0, 2)]
    # the detour to (1,0) is matched to R[0] at cost 1 (or to R[1] at cost 2): DTW 1
    s = score_trajectory(grid, ref, q)
    assert s["ndtw"] == pytest.approx(math.exp(-1 / 9))
    assert s["path_length"] == 4.0 and s["spl"] == 0.5


def test_metric_keys_and_means(grid):
    a = score_trajectory(grid, REF, PRED)
    b = score_trajectory(grid, REF, PRED[:2])
    assert tuple(a) == METRICS
    m = mean_scores([a, b])
    assert m["success"] == 0.5 and m["ne"] == 3.0 and m["path_length"] == 2.0
    assert m["sdtw"] == pytest.approx(math.exp(-0.25) / 2)
    assert all(math.isnan(v) for v in mean_scores([]).values())


# --- DTW implementation --------------------------------------------------------------------


def naive_dtw(cost: np.ndarray) -> float:
    n, m = cost.shape
    c = np.full((n + 1, m + 1), np.inf)
    c[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            c[i, j] = cost[i - 1, j - 1] + min(c[i - 1, j], c[i, j - 1], c[i - 1, j - 1])
    return float(c[n, m])


def test_dtw_rows_agree_with_the_plain_recursion():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, m = rng.integers(1, 45, size=2)
        cost = rng.random((n, m)) * 10
        cost[rng.random((n, m)) < 0.2] = 0.0
        want = naive_dtw(cost)
        assert dtw(cost) == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert dtw(cost.T) == pytest.approx(want, rel=1e-12, abs=1e-12)  # symmetric in R and Q
        assert _dtw_numpy_rows(cost) == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert _dtw_python_rows(cost.tolist()) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_dtw_long_rows_use_numpy_and_handle_infinity():
    cost = np.ones((3, NUMPY_ROW_FROM + 5))
    assert dtw(cost) == naive_dtw(cost)
    cost[1, :] = np.inf
    assert dtw(cost) == math.inf and _dtw_python_rows(cost.tolist()) == math.inf
    with pytest.raises(ValueError):
        dtw(np.zeros((0, 3)))


def test_long_trajectory_on_a_big_grid():
    big = load_connectivity(grid_records(12, 10), scan="big")
    ref = [vp(0, y) for y in range(10)]
    walk = [vp(x, 0) for x in range(12)] + [vp(11, y) for y in range(1, 10)] + [vp(x, 9) for x in range(10, -1, -1)]
    s = score_trajectory(big, ref, walk)
    cost = big.distances[np.ix_(big.indices(ref), big.indices(walk))]
    assert len(walk) >= NUMPY_ROW_FROM
    assert s["ndtw"] == pytest.approx(math.exp(-naive_dtw(cost) / 30))
    assert s["path_length"] == 31.0 and s["ne"] == 0.0 and s["spl"] == pytest.approx(9 / 31)


# --- trajectory errors ---------------------------------------------------------------------


def refused(graph, ref, q) -> InputError:
    with pytest.raises(InputError) as err:
        score_trajectory(graph, ref, q)
    return err.value


def test_trajectory_must_start_at_the_reference_start(grid):
    e = refused(grid, REF, [vp(1, 0), vp(2, 0)])
    assert e.field == "trajectory" and "'g10'" in e.message and "'g00'" in e.message


def test_unknown_and_empty(grid):
    e = refused(grid, REF, [vp(0, 0), "nowhere"])
    assert e.field == "trajectory" and "'nowhere' is not in scan grid" in e.message
    assert refused(grid, REF, []).field == "trajectory"
    assert refused(grid, [], PRED).field == "path"
    assert refused(grid, [vp(0, 0), "gone"], PRED).field == "path"
    assert refused(grid, REF, [vp(0, 0), 7]).field == "trajectory"
    assert "string id" in refused(grid, REF, [vp(0, 0), ["g10"]]).message
    assert ["g10"] not in grid and "g10" in grid


# --- the graph -----------------------------------------------------------------------------


def test_grid_graph_shape(grid):
    assert len(grid) == 12 and grid.n_edges == 17 and grid.n_components == 1
    for a in grid.viewpoints:
        for b in grid.viewpoints:
            (ax, ay), (bx, by) = (int(a[1]), int(a[2])), (int(b[1]), int(b[2]))
            assert grid.distance(a, b) == pytest.approx(abs(ax - bx) + abs(ay - by))
    assert np.array_equal(grid.distances, grid.distances.T)
    assert grid.neighbours(vp(1, 1)) == [vp(1, 0), vp(0, 1), vp(2, 1), vp(1, 2)]
    assert grid.is_edge(vp(0, 0), vp(1, 0)) and not grid.is_edge(vp(0, 0), vp(1, 1))
    assert grid.positions.flags.writeable is False and grid.distances.flags.writeable is False


def test_shortest_path_follows_edges(grid):
    p = grid.shortest_path(vp(0, 0), vp(3, 2))
    assert p[0] == vp(0, 0) and p[-1] == vp(3, 2) and len(p) == 6
    assert all(grid.is_edge(a, b) for a, b in zip(p, p[1:]))
    assert grid.shortest_path(vp(2, 2), vp(2, 2)) == [vp(2, 2)]
    grid.check_walk(p)
    with pytest.raises(InputError, match="not neighbours"):
        grid.check_walk([vp(0, 0), vp(2, 0)])


def test_heading_and_elevation(grid):
    # simulator convention: clockwise from +y, so east is pi/2 and south pi
    assert grid.heading(vp(0, 0), vp(0, 1)) == 0.0
    assert grid.heading(vp(0, 0), vp(1, 0)) == pytest.approx(math.pi / 2)
    assert grid.heading(vp(0, 1), vp(0, 0)) == pytest.approx(math.pi)
    assert grid.heading(vp(1, 0), vp(0, 0)) == pytest.approx(3 * math.pi / 2)
    assert grid.heading(vp(0, 0), vp(1, 1)) == pytest.approx(math.pi / 4)
    assert grid.elevation(vp(0, 0), vp(1, 0)) == 0.0
    assert heading_between((0, 0, 0), (0, -1, 0)) == pytest.approx(math.pi)
    fix = load_connectivity(GRID_FILE)
    assert fix.elevation("g00", "island") == pytest.approx(math.atan2(3.0, math.hypot(10, 10)))


def test_fixture_file_is_the_grid_plus_an_excluded_and_an_unreachable_viewpoint(grid):
    fix = load_connectivity(GRID_FILE)
    assert fix.scan == "grid"  # from the file name
    assert "hidden" not in fix and fix.excluded == {"hidden"}
    assert "island" in fix and fix.n_components == 2 and fix.neighbours("island") == []
    assert fix.n_edges == 17  # hidden's unobstructed edge to g00 is ignored
    idx = fix.indices(grid.viewpoints)
    assert np.array_equal(fix.distances[np.ix_(idx, idx)], grid.distances)
    assert fix.distance("g00", "island") == math.inf and not fix.connected("g00", "island")
    with pytest.raises(InputError, match="excluded from the simulator"):
        fix.distance("g00", "hidden")
    with pytest.raises(InputError, match="no path"):
        fix.shortest_path("g00", "island")
    e = refused(fix, ["g00", "g10"], ["g00", "island"])
    assert e.field == "trajectory" and "cannot be reached" in e.message
    assert refused(fix, ["g00", "island"], ["g00"]).field == "path"
    assert refused(fix, ["g00", "g10"], ["g00", "hidden"]).message.endswith("excluded from the simulator in scan grid")


def test_one_sided_unobstructed_makes_an_edge():
    recs = grid_records(2, 1)
    recs[1]["unobstructed"] = [False, False]  # only g00 -> g10 says so
    g = load_connectivity(recs)
    assert g.is_edge("g10", "g00") and g.distance("g10", "g00") == 1.0


def broken(mutate) -> InputError:
    recs = grid_records(2, 2)
    mutate(recs)
    with pytest.raises(InputError) as err:
        load_connectivity(json.dumps(recs).encode(), scan="bad")
    return err.value


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda r: r[1].__setitem__("pose", r[1]["pose"][:15]), "pose", "16 finite numbers"),
        (lambda r: r[1]["pose"].__setitem__(3, "1.0"), "pose", "16 finite numbers"),
        (lambda r: r[2].__setitem__("unobstructed", [True]), "unobstructed", "list of 4 booleans"),
        (lambda r: r[2]["unobstructed"].__setitem__(0, 1), "unobstructed", "true/false"),
        (lambda r: r[0].__setitem__("included", "yes"), "included", "true or false"),
        (lambda r: r[3].__setitem__("image_id", "g00"), "image_id", "repeats record 0"),
        (lambda r: r[3].pop("image_id"), "image_id", "non-empty string"),
        (lambda r: r[0].__setitem__("height", "tall"), "height", "number"),
        (lambda r: r[0].__setitem__("visible", [True]), "visible", "4 booleans"),
        (lambda r: [x.__setitem__("included", False) for x in r], "included", "no viewpoint is included"),
    ],
)
def test_malformed_connectivity(mutate, field, words):
    e = broken(mutate)
    assert e.field == field and words in e.message and "scan bad" in e.message


def test_malformed_connectivity_files():
    with pytest.raises(InputError) as err:
        load_connectivity(b'[{"image_id": "a",\n  "pose": [1, 2,]}]')
    assert err.value.line == 2 and err.value.field == "connectivity"
    for data in (b'{"image_id": "a"}', b"[]", b"[1]", b"\xff\xfe"):
        with pytest.raises(InputError) as err:
            load_connectivity(data)
        assert err.value.field == "connectivity"
    with pytest.raises(InputError, match="cannot read"):
        load_connectivity(CONN / "missing_connectivity.json")


def test_load_scans_is_lazy(tmp_path):
    scans = load_scans(CONN)
    assert list(scans) == ["grid"] and "grid" in scans and scans.loaded() == []
    g = scans["grid"]
    assert scans["grid"] is g and scans.loaded() == ["grid"]
    with pytest.raises(KeyError):
        scans["elsewhere"]
    with pytest.raises(InputError):
        load_scans(tmp_path / "none")
    with pytest.raises(InputError, match="no \\*_connectivity.json"):
        load_scans(tmp_path)


# --- formats: R2R and predictions ----------------------------------------------------------


def test_r2r_fixture():
    paths = formats.parse_r2r(FIX / "R2R_grid.json")
    assert [p.path_id for p in paths] == ["1", "2"]  # integer ids become strings
    assert paths[0].path == tuple(REF) and paths[0].distance == 5.0 and paths[0].scan == "grid"
    ins = formats.r2r_instructions(paths)
    assert list(ins) == ["1_0", "1_1", "2_0", "2_1"]
    assert ins["2_1"].k == 1 and ins["2_1"].path is paths[1] and ins["2_1"].text.startswith("Go straight")


def r2r_refusal(mutate) -> InputError:
    recs = json.loads((FIX / "R2R_grid.json").read_text())
    mutate(recs)
    with pytest.raises(InputError) as err:
        formats.parse_r2r(json.dumps(recs).encode())
    return err.value


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda r: r[1].__setitem__("path_id", 1), "path_id", "record 1 (path_id 1): path_id repeats record 0"),
        (lambda r: r[1].pop("path_id"), "path_id", "record 1"),
        (lambda r: r[0].__setitem__("path", []), "path", "path_id 1"),
        (lambda r: r[0]["path"].__setitem__(2, 5), "path", "path[2]"),
        (lambda r: r[1].__setitem__("heading", "north"), "heading", "path_id 2"),
        (lambda r: r[1].__setitem__("heading", float("nan")), "heading", "finite"),
        (lambda r: r[0].__setitem__("instructions", "walk"), "instructions", "list of strings"),
        (lambda r: r[0].pop("scan"), "scan", "path_id 1"),
        (lambda r: r[0].__setitem__("distance", "far"), "distance", "path_id 1"),
    ],
)
def test_r2r_refusals(mutate, field, words):
    e = r2r_refusal(mutate)
    assert e.field == field and words in e.message


def test_predictions_fixture_and_round_trip():
    preds = formats.parse_predictions(FIX / "predictions_grid.json")
    assert list(preds) == ["1_0", "1_1", "2_0"]
    assert preds["1_0"].viewpoints == PRED
    assert preds["1_0"].trajectory[0] == ("g00", 1.5708, 0.0)
    assert preds["2_0"].trajectory[-1] == ("g02", None, None)  # a bare viewpoint id
    again = formats.parse_predictions(formats.write_predictions(list(preds.values())))
    assert [p.viewpoints for p in again.values()] == [p.viewpoints for p in preds.values()]
    assert formats.parse_predictions(formats.write_predictions({"x_0": ["a", "b"]}))["x_0"].viewpoints == ["a", "b"]


@pytest.mark.parametrize(
    "data, field, words",
    [
        (b'{"instr_id": "1_0"}', "predictions", "JSON array"),
        (b'[{"trajectory": [["g00", 0, 0]]}]', "instr_id", "prediction 0"),
        (b'[{"instr_id": "1_0", "trajectory": []}]', "trajectory", "instr_id 1_0"),
        (b'[{"instr_id": "1_0", "trajectory": [["g00", 0]]}]', "trajectory", "trajectory[0]"),
        (b'[{"instr_id": "1_0", "trajectory": [["g00", "left", 0]]}]', "trajectory", "[viewpoint, heading, elevation]"),
        (
            b'[{"instr_id": "1_0", "trajectory": ["g00"]}, {"instr_id": "1_0", "trajectory": ["g00"]}]',
            "instr_id",
            "prediction 1 (instr_id 1_0): instr_id repeats record 0",
        ),
        (b'[{"instr_id": "1_0", "trajectory": ["g00"]', "predictions", "not valid JSON"),
    ],
)
def test_prediction_refusals(data, field, words):
    with pytest.raises(InputError) as err:
        formats.parse_predictions(data)
    assert err.value.field == field and words in err.value.message


# --- formats: PanGEA traces ----------------------------------------------------------------


def test_trace_in_milliseconds():
    trace = formats.parse_pangea_trace(FIX / "trace_ms.jsonl")
    assert trace.time_unit == "ms"
    assert trace.path == ["g00", "g01", "g11"]
    assert [f.time_ms for f in trace.frames[:3]] == [0.0, 16.7, 33.4]
    # the headings and elevations the fixture's camera poses were built from
    want = [
        (1.0, 0.0),
        (0.5, 0.0),
        (0.0, -0.3),
        (0.0, 0.0),
        (0.0, 0.0),
        (math.pi / 2, 0.0),
        (math.pi / 2, 0.1),
        (4.0, 0.0),
    ]
    for f, (h, e) in zip(trace.frames, want):
        assert f.heading == pytest.approx(h, abs=1e-7) and f.elevation == pytest.approx(e, abs=1e-7)
    # camera poses put the camera at the viewpoint's position (Matterport axes)
    first = json.loads((FIX / "trace_ms.jsonl").read_text().splitlines()[5])
    assert formats.position_from_exmat(first["exmat"]) == pytest.approx((0.0, 1.0, 1.5))


def test_trace_units_detected_and_forced():
    lines = (FIX / "trace_ms.jsonl").read_text().splitlines()
    in_s = []
    for line in lines:
        rec = json.loads(line)
        rec["time"] = rec["time"] / 1000.0
        in_s.append(json.dumps(rec))
    seconds = formats.parse_pangea_trace(("\n".join(in_s) + "\n\n").encode())
    assert seconds.time_unit == "s"
    ms = formats.parse_pangea_trace(FIX / "trace_ms.jsonl")
    assert [f.time_ms for f in seconds.frames] == pytest.approx([f.time_ms for f in ms.frames])
    assert seconds.duration_ms == pytest.approx(7 * 16.7)
    forced = formats.parse_pangea_trace("\n".join(in_s).encode(), time_unit="ms")
    assert forced.time_unit == "ms" and forced.frames[1].time_ms == pytest.approx(0.0167)
    one = formats.parse_pangea_trace(lines[0].encode())
    assert one.time_unit == "ms" and one.path == ["g00"]
    assert formats.detect_time_unit([0.0, 0.5, 0.9, 0.9]) == "s" and formats.detect_time_unit([0, 16, 33]) == "ms"


@pytest.mark.parametrize(
    "edit, line, field",
    [
        (lambda r: r.pop("id"), 2, "id"),
        (lambda r: r.__setitem__("exmat", r["exmat"][:12]), 2, "exmat"),
        (lambda r: r.__setitem__("exmat", [0.0] * 16), 2, "exmat"),
        (lambda r: r.__setitem__("time", "soon"), 2, "time"),
        (lambda r: r.__setitem__("time", -5), 2, "time"),
    ],
)
def test_trace_refusals(edit, line, field):
    lines = (FIX / "trace_ms.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    edit(rec)
    lines[1] = json.dumps(rec)
    with pytest.raises(InputError) as err:
        formats.parse_pangea_trace("\n".join(lines).encode())
    assert (err.value.line, err.value.field) == (line, field)


def test_trace_refusals_of_whole_files():
    with pytest.raises(InputError) as err:
        formats.parse_pangea_trace((FIX / "trace_ms.jsonl").read_bytes().splitlines()[0] + b'\n{"id": ')
    assert (err.value.line, err.value.field) == (2, "trace")
    with pytest.raises(InputError, match="no frames"):
        formats.parse_pangea_trace(b"\n\n")
    with pytest.raises(InputError) as err:
        formats.parse_pangea_trace(b"[1, 2]\n")
    assert err.value.line == 1


# --- formats: coop speaker outputs ---------------------------------------------------------


def speaker_record(path_id: str, text: str, **extra) -> dict:
    rec = {
        "generated_instr": text,
        "distance": 2.0,
        "scan": "grid",
        "path": ["g00", "g01", "g02"],
        "heading": 0.0,
        "path_id": path_id,
        "instr_id": f"{path_id}_0",
        "instructions": ["walk north two steps ."],
        **extra,
    }
    return rec


def test_coop_greedy():
    data = {
        "0": speaker_record("9", "walk north two steps .", model="speaker_ref_agent1_eval"),
        "10": speaker_record(
            "2", "go north .", generated_instr_sum_log_prob=-3.5, generated_instr_avg_log_prob=-1.1, model="greedy"
        ),
        "11": speaker_record("1", "go east ."),
    }
    out = formats.parse_coop_greedy(json.dumps(data).encode())
    assert out.qc_episode.key == "0" and out.qc_episode.path_id == "9" and out.qc_episode.sum_log_prob is None
    assert [o.key for o in out.outputs] == ["10", "11"]
    assert out.outputs[0].sum_log_prob == -3.5 and out.outputs[0].avg_log_prob == -1.1
    assert out.outputs[1].model is None and out.outputs[1].path == ("g00", "g01", "g02")
    del data["0"]
    with pytest.raises(InputError) as err:
        formats.parse_coop_greedy(data)
    assert err.value.field == "0"
    data["0"] = speaker_record("9", "  ")
    with pytest.raises(InputError) as err:
        formats.parse_coop_greedy(data)
    assert err.value.field == "generated_instr" and "key '0'" in err.value.message


def test_coop_candidates():
    data = {f"2_{k}": speaker_record("2", f"candidate {k}") for k in (2, 0, 1)}
    data["1_0"] = speaker_record("1", "only one")
    out = formats.parse_coop_candidates(data)
    assert list(out) == ["2", "1"]
    assert [c.generated_instr for c in out["2"]] == ["candidate 0", "candidate 1", "candidate 2"]
    assert [c.candidate for c in out["2"]] == [0, 1, 2]
    with pytest.raises(InputError) as err:
        formats.parse_coop_candidates({"2_0": data["2_0"], "2_2": data["2_2"]})
    assert "skip [1]" in err.value.message and err.value.field == "2_1"
    with pytest.raises(InputError) as err:
        formats.parse_coop_candidates({"3_0": data["2_0"]})
    assert err.value.field == "path_id" and "key '3_0'" in err.value.message
    with pytest.raises(InputError) as err:
        formats.parse_coop_candidates({"nonsense": data["2_0"]})
    assert err.value.field == "nonsense"
    with pytest.raises(InputError) as err:
        formats.parse_coop_candidates(b"[]")
    assert err.value.field == "candidates"


# --- scoring files -------------------------------------------------------------------------


def test_score_predictions_on_the_fixtures():
    r = score_predictions(CONN, FIX / "R2R_grid.json", FIX / "predictions_grid.json")
    per = r["per_instruction"]
    assert list(per) == ["1_0", "1_1", "2_0"]
    assert per["1_0"]["ndtw"] == pytest.approx(0.7788007830714049) and per["1_0"]["sdtw"] == per["1_0"]["ndtw"]
    assert per["1_1"]["sdtw"] == 0.0
    assert per["2_0"] == {"ne": 0.0, "success": True, "spl": 1.0, "ndtw": 1.0, "sdtw": 1.0, "path_length": 2.0}
    assert r["mean"]["success"] == pytest.approx(2 / 3) and r["mean"]["ne"] == pytest.approx(2.0)
    assert r["mean"]["ndtw"] == pytest.approx((math.exp(-0.25) + math.exp(-0.5) + 1) / 3)
    assert r["unpredicted"] == ["2_1"]


def test_run_prints_json_and_a_table():
    out, err = io.StringIO(), io.StringIO()
    code = run(CONN, FIX / "R2R_grid.json", FIX / "predictions_grid.json", True, out, err)
    assert code == 0 and err.getvalue() == ""
    obj = json.loads(out.getvalue())
    assert set(obj["per_instruction"]["1_0"]) == set(METRICS) and set(obj["mean"]) == set(METRICS)
    out = io.StringIO()
    assert run(CONN, FIX / "R2R_grid.json", FIX / "predictions_grid.json", False, out, err) == 0
    text = out.getvalue()
    assert text.splitlines()[0].split() == ["instr_id", "NE", "SR", "SPL", "nDTW", "SDTW", "PL"]
    assert (
        "1_0" in text
        and "0.779" in text
        and "mean" in text
        and "1 reference instructions have no prediction (2_1)" in text
    )
    assert text == main_text(score_predictions(CONN, FIX / "R2R_grid.json", FIX / "predictions_grid.json"))


def run_with(tmp_path, predictions, references=None) -> tuple[int, str]:
    pred = tmp_path / "pred.json"
    pred.write_bytes(predictions if isinstance(predictions, bytes) else json.dumps(predictions).encode())
    refs = FIX / "R2R_grid.json"
    if references is not None:
        refs = tmp_path / "refs.json"
        refs.write_text(json.dumps(references))
    out, err = io.StringIO(), io.StringIO()
    code = run(CONN, refs, pred, False, out, err)
    assert out.getvalue() == "" or code == 0
    return code, err.getvalue()


@pytest.mark.parametrize(
    "predictions, words",
    [
        ([{"instr_id": "7_0", "trajectory": ["g00"]}], "instruction 7_0: no such instruction in the references"),
        ([{"instr_id": "1_0", "trajectory": ["g10", "g20"]}], "instruction 1_0: the trajectory starts at 'g10'"),
        ([{"instr_id": "1_1", "trajectory": ["g00", "g99"]}], "instruction 1_1: viewpoint 'g99' is not in scan grid"),
        (
            [{"instr_id": "1_1", "trajectory": ["g00", "island"]}],
            "instruction 1_1: viewpoint 'island' cannot be reached",
        ),
        ([], "holds no predictions"),
        (b"[{", "predictions is not valid JSON"),
        ([{"instr_id": "1_0", "trajectory": [["g00", 0]]}], "prediction 0 (instr_id 1_0): trajectory[0]"),
    ],
)
def test_run_refusals(tmp_path, predictions, words):
    code, err = run_with(tmp_path, predictions)
    assert code == 2 and words in err and err.startswith("error: ")


def test_run_refuses_a_scan_without_connectivity(tmp_path):
    refs = json.loads((FIX / "R2R_grid.json").read_text())
    refs[0]["scan"] = "elsewhere"
    code, err = run_with(tmp_path, [{"instr_id": "1_0", "trajectory": ["g00"]}], refs)
    assert code == 2 and "instruction 1_0: scan elsewhere has no connectivity file" in err
    refs[0]["scan"] = "grid"
    refs[0]["path"] = ["g00", "hidden"]
    code, err = run_with(tmp_path, [{"instr_id": "1_0", "trajectory": ["g00"]}], refs)
    assert code == 2 and "instruction 1_0: viewpoint 'hidden' is excluded" in err and "field 'path'" in err


# --- exact values for every metric branch (mutation-testing gaps) ---------------------------


def test_dtw_exact_small_matrices():
    # c11 = 1, c12 = 3, c21 = 4, c22 = 4 + min(3, 4, 1) = 5
    assert dtw(np.array([[1.0, 2.0], [3.0, 4.0]])) == 5.0
    assert dtw([[1.0, 2.0], [3.0, 4.0]]) == 5.0  # any array-like
    assert dtw(np.array([[1.0, 2.0], [3.0, 4.0]]).T) == 5.0
    assert dtw(np.array([[7.0]])) == 7.0
    assert dtw(np.array([[1, 2, 3]])) == 6.0  # one row: every cell is visited
    assert dtw(np.array([[1], [2], [3]])) == 6.0
    # the diagonal move skips the costly cells
    assert dtw(np.array([[0.0, 9.0, 9.0], [9.0, 0.0, 9.0], [9.0, 9.0, 0.0]])) == 0.0
    # horizontal, vertical and diagonal predecessors each win once
    assert dtw(np.array([[1.0, 1.0, 5.0], [5.0, 5.0, 1.0]])) == 3.0
    assert dtw(np.array([[1.0, 5.0], [1.0, 5.0], [5.0, 1.0]])) == 3.0
    assert dtw(np.array([[2.0, 0.5], [0.25, 4.0], [8.0, 1.0]])) == 3.25


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((2, 2, 2)), np.zeros((0, 3)), np.zeros((3, 0)), 5.0])
def test_dtw_refuses_non_matrices(bad):
    with pytest.raises(ValueError) as err:
        dtw(bad)
    assert str(err.value) == "dtw needs a non-empty 2-D cost matrix"


def test_dtw_long_rows_exact_values():
    m = NUMPY_ROW_FROM  # the first width done by numpy, and the widths around it
    for width in (m - 1, m, m + 1, 3 * m):
        row = np.arange(width, dtype=float)
        cost = np.vstack([row, row[::-1]])  # integer costs: exact in any summation order
        want = naive_dtw(cost)
        assert dtw(cost) == want and dtw(cost.T) == want
        assert _dtw_numpy_rows(cost) == want and _dtw_python_rows(cost.tolist()) == want
    # a zero-cost diagonal through a long matrix is exactly 0, never -0.0 or -1e-16
    cost = np.full((3, 40), 0.1)
    cost[0, 0] = cost[1, 1] = 0.0
    cost[2, 2:] = 0.0
    assert dtw(cost) == 0.0 and math.copysign(1.0, dtw(cost)) == 1.0


def test_dtw_with_an_unreachable_cell_on_long_rows():
    # an infinite cell that a warping path can go around does not make DTW infinite
    cost = np.ones((2, NUMPY_ROW_FROM + 8))
    cost[0, 5] = math.inf
    want = naive_dtw(cost)
    assert want == NUMPY_ROW_FROM + 8  # along row 0 to column 4, diagonally down, then row 1
    assert dtw(cost) == want and dtw(cost.T) == want and _dtw_python_rows(cost.tolist()) == want
    cost[:, 7] = math.inf  # a whole column: every path crosses it
    assert dtw(cost) == math.inf and naive_dtw(cost) == math.inf


def test_success_threshold_and_ndtw_normaliser(grid):
    from app.kinds.navigation import metrics

    assert metrics.SUCCESS_DISTANCE == 3.0
    assert metrics.METRICS == ("ne", "success", "spl", "ndtw", "sdtw", "path_length")
    assert metrics.ndtw_from_dtw(3.0, 4) == math.exp(-0.25) == 0.7788007830714049
    assert metrics.ndtw_from_dtw(0.0, 1) == 1.0
    assert metrics.ndtw_from_dtw(6.0, 2) == math.exp(-1.0)


def test_design_vectors_exact(grid):
    s = score_trajectory(grid, REF, PRED)
    assert s == {
        "ne": 2.0,
        "success": True,
        "spl": 1.0,
        "ndtw": 0.7788007830714049,
        "sdtw": 0.7788007830714049,
        "path_length": 3.0,
    }
    s = score_trajectory(grid, REF, PRED[:2])
    assert s == {"ne": 4.0, "success": False, "spl": 0.0, "ndtw": math.exp(-0.5), "sdtw": 0.0, "path_length": 1.0}
    assert type(s["ne"]) is float and type(s["path_length"]) is float and type(s["spl"]) is float


def test_success_at_exactly_three_metres_and_just_beyond(grid):
    ref = [vp(0, 0), vp(1, 0), vp(2, 0), vp(3, 0)]
    s = score_trajectory(grid, ref, [vp(0, 0)])
    # NE 3 (inclusive): success; PL 0, shortest 3 -> SPL 3 / max(3, 0) = 1; DTW 0+1+2+3 = 6
    assert s == {
        "ne": 3.0,
        "success": True,
        "spl": 1.0,
        "ndtw": math.exp(-6 / 12),
        "sdtw": math.exp(-6 / 12),
        "path_length": 0.0,
    }
    s = score_trajectory(grid, ref + [vp(3, 1)], [vp(0, 0), vp(0, 1)])
    # NE d((0,1), (3,1)) = 3: success; PL 1, shortest 4 -> SPL 1
    assert s["ne"] == 3.0 and s["success"] is True and s["spl"] == 1.0 and s["sdtw"] == s["ndtw"] > 0
    s = score_trajectory(grid, ref + [vp(3, 1)], [vp(0, 0), vp(0, 1), vp(0, 0)])
    assert s["ne"] == 4.0 and s["success"] is False and s["spl"] == 0.0 and s["sdtw"] == 0.0
    assert s["path_length"] == 2.0 and s["ndtw"] > 0


def test_spl_uses_the_longer_of_shortest_and_walked(grid):
    ref = [vp(0, 0), vp(1, 0), vp(2, 0)]
    # walked 4 > shortest 2: SPL 2/4; stopped 1 m short (NE 1)
    s = score_trajectory(grid, ref, [vp(0, 0), vp(0, 1), vp(1, 1), vp(1, 0), vp(2, 0)])
    assert (s["spl"], s["path_length"], s["ne"]) == (0.5, 4.0, 0.0)
    s = score_trajectory(grid, ref, [vp(0, 0), vp(0, 1), vp(1, 1), vp(2, 1), vp(3, 1)])
    assert (s["spl"], s["path_length"], s["ne"]) == (0.5, 4.0, 2.0)
    # walked less than the shortest path (stopped early but within 3 m): SPL = 2 / max(2, 1) = 1
    s = score_trajectory(grid, ref, [vp(0, 0), vp(1, 0)])
    assert (s["spl"], s["path_length"], s["ne"]) == (1.0, 1.0, 1.0)
    # reference of one viewpoint, follower walked 2 and came back: 0 / max(0, 2) = 0
    s = score_trajectory(grid, [vp(1, 1)], [vp(1, 1), vp(2, 1), vp(1, 1)])
    assert (s["spl"], s["path_length"], s["ne"], s["success"]) == (0.0, 2.0, 0.0, True)
    assert s["ndtw"] == math.exp(-1 / 3)


def test_path_length_sums_every_step(grid):
    q = [vp(0, 0), vp(1, 0), vp(2, 0), vp(2, 1), vp(2, 2), vp(1, 2)]
    s = score_trajectory(grid, [vp(0, 0), vp(1, 2)], q)
    assert s["path_length"] == 5.0 and s["ne"] == 0.0 and s["spl"] == 3 / 5
    # two viewpoints: one step
    assert score_trajectory(grid, [vp(0, 0), vp(1, 2)], [vp(0, 0), vp(0, 1)])["path_length"] == 1.0


def test_mean_scores_exact(grid):
    rows = [
        {"ne": 1.0, "success": True, "spl": 0.5, "ndtw": 0.25, "sdtw": 0.25, "path_length": 2.0},
        {"ne": 4.0, "success": False, "spl": 0.0, "ndtw": 0.75, "sdtw": 0.0, "path_length": 6.0},
        {"ne": 1.0, "success": True, "spl": 1.0, "ndtw": 0.5, "sdtw": 0.5, "path_length": 1.0, "extra": "x"},
    ]
    assert mean_scores(iter(rows)) == {
        "ne": 2.0,
        "success": 2 / 3,
        "spl": 0.5,
        "ndtw": 0.5,
        "sdtw": 0.25,
        "path_length": 3.0,
    }
    assert list(mean_scores(rows)) == list(METRICS)
    empty = mean_scores(iter([]))
    assert list(empty) == list(METRICS) and all(math.isnan(v) for v in empty.values())


def test_dedupe_exact():
    assert dedupe([]) == []
    assert dedupe(["a"]) == ["a"]
    assert dedupe(iter(["a", "a", "a"])) == ["a"]
    assert dedupe(["a", "b", "b", "a", "c", "c"]) == ["a", "b", "a", "c"]
    assert dedupe([0, 0, None, None, 0]) == [0, None, 0]  # falsy viewpoints are values too


def test_refusal_messages_exact(grid):
    fix = load_connectivity(GRID_FILE)
    e = refused(grid, REF, [vp(1, 0), vp(2, 0)])
    assert (e.field, e.message) == ("trajectory", "the trajectory starts at 'g10', not at the reference's start 'g00'")
    e = refused(grid, [], PRED)
    assert (e.field, e.message) == ("path", "the reference path is empty")
    e = refused(grid, REF, [])
    assert (e.field, e.message) == ("trajectory", "the trajectory is empty")
    e = refused(fix, ["g00", "g10", "island", "g20"], ["g00"])
    assert (e.field, e.message) == ("path", "reference viewpoint 'island' cannot be reached from the start 'g00'")
    e = refused(fix, ["g00", "g10"], ["g00", "g00", "g10", "island", "g10"])
    assert (e.field, e.message) == ("trajectory", "viewpoint 'island' cannot be reached from the start 'g00'")
    # both lists inside the start's component are fine, whatever else the graph holds
    assert score_trajectory(fix, REF, PRED) == score_trajectory(grid, REF, PRED)
    # a reference or trajectory that is just the start is trivially reachable
    assert score_trajectory(fix, ["g00"], ["g00"])["ne"] == 0.0
    e = refused(fix, ["island"], ["island", "g00"])
    assert (e.field, e.message) == ("trajectory", "viewpoint 'g00' cannot be reached from the start 'island'")
    assert score_trajectory(fix, ["island"], ["island"])["success"] is True


def test_dtw_converts_any_real_numbers_to_float():
    from decimal import Decimal
    from fractions import Fraction

    assert dtw([[Decimal("0.5"), Decimal("1.5")], [Fraction(1, 4), Decimal(2)]]) == 2.5  # 2 + 0.5
    wide = [[Decimal(1)] * (NUMPY_ROW_FROM + 1)]
    assert dtw(wide) == NUMPY_ROW_FROM + 1.0
    assert type(dtw(np.array([[1, 2], [3, 4]]))) is float and dtw(np.array([[1, 2], [3, 4]])) == 5.0
