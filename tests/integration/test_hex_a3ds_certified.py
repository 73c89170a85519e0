"""Certified figures of the Hexagons and A3DS sections (issue 25), worked by hand.

Hexagons: four procedures (P1, P2 of 2 steps; P3, P4 of 3), two agents, A with every procedure
and B lacking P4, and a baseline that scores 0 everywhere. Every cell is stats.mean_interval of
the step values clustered by procedure; its docstring's formula, for G clusters with totals T_g
and sizes n_g, N steps, mean m:

    v = G / (G - 1) * sum_g (T_g - m n_g)^2 / N^2,   n_eff = m (1 - m) / v (G if v = 0),
    Wilson's interval for the share m of n_eff trials with z = t_{0.975, G - 1}.

Board F1 per step (every metric set to the same value here):

    A: P1 1, 1 | P2 1, 1/2 | P3 1, 1, 1/2 | P4 1/2, 1/2, 1/2   totals 2, 1.5, 2.5, 1.5
    B: P1 1, 1/2 | P2 1, 1 | P3 1/2, 1/2, 1/2 | P4 (lacking: 0, 0, 0)  totals 1.5, 2, 1.5, 0

A: m = 7.5 / 10 = 0.75; residuals 0.5, 0, 0.25, -0.75, squares 0.875; v = 4/3 * 0.875 / 100
   = 0.0116667; n_eff = 0.1875 / v = 16.0714; z = t_3 = 3.182446: [0.367311, 0.939403].
B: m = 5 / 10 = 0.5 (over its 7 executed steps it would be 5/7 = 0.714: the old figure);
   residuals 0.5, 1, 0, -1.5, squares 3.5; v = 0.0466667; n_eff = 5.357143: [0.095635, 0.904365].
Baseline: ten zeros, no spread: n_eff = G = 4, Wilson at 0: [0, t^2 / (4 + t^2)] = [0, 0.716874]
   (the "No action" row's zero-width interval is gone).

Ranks (1000 bootstrap resamples of the 4 procedures): A - B per procedure is 0.5, -0.5, 1, 1.5
(times the common scale); B is at or above A when the draws' sum is <= 0: four P2, three P2 and
one P1 or P3, two P2 and two P1: (1 + 4 + 4 + 6) / 256 = 0.059 > 0.025, so both span "1-2";
the baseline ties B only when all four draws are P4, 1/256 < 0.025: "3".

A3DS: one captioner, pair P1 answered by 3 listeners (right, wrong, wrong) and P2 by 1
(right). Answer share 2/4 = 0.5 (the old figure); mean over pairs (1/3 + 1) / 2 = 2/3, with
stats.mean_interval over the 2 pairs: sample variance 2/9, v = 1/9, n_eff = 2, z = t_1 =
12.706205: [0.005446, 0.998633].
"""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from app.kinds.hexagons import metrics
from app.kinds.hexagons.leaderboard import ProcedureInfo, Row, _p, abstraction_agreement, build, paired_tests
from app.leaderboards.stats import paired_cluster_difference
from app.studies import services
from tests.conftest import make_user
from tests.integration.test_sections_certified import _a3ds_rows, _a3ds_study, _fill_order, _listen

K = len(metrics.KEYS)
PROCS = {
    1: ProcedureInfo("c", 2, [None] * 2),
    2: ProcedureInfo("c", 2, [None] * 2),
    3: ProcedureInfo("d", 3, [None] * 3),
    4: ProcedureInfo("d", 3, [None] * 3),
}
A = {1: [1, 1], 2: [1, 0.5], 3: [1, 1, 0.5], 4: [0.5, 0.5, 0.5]}
B = {1: [1, 0.5], 2: [1, 1], 3: [0.5, 0.5, 0.5]}


def _row(section: str, who: str, steps: dict[int, list[float]]) -> Row:
    r = Row(section, who)
    for i, values in steps.items():
        r.executions[i].append(np.repeat(np.array(values, dtype=float)[:, None], K, axis=1))
    return r


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return centre - half, centre + half


def _rows():
    return [
        _row("agent", "A", A),
        _row("agent", "B", B),
        _row("baseline", "zero", {i: [0.0] * p.steps for i, p in PROCS.items()}),
    ]


