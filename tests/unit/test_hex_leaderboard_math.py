"""The Hexagons leaderboard's arithmetic: the paired test over procedures against hand
computations and a plain loop, the cluster intervals against a loop over the same resamples,
abstraction labels read defensively, and the section built from the released test split (gold
as an agent scores 1 everywhere; the no-action row equals `proctor hex score --no-action`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from app.kinds.hexagons import metrics
from app.kinds.hexagons.formats import parse_procedures
from app.kinds.hexagons.leaderboard import MIN_SHARED, ProcedureInfo, Row, abstraction_levels, build, paired_tests
from app.kinds.hexagons.score import no_action
from app.leaderboards.stats import mean_interval, paired_cluster_difference, paired_cluster_differences

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hexagons"
real = pytest.mark.skipif(not (DATA / "test.jsonl").exists(), reason=f"Hexagons data not found under {DATA}")


def test_paired_difference_by_hand():
    # Differences 1, 2, 3: mean 2; of the 8 sign patterns only +++ and --- reach |sum| >= 6.
    d = paired_cluster_difference([1, 2, 3], [0, 0, 0])
    assert (d["n"], d["mean_diff"], d["p"]) == (3, 2.0, 0.25)
    assert 1.0 <= d["low"] <= 2.0 <= d["high"] <= 3.0
    # Weighted by steps: (1 * 0.5 + 3 * 1.0) / 4; sign patterns give |3.5| twice, |2.5| twice.
    d = paired_cluster_difference([0.5, 1.0], [0.0, 0.0], [1, 3])
    assert (d["mean_diff"], d["p"]) == (0.875, 0.5)
    same = paired_cluster_difference([0.2, 0.7, 0.9], [0.2, 0.7, 0.9])
    assert (same["mean_diff"], same["low"], same["high"], same["p"]) == (0.0, 0.0, 0.0, 1.0)
    assert np.isnan(paired_cluster_difference([], [])["p"])
    with pytest.raises(ValueError):
        paired_cluster_difference([1, 2], [1])
    with pytest.raises(ValueError):
        paired_cluster_difference([1, 2], [1, 2], [1, 0])


def test_paired_difference_interval_is_the_paired_bootstrap_and_p_the_sign_flip():
    rng = np.random.default_rng(3)
    a, b, w = rng.random(20), rng.random(20), rng.integers(1, 9, 20).astype(float)
    d = paired_cluster_difference(a, b, w, n_boot=500, n_perm=4000, seed=7)
    # The same draws in a loop: resample procedures, recompute the step-weighted difference.
    idx = np.random.default_rng(7).integers(0, 20, size=(500, 20))
    loop = [sum(w[i] * (a[i] - b[i]) for i in r) / sum(w[i] for i in r) for r in idx]
    assert (d["low"], d["high"]) == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])))
    assert d["mean_diff"] == pytest.approx(float((w * (a - b)).sum() / w.sum()))
    # 20 procedures: random sign patterns; a constant positive difference is as extreme as it
    # gets, so only the observed pattern itself counts: p = 1 / (1 + n_perm).
    assert paired_cluster_difference(np.ones(20), np.zeros(20), n_perm=999)["p"] == pytest.approx(1 / 1000, abs=2e-3)
    both = paired_cluster_differences(np.stack([a, a], 1), np.stack([b, a], 1), w, seed=1)
    assert both[1]["mean_diff"] == 0.0 and both[1]["p"] == 1.0 and both[0]["mean_diff"] == pytest.approx(d["mean_diff"])


def test_cells_are_mean_interval_over_steps_clustered_by_procedure():
    # Uneven procedures (1-4 steps), two executions of some: every cell is stats.mean_interval
    # of the row's step values with the procedure as the cluster (the bootstrap of its own that
    # the section used before is gone).
    rng = np.random.default_rng(0)
    procs = {i: ProcedureInfo("a" if i % 2 else "b", 1 + i % 4, [None] * (1 + i % 4)) for i in range(12)}
    human = Row("human", "h")
    for i, info in procs.items():
        for _ in range(1 + i % 2):
            human.executions[i].append(rng.random((info.steps, len(metrics.KEYS))))
    rows = {r["who"]: r for r in build([human], procs)["tables"][0]["rows"]}
    values = np.concatenate([m for i in procs for m in human.executions[i]])
    ids = [i for i in procs for m in human.executions[i] for _ in range(len(m))]
    for j, key in enumerate(metrics.KEYS):
        # the cell also says over how many procedures (the unit resampled) its interval is
        assert rows["h"][key] == {
            **mean_interval(values[:, j], clusters=ids).as_dict(),
            "unit": "procedure",
            "units": len(set(ids)),
        }
    assert rows["h"]["board_f1"]["method"] == "Wilson (effective n, clusters)"


def test_abstraction_levels_are_read_only_where_they_are_well_formed():
    ref = {"abstraction": [{"level": 0, "mechanisms": []}, {"level": None}, {"level": 3, "mechanisms": ["x"]}]}
    assert abstraction_levels(ref, 3) == [0, None, 3]
    assert abstraction_levels(ref, 2) == [None, None]  # one label per step or none
    bad = {"abstraction": [{"level": True}, {"level": 4}, {"level": "2"}, "level 1"]}
    assert abstraction_levels(bad, 4) == [None] * 4
    assert abstraction_levels({}, 2) == [None, None]


def _row(section, who, items, value):
    r = Row(section, who)
    for i in items:
        r.executions[i].append(np.full((2, len(metrics.KEYS)), value))
    return r


def test_paired_tests_need_enough_shared_procedures_and_empty_rows_drop_out():
    procs = {i: ProcedureInfo("c", 2, [None, 1]) for i in range(10)}
    a = _row("agent", "a", range(10), 0.9)
    b = _row("agent", "b", range(MIN_SHARED), 0.5)
    c = _row("human", "c", range(5, 5 + MIN_SHARED - 1), 0.7)
    pairs = {(p["a"], p["b"]): p for p in paired_tests([a, b, c], procs)}
    assert set(pairs) == {("a", "b")}  # c shares MIN_SHARED - 1 with a and 1 with b
    assert pairs[("a", "b")]["board_f1"]["mean"] == pytest.approx(0.4)
    out = build([a, Row("agent", "nothing"), c], procs)
    tables = {t["key"]: t for t in out["tables"]}
    assert [r["who"] for r in tables["hexagons_metrics"]["rows"]] == ["a", "c"]
    # Only the second steps carry a level.
    assert [c["label"] for c in tables["hexagons_by_level"]["columns"][2:]] == ["level 1"]
    assert tables["hexagons_by_level"]["rows"][0]["g:level 1"]["n"] == 10


@real
def test_the_section_on_the_released_test_split():
    procs = parse_procedures((DATA / "test.jsonl").read_bytes())
    info = {n: ProcedureInfo(p.category, len(p.steps), [None] * len(p.steps)) for n, p in enumerate(procs)}
    gold, idle = Row("agent", "gold"), Row("baseline", "no action")
    for n, p in enumerate(procs):
        b = metrics.as_array(p.boards)
        for row, hyp in ((gold, b[1:]), (idle, b[:-1])):
            s = metrics.score_arrays(b[:-1], b[1:], b[:-1], hyp)
            row.executions[n].append(np.stack([s[k] for k in metrics.KEYS], 1))
    out = build([gold, idle], info)
    rows = {r["who"]: r for r in out["tables"][0]["rows"]}
    assert rows["gold"]["steps"] == rows["no action"]["steps"] == 453 and rows["gold"]["procedures"] == 62
    # Every step right: no spread, so the effective n is the 62 procedures (Wilson at p = 1, t on
    # 61 df); the old [1, 1] of a bootstrap over procedures was the wrong figure.
    t = scipy.stats.t.ppf(0.975, 61)
    assert all(
        rows["gold"][k]
        == {
            "n": 453,
            "mean": 1.0,
            "low": pytest.approx(62 / (62 + t * t)),
            "high": 1.0,
            "method": "Wilson (effective n, clusters)",
            "unit": "procedure",
            "units": 62,
        }
        for k in metrics.KEYS
    )
    expected = no_action(procs)["mean"]
    assert {k: rows["no action"][k]["mean"] for k in metrics.KEYS} == pytest.approx(expected)
    [pair] = out["tables"][-1]["rows"]
    assert pair["procedures"] == 62 and pair["board_f1"]["mean"] == pytest.approx(1 - expected["board_f1"])
    assert pair["board_f1_p"] == "< 0.001"


def test_random_sign_flips_approach_the_exact_p():
    # 14 procedures: one more than the exact enumeration; enumerate here and compare.
    rng = np.random.default_rng(11)
    a, b, w = rng.random(14), rng.random(14) * 0.9, rng.integers(1, 9, 14).astype(float)
    wd = w * (a - b)
    signs = ((np.arange(1 << 14)[:, None] >> np.arange(14)) & 1) * 2 - 1
    exact = float((np.abs(signs @ wd) >= abs(wd.sum()) - 1e-12).mean())
    assert paired_cluster_difference(a, b, w, n_perm=20000)["p"] == pytest.approx(exact, abs=0.01)
    assert paired_cluster_difference(a[:13], b[:13], w[:13])["p"] == float(
        (np.abs(signs[: 1 << 13, :13] @ wd[:13]) >= abs(wd[:13].sum()) - 1e-12).mean()
    )
