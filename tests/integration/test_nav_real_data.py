"""The navigation core on the real data in ../shared/data: every Matterport3D connectivity
graph, R2R val_seen, the PanGEA trace and the coop speaker outputs. Skips, saying why, when the
shared data folder is absent (a fresh clone elsewhere)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from app.kinds.navigation import formats
from app.kinds.navigation.graph import load_connectivity, load_scans
from app.kinds.navigation.metrics import score_trajectory
from app.kinds.navigation.score import score_predictions

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CONN = DATA / "r2r" / "connectivity"
R2R = DATA / "r2r" / "R2R_val_seen.json"
PANGEA = DATA / "pangea"
COOP = DATA / "coop"

pytestmark = pytest.mark.skipif(
    not (CONN.is_dir() and R2R.exists()),
    reason=f"real navigation data not found under {DATA} (shared data folder absent)",
)


@pytest.fixture(scope="module")
def scans():
    return load_scans(CONN)


@pytest.fixture(scope="module")
def r2r():
    return formats.parse_r2r(R2R)


def test_every_connectivity_file_imports(scans):
    # The data README says 16 buildings; the folder holds all of scans.txt (90 in this copy).
    listed = (CONN / "scans.txt").read_text().split()
    files = sorted(p.name for p in CONN.glob("*_connectivity.json"))
    assert len(files) == len(listed) == len(scans)
    assert set(scans) == set(listed)
    for scan in listed:
        g = scans[scan]
        assert g.scan == scan and len(g) > 0 and g.n_edges > 0
        d = g.distances
        assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)
        # finite exactly within connected components
        _, labels = connected_components(g.adjacency, directed=False)
        same = labels[:, None] == labels[None, :]
        assert np.isfinite(d[same]).all() and np.isinf(d[~same]).all()
        # a path through the building is never shorter than the straight line
        straight = np.linalg.norm(g.positions[:, None] - g.positions[None], axis=2)
        assert (d[same] >= straight[same] - 1e-9).all()
        assert not (set(g.viewpoints) & g.excluded)


def test_buildings_are_mostly_one_component(scans):
    # A few buildings have included viewpoints with no edge at all (e.g. B6ByNegPMKs: 3).
    isolated = {s: int(np.sum(np.diff(scans[s].adjacency.indptr) == 0)) for s in scans}
    assert all(scans[s].n_components == 1 + isolated[s] for s in scans)
    assert sum(1 for s in scans if scans[s].n_components > 1) < 10


def test_r2r_val_seen_paths_are_connected_shortest_paths(scans, r2r):
    assert len(r2r) == 340
    instructions = formats.r2r_instructions(r2r)
    assert len(instructions) == sum(len(p.instructions) for p in r2r)
    assert sum(len(p.instructions) == 3 for p in r2r) >= 339  # one path has 4
    for p in r2r:
        g = scans[p.scan]
        assert 4 <= len(p.path) <= 7
        g.check_walk(p.path)  # every step is an edge
        length = sum(g.distance(a, b) for a, b in zip(p.path, p.path[1:]))
        assert length == pytest.approx(p.distance, abs=0.006)  # released rounded to cm
        assert length <= g.distance(p.path[0], p.path[-1]) * (1 + 1e-9) + 1e-9  # a shortest path
        assert 0 <= p.heading < 2 * math.pi


def test_scoring_the_references_themselves(tmp_path, r2r):
    instructions = formats.r2r_instructions(r2r)
    pred = tmp_path / "pred.json"
    pred.write_bytes(formats.write_predictions({k: list(i.path.path) for k, i in instructions.items()}))
    result = score_predictions(CONN, R2R, pred)
    assert len(result["per_instruction"]) == len(instructions) and result["unpredicted"] == []
    for s in result["per_instruction"].values():
        assert s["ndtw"] == pytest.approx(1.0, abs=1e-12) and s["spl"] == pytest.approx(1.0)
        assert s["ne"] == 0.0 and s["success"] is True
    assert result["mean"]["ndtw"] == pytest.approx(1.0) and result["mean"]["spl"] == pytest.approx(1.0)


@pytest.mark.skipif(not (PANGEA / "snapshots.jsonl").exists(), reason=f"no PanGEA trace under {PANGEA}")
def test_pangea_trace_reduces_to_the_task_path(scans):
    args = json.loads((PANGEA / "args.json").read_text())
    trace = formats.parse_pangea_trace(PANGEA / "snapshots.jsonl")
    assert trace.time_unit == "s"  # this version wrote seconds
    assert len(trace.frames) == 2277
    assert trace.frames[0].time_ms == 0.0 and trace.duration_ms == pytest.approx(38682.7)
    assert trace.path == args["path"]
    g = scans[args["scan"]]
    s = score_trajectory(g, args["path"], trace.path)
    assert s["ndtw"] == 1.0 and s["success"] is True and s["spl"] == 1.0
    # The derived camera convention: starts at the task's heading, ...
    assert trace.frames[0].heading == pytest.approx(args["heading"], abs=1e-4)
    # ... sits at its viewpoint, ...
    for line in (PANGEA / "snapshots.jsonl").read_text().splitlines()[::50]:
        rec = json.loads(line)
        assert formats.position_from_exmat(rec["exmat"]) == pytest.approx(g.position(rec["id"]).tolist(), abs=1e-3)
    # ... and faces the next viewpoint just before each move (PanGEA turns, then moves).
    for before, after in zip(trace.frames, trace.frames[1:]):
        if before.viewpoint != after.viewpoint:
            assert before.heading == pytest.approx(g.heading(before.viewpoint, after.viewpoint), abs=1e-3)
            assert before.elevation == pytest.approx(g.elevation(before.viewpoint, after.viewpoint), abs=1e-3)
    assert all(-math.pi / 2 <= f.elevation <= math.pi / 2 for f in trace.frames)


@pytest.mark.skipif(not COOP.is_dir(), reason=f"no coop speaker outputs under {COOP}")
def test_coop_files_parse(scans, r2r):
    greedy = formats.parse_coop_greedy(COOP / "anno_speaker-clip-t5_greedy.json")
    assert len(greedy.outputs) == 75
    assert {o.model for o in greedy.outputs} == {"speaker-clip-t5_greedy"}
    assert all(o.sum_log_prob is not None and o.sum_log_prob < 0 for o in greedy.outputs)
    qc = greedy.qc_episode
    assert qc.model == "speaker_ref_agent1_eval" and qc.sum_log_prob is None
    # the QC episode's instruction is one of its path's human references (lower-cased)
    assert qc.generated_instr.rstrip(" .").lower() in [i.lower().rstrip(" .") for i in qc.instructions]
    g = scans[qc.scan]
    g.check_walk(qc.path)
    assert sum(g.distance(a, b) for a, b in zip(qc.path, qc.path[1:])) == pytest.approx(qc.distance, abs=0.006)

    candidates = formats.parse_coop_candidates(COOP / "speaker_t5_clip_sampled_nucleus_val_seen.json")
    assert len(candidates) == 340 and all(len(c) == 11 for c in candidates.values())
    by_id = {p.path_id: p for p in r2r}
    assert set(candidates) == set(by_id)
    for pid, cands in candidates.items():
        assert all(c.path == by_id[pid].path and c.scan == by_id[pid].scan for c in cands)
    # the sampled file carries no log-probabilities (unlike the greedy one)
    assert all(c.sum_log_prob is None for cs in candidates.values() for c in cs)
    # candidate 0 is the greedy output
    for o in greedy.outputs:
        assert candidates[o.path_id][0].generated_instr == o.generated_instr
        assert o.path == by_id[o.path_id].path


def test_one_graph_loads_from_bytes_like_from_the_file():
    path = CONN / "8194nk5LbLH_connectivity.json"
    a = load_connectivity(path)
    b = load_connectivity(path.read_bytes(), scan="8194nk5LbLH")
    assert a.viewpoints == b.viewpoints and np.array_equal(a.distances, b.distances)