def test_hexagons_hand_worked_means_intervals_coverage_and_ranks():
    out = build(_rows(), PROCS)
    table = out["tables"][0]
    rows = {r["who"]: r for r in table["rows"]}
    t3 = scipy.stats.t.ppf(0.975, 3)
    a, b, zero = rows["A"]["board_f1"], rows["B"]["board_f1"], rows["zero"]["board_f1"]
    assert (a["n"], a["mean"], a["method"]) == (10, 0.75, "Wilson (effective n, clusters)")
    assert (a["low"], a["high"]) == pytest.approx(_wilson(0.75, 0.1875 / (4 / 3 * 0.875 / 100), t3))
    assert (a["low"], a["high"]) == pytest.approx((0.367311, 0.939403), abs=1e-6)
    # B lacks P4: scored over all 10 steps, P4 counting 0; coverage 3 of 4 beside.
    assert (b["n"], b["mean"]) == (10, 0.5) and rows["B"]["coverage"] == 0.75 and rows["B"]["procedures"] == 3
    assert (b["low"], b["high"]) == pytest.approx(_wilson(0.5, 0.25 / (4 / 3 * 3.5 / 100), t3))
    assert (b["low"], b["high"]) == pytest.approx((0.095635, 0.904365), abs=1e-6)
    assert (zero["mean"], zero["low"]) == (0.0, 0.0) and zero["high"] == pytest.approx(t3**2 / (4 + t3**2))
    assert zero["high"] == pytest.approx(0.716874, abs=1e-6)
    # Four procedures resample to too few orders to rank anyone (stats.MIN_RANK_UNITS = 5).
    assert [rows[w]["rank"] for w in ("A", "B", "zero")] == [
        {"text": "—", "reason": "4 procedures shared by every ranked system: fewer than 5 rank nobody"}
    ] * 3
    assert {c["label"] for c in table["columns"]} >= {"Rank (95%)", "Coverage"}
    assert "[0, 1]" in table["title"] and "the unit resampled is the procedure, never the step" in table["note"]
    # The breakdown by category uses the same rule: B's category d is P3 (1.5) and P4 (0) over 6 steps.
    cats = {r["who"]: r for r in next(t for t in out["tables"] if t["key"] == "hexagons_by_category")["rows"]}
    assert cats["B"]["g:category: d"]["n"] == 6 and cats["B"]["g:category: d"]["mean"] == pytest.approx(0.25)


def test_hexagons_paired_effect_and_holm_against_statsmodels():
    rows = _rows()
    pairs = {(p["a"], p["b"]): p for p in paired_tests(rows, PROCS, min_shared=3)}
    assert set(pairs) == {("A", "B"), ("A", "zero"), ("B", "zero")}
    ab = pairs["A", "B"]
    # On the shared P1-P3, step-weighted: (2 * 0.25 + 2 * -0.25 + 3 * 1/3) / 7 = 1/7.
    assert ab["procedures"] == 3 and ab["board_f1"]["mean"] == pytest.approx(1 / 7)
    # Effect on per-procedure means: A 1, 3/4, 5/6; B 3/4, 1, 1/2: differences 1/4, -1/4, 1/3,
    # mean 1/9, t interval 1/9 -/+ t_2 sd / sqrt(3) = [-0.672622, 0.894844], d_z = 0.352180.
    d = np.array([0.25, -0.25, 1 / 3])
    half = scipy.stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    eff = ab["board_f1_effect"]
    assert (eff["n"], eff["mean"]) == (3, pytest.approx(1 / 9))
    assert (eff["low"], eff["high"]) == pytest.approx((1 / 9 - half, 1 / 9 + half))
    assert (eff["low"], eff["high"]) == pytest.approx((-0.672622, 0.894844), abs=1e-6)
    assert ab["board_f1_dz"] == 0.352
    # Holm across the table's three pairs, per metric, against statsmodels on the exact
    # sign-flip p values (exact with 3-4 procedures: no seed involved).
    means = {r.who: {i: np.concatenate(v)[:, 0].mean() for i, v in r.executions.items()} for r in rows}
    raw = []
    for x, y in pairs:
        shared = sorted(means[x].keys() & means[y].keys())
        raw.append(
            paired_cluster_difference(
                [means[x][i] for i in shared], [means[y][i] for i in shared], [PROCS[i].steps for i in shared]
            )["p"]
        )
    # In table order (most procedures first): A - zero, 4 positive differences: 2 / 16; A - B,
    # step-weighted differences 0.5, -0.5, 1: 6 of the 8 sign patterns reach |1|: 0.75; B - zero,
    # 3 positive: 2 / 8. Holm: 0.125 * 3 = 0.375, 0.25 * 2 = 0.5, 0.75 * 1 = 0.75.
    assert list(pairs) == [("A", "zero"), ("A", "B"), ("B", "zero")]
    assert raw == pytest.approx([0.125, 0.75, 0.25])
    expected = multipletests(raw, method="holm")[1]
    for (x, y), p_raw, p_holm in zip(pairs, raw, expected):
        assert pairs[x, y]["board_f1_p"] == _p(p_raw) and pairs[x, y]["board_f1_holm"] == _p(p_holm)
    assert [pairs[k]["board_f1_holm"] for k in pairs] == ["0.375", "0.750", "0.500"]


def test_hexagons_holm_family_leaves_single_annotators_out():
    """A single annotator's pairs describe people: they get no Holm p and do not inflate the
    agents' and baselines' (the same three adjusted p as without the annotator)."""
    person = _row("human", "ann-1", A)
    pairs = {(p["a"], p["b"]): p for p in paired_tests(_rows() + [person], PROCS, min_shared=3)}
    assert [pairs[k]["board_f1_holm"] for k in (("A", "zero"), ("A", "B"), ("B", "zero"))] == [
        "0.375",
        "0.750",
        "0.500",
    ]
    with_person = [k for k in pairs if "ann-1" in k]
    assert with_person and all(pairs[k]["board_f1_holm"] is None and pairs[k]["board_f1_p"] for k in with_person)


def test_hexagons_abstraction_alpha_is_ordinal_with_a_procedure_bootstrap():
    # Three executors label the levels of two procedures' steps; one leaves a step unlabelled.
    labels = {1: [[0, 1], [0, 2], [1, 1]], 2: [[2, 3, 3], [2, 3, None], [3, 3, 2]], 3: [[1], [1]]}
    row = abstraction_agreement(labels, n_boot=200)
    units = [[0, 0, 1], [1, 2, 1], [2, 2, 3], [3, 3, 3], [3, np.nan, 2], [1, 1, np.nan]]
    expected = krippendorff.alpha(reliability_data=np.array(units, dtype=float).T, level_of_measurement="ordinal")
    assert row["alpha"]["mean"] == pytest.approx(expected) and row["level"] == "ordinal"
    assert (row["procedures"], row["steps"], row["labels"]) == (3, 6, 16)
    assert row["alpha"]["low"] <= row["alpha"]["mean"] <= row["alpha"]["high"]
    assert "procedures" in row["alpha"]["method"]
    assert abstraction_agreement({1: [[0, 1]]}) is None  # one executor: nothing pairable
    tables = build(_rows(), PROCS, agreement=row)["tables"]
    assert tables[-1]["key"] == "hexagons_agreement" and "ordinal" in tables[-1]["title"]


def test_a3ds_accuracy_is_the_mean_over_pairs_not_the_share_of_answers(session):
    owner = make_user(session, "researcher")
    study, it = _a3ds_study(session, owner, {"a": (0, 1)}, per_item=3)
    _fill_order(session, [it["a", 1], it["a", 2]])
    services.set_state(session, study, "live", owner)
    for n, right in enumerate((True, False, False)):  # three listeners on P1, one right
        _listen(session, study, f"p1-{n}", it["a", 1], right)
    _listen(session, study, "p2-0", it["a", 2], True)  # one listener on P2, right

    tables, acc, _ = _a3ds_rows(session, study)
    row = acc["a"]
    assert (row["items"], row["answers"], row["coverage"]) == (2, 4, 1.0)
    # The old figure: 2 right of 4 answers = 0.5. Each pair once: (1/3 + 1) / 2 = 2/3.
    assert row["accuracy"]["mean"] == pytest.approx(2 / 3) and row["accuracy"]["n"] == 2
    t1 = scipy.stats.t.ppf(0.975, 1)
    assert (row["accuracy"]["low"], row["accuracy"]["high"]) == pytest.approx(_wilson(2 / 3, 2, t1))
    assert (row["accuracy"]["low"], row["accuracy"]["high"]) == pytest.approx((0.005446, 0.998633), abs=1e-6)
    assert row["accuracy"]["method"] == "Wilson (effective n)"
    # Per z: each pair in its own z column, its share once.
    zs = {str(it["a", k].reference["metrics"]["z"]): [] for k in (1, 2)}
    for k, share in ((1, 1 / 3), (2, 1.0)):
        zs[str(it["a", k].reference["metrics"]["z"])].append(share)
    for z, shares in zs.items():
        assert row[f"z{z}"]["mean"] == pytest.approx(sum(shares) / len(shares)) and row[f"z{z}"]["n"] == len(shares)
    assert "averaged over pairs" in tables["a3ds_accuracy"]["title"]
    assert "generic table" in tables["a3ds_accuracy"]["note"]


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_section_reads_the_executors_levels_from_their_answers(session):
    # Two executors label both steps of both procedures: A 2, 0 and B 2, 1 on each (the
    # consolidation test's study). The section's alpha is the ordinal alpha of those four steps.
    from app.kinds.hexagons.leaderboard import section
    from tests.integration.test_hex_consolidation import disagreement_study

    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner, label_abstraction=True)
    tables = {t["key"]: t for t in section(session, study)["tables"]}
    [row] = tables["hexagons_agreement"]["rows"]
    units = np.array([[2, 0, 2, 0], [2, 1, 2, 1]], dtype=float)  # executors x steps
    assert (row["procedures"], row["steps"], row["labels"]) == (2, 4, 8)
    assert row["alpha"]["mean"] == pytest.approx(
        krippendorff.alpha(reliability_data=units, level_of_measurement="ordinal")
    )


def test_a3ds_two_captions_of_one_pair_pool_their_listeners():
    """A captioner may caption one pair twice (the import allows it): both captions' listeners
    count, none is dropped. P1: caption 1, 2 of 2 right; caption 2, 0 of 2: 2 of 4 = 0.5 (the
    last caption alone said 0). P2: 1 of 1."""
    from app.kinds.a3ds.leaderboard import accuracy_figures

    def item(pair, right, n):
        return {"pair": pair, "right": right, "n": n, "ref": {"captioner": "a", "metrics": {"z": 1}}}

    names, per, everyone = accuracy_figures([item("P1", 2, 2), item("P1", 0, 2), item("P2", 1, 1)])
    assert names == ["a"] and per["a"]["shares"] == {"P1": (0.5, "1"), "P2": (1.0, "1")}
