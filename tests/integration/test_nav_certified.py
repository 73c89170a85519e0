"""The navigation leaderboard's certified figures on a hand-worked study (issue 25): six paths,
two speakers (s1, s2) and the human references, two followers per instruction except two
instructions whose second follower is excluded (uneven followers). The followers' paths go
through the assignment engine; their scores and ratings are then set to the values below, so
that every figure can be worked out by hand from the formulas of docs/statistics.md and
`stats.mean_interval`'s docstring:

    per speaker, a column's figure is the mean over its instructions of each instruction's mean
    over its followers; the unit is the path: with instruction means x_g (one per path, G = 6),
    m = mean(x), v = G / (G - 1) * sum (x_g - m)^2 / G^2, n_eff = m (1 - m) / v (G when v = 0),
    and the interval is Wilson's at n_eff with z = t(0.975, G - 1 = 5 df) = 2.5705818:
    centre = (m + z^2 / (2 n)) / (1 + z^2 / n), half = z sqrt(m (1 - m) / n + z^2 / (4 n^2)) /
    (1 + z^2 / n).

A rejected follower dropping out is checked in tests/integration/test_sections_certified.py.
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest
from sqlalchemy import select, update

from app.kinds.navigation.environments import import_house
from app.kinds.navigation.leaderboard import rank_column
from app.studies import assignment, services
from app.studies.models import Annotation, Item, Study
from tests.conftest import make_user
from tests.integration.test_navigation_leaderboard import coop_file, house
from tests.integration.test_sections_certified import _tables

T5 = 2.5705818356363146  # scipy.stats.t.ppf(0.975, 5)

X = None  # an excluded follower
# (category, path 1-6) -> per follower (success, nDTW, rating); X: the follower is excluded.
VALUES = {
    ("human", 1): [(1, 1.0, 4), (1, 1.0, 4)],
    ("human", 2): [(1, 1.0, 3), (1, 1.0, 4)],
    ("human", 3): [(1, 1.0, 4), (1, 1.0, 4)],
    ("human", 4): [(1, 1.0, 3), (1, 1.0, 3)],
    ("human", 5): [(1, 1.0, 4), (1, 1.0, 4)],
    ("human", 6): [(1, 1.0, 4), (1, 1.0, 3)],
    ("s1", 1): [(1, 0.9, 4), (1, 0.9, 3)],
    ("s1", 2): [(1, 0.7, 2), (0, 0.5, 3)],
    ("s1", 3): [(1, 0.8, 4), (1, 0.8, 4)],
    ("s1", 4): [(0, 0.3, 1), (0, 0.3, 1)],
    ("s1", 5): [(1, 0.9, 4), X],
    ("s1", 6): [(0, 0.4, 2), (1, 0.6, 3)],
    ("s2", 1): [(0, 0.2, 1), (0, 0.2, 1)],
    ("s2", 2): [(0, 0.3, 1), X],
    ("s2", 3): [(1, 0.6, 3), (0, 0.4, 2)],
    ("s2", 4): [(0, 0.1, 1), (0, 0.3, 2)],
    ("s2", 5): [(0, 0.3, 2), (1, 0.7, 3)],
    ("s2", 6): [(0, 0.2, 1), (0, 0.2, 1)],
}


def _wilson(m: float, n: float, z: float = T5) -> tuple[float, float]:
    centre = (m + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(m * (1 - m) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if m == 0 else centre - half, 1.0 if m == 1 else centre + half)


def _study(session) -> tuple[Study, dict[tuple[str, int], list[Annotation]]]:
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Certified", bundle_size=6, gold_rate=0.0, annotations_per_item=2)
    study = services.create_study(session, owner, "navigation", s, coop_file(h, n=6), "coop", {"speaker": "s1"})
    more = [
        x
        for x in services.preview_items(
            "navigation", coop_file(h, n=6), "coop", {"speaker": "s2", "with_references": False}
        ).items
        if not x.is_gold
    ]
    assert services.add_items(session, study, more) == 6
    session.commit()
    services.set_state(session, study, "live", owner)
    for w in range(20):  # every follower walks the reference path; the scores are set below
        bundle = assignment.enter(session, study, "prolific", f"f{w}")
        got = 0
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {"path": list(item.reference["path"]), "trace": [], "rating": 4},
                uuid.uuid4().hex,
            )
            got += 1
        if not got:
            break
    anns: dict[tuple[str, int], list[Annotation]] = {}
    for ann, item in session.execute(
        select(Annotation, Item)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Item.is_gold.is_(False))
        .order_by(Annotation.id)
    ):
        anns.setdefault((item.category, int(item.cluster.split(":")[1]) - 50), []).append(ann)
    assert set(anns) == set(VALUES) and all(len(v) == 2 for v in anns.values())
    for key, followers in VALUES.items():
        for ann, value in zip(anns[key], followers):
            if value is None:
                session.execute(update(Annotation).where(Annotation.id == ann.id).values(excluded=True))
                continue
            sr, ndtw, rating = value
            session.execute(
                update(Annotation)
                .where(Annotation.id == ann.id)
                .values(
                    scores={
                        "success": bool(sr),
                        "spl": float(sr),
                        "ndtw": ndtw,
                        "sdtw": sr * ndtw,
                        "ne": 1.0 if sr else 6.0,
                        "path_length": 10.0,
                    },
                    response={**ann.response, "rating": rating},
                )
            )
    session.commit()
    return study, anns


def _instruction_means(cat: str, k: int) -> list[float]:
    return [sum(f[k] for f in VALUES[cat, p] if f) / sum(1 for f in VALUES[cat, p] if f) for p in range(1, 7)]


def test_navigation_certified_figures_by_hand(session):
    study, anns = _study(session)
    tables = _tables(session, study)
    rows = {r["category"]: r for r in tables["navigation_metrics"]["rows"]}
    assert list(rows) == ["human", "s1", "s2"]
    assert (rows["s1"]["items"], rows["s1"]["n"]) == (6, 11) and (rows["s2"]["n"], rows["human"]["n"]) == (11, 12)

    # SR of s1: instruction means 1, 1/2, 1, 0, 1 (one follower left), 1/2: m = 4/6 = 0.666667;
    # squares 4 * (1/3)^2 + 2 * (1/6)^2 = 0.833333, v = 6/5 * 0.833333 / 36 = 0.0277778,
    # n_eff = (2/3)(1/3) / 0.0277778 = 8.0; centre 0.5912749, half 0.3258931:
    # [0.2653818, 0.9171680].
    assert _instruction_means("s1", 0) == [1, 0.5, 1, 0, 1, 0.5]
    sr = rows["s1"]["success"]
    assert sr["n"] == 6 and sr["mean"] == pytest.approx(2 / 3) and sr["method"] == "Wilson (effective n, clusters)"
    assert (sr["low"], sr["high"]) == (
        pytest.approx(0.2653817572490982, abs=1e-9),
        pytest.approx(0.917167980523939, abs=1e-9),
    )
    assert _wilson(2 / 3, 8.0) == (pytest.approx(sr["low"], abs=1e-12), pytest.approx(sr["high"], abs=1e-12))
    # SR of s2: 0, 0, 1/2, 0, 1/2, 0: m = 1/6, squares 4/36 + 2/9 = 0.333333, v = 0.0111111,
    # n_eff = (1/6)(5/6) / 0.0111111 = 12.5: [0.0343143, 0.5295657].
    sr2 = rows["s2"]["success"]
    assert (sr2["low"], sr2["high"]) == (
        pytest.approx(0.03431427992237193, abs=1e-9),
        pytest.approx(0.529565724165896, abs=1e-9),
    )
    # The references: every follower succeeds, no spread: n_eff = 6 paths: [0.4758924, 1].
    hs = rows["human"]["success"]
    assert hs["mean"] == 1.0 and hs["high"] == 1.0 and hs["low"] == pytest.approx(0.47589244010075676, abs=1e-9)

    # nDTW of s1: 0.9, 0.6, 0.8, 0.3, 0.9, 0.5: m = 4.0 / 6 = 0.666667; squares 0.2933333,
    # v = 6/5 * 0.2933333 / 36 = 0.00977778, n_eff = 0.222222 / 0.00977778 = 22.727273;
    # centre 0.6291242, half 0.2268614: [0.4022628, 0.8559856].
    assert _instruction_means("s1", 1) == pytest.approx([0.9, 0.6, 0.8, 0.3, 0.9, 0.5])
    nd = rows["s1"]["ndtw"]
    assert nd["mean"] == pytest.approx(2 / 3) and nd["n"] == 6
    assert (nd["low"], nd["high"]) == (
        pytest.approx(0.40226277297706015, abs=1e-9),
        pytest.approx(0.8559855754207878, abs=1e-9),
    )
    # NE in metres (1 m on a success, 6 m on a failure): s1's instruction means 1, 3.5, 1, 6,
    # 1, 3.5 = 6 - 5 * SR: t on the paths (5 df): 6 - 5 * m +/- t * 5 * sqrt(v) with SR's v.
    ne = rows["s1"]["ne"]
    assert ne["mean"] == pytest.approx(6 - 5 * 2 / 3)
    half = T5 * 5 * math.sqrt(6 / 5 * (5 / 6) / 36)
    assert (ne["low"], ne["high"]) == (pytest.approx(ne["mean"] - half), pytest.approx(ne["mean"] + half))
    assert ne["method"] == "t on clusters (cluster-robust variance, G - 1 df)"
    # Path length: 10 m everywhere, no spread: the mean itself, and the method says so.
    pl = rows["s1"]["path_length"]
    assert pl["low"] == pl["mean"] == pl["high"] == 10.0 and pl["method"].startswith("no spread")

    # Ranks by SR over the six paths all three share: human >= s1 on every path (equal only in
    # resamples drawn from paths 1, 3, 5 alone: (1/2)^6 = 1.6% < 2.5%) and s1 >= s2 on every
    # path (equal only on path 4): a clear order.
    assert [rows[c]["rank"] for c in ("human", "s1", "s2")] == ["1", "2", "3"]

    # Paired against the references, per path: scipy's t-test, and Holm across s1 and s2 on the
    # same metric equals statsmodels'.
    from scipy.stats import ttest_rel
    from statsmodels.stats.multitest import multipletests

    paired = {(r["category"], r["metric"]): r for r in tables["navigation_paired"]["rows"]}
    for k, label in ((0, "SR"), (1, "nDTW"), (2, "Rating (1-4)")):
        human = _instruction_means("human", k)
        ps = []
        for cat in ("s1", "s2"):
            mine = _instruction_means(cat, k)
            ref = ttest_rel(mine, human)
            row = paired[cat, label]
            assert row["p"] == pytest.approx(float(ref.pvalue), rel=1e-9), (cat, label)
            d = np.array(mine) - np.array(human)
            assert row["difference"]["mean"] == pytest.approx(d.mean())
            assert row["cohen_dz"] == round(d.mean() / d.std(ddof=1), 3)  # rows.effect_size_cell
            ps.append(float(ref.pvalue))
        holm = multipletests(ps, method="holm")[1]
        assert paired["s1", label]["p_holm"] == pytest.approx(holm[0], rel=1e-9)
        assert paired["s2", label]["p_holm"] == pytest.approx(holm[1], rel=1e-9)
    # nDTW of s1 - human per path: -0.1, -0.4, -0.2, -0.7, -0.1, -0.5: mean -1/3, sd 0.2422120,
    # t interval (5 df): -0.333333 +/- 2.5705818 * 0.2422120 / sqrt(6) = [-0.5875193, -0.0791474].
    diff = paired["s1", "nDTW"]["difference"]
    assert diff["method"] == "t on paired differences"
    assert (diff["low"], diff["high"]) == (pytest.approx(-0.5875193, abs=1e-6), pytest.approx(-0.0791474, abs=1e-6))

    # Agreement between followers: alpha over the 16 instructions with two valid ratings;
    # the rating ordinal, success nominal, each equal to the krippendorff package's alpha on
    # the reliability matrix (first and second follower x the 18 instructions, nan where a
    # follower was excluded).
    import krippendorff

    agree = {r["question"].split(":")[0]: r for r in tables["navigation_followers_agreement"]["rows"]}
    keys = sorted(VALUES)
    for q, k, level in (("Rating", 2, "ordinal"), ("Success", 0, "nominal")):
        matrix = np.array(
            [[VALUES[key][j][k] if VALUES[key][j] else np.nan for key in keys] for j in (0, 1)], dtype=float
        )
        want = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        row = agree[q]
        assert row["level"] == level and row["instructions"] == 16
        assert row["alpha"]["mean"] == pytest.approx(want, rel=1e-12), q
        assert row["alpha"]["n"] == 16 and row["alpha"]["low"] <= row["alpha"]["mean"] <= row["alpha"]["high"]
        assert row["alpha"]["method"] == f"bootstrap over clusters of items (percentile), {level}"
    # Ordinal is not nominal: the rating's ordinal alpha differs from its nominal one.
    matrix = np.array([[VALUES[key][j][2] if VALUES[key][j] else np.nan for key in keys] for j in (0, 1)])
    assert agree["Rating"]["alpha"]["mean"] != pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    )

    # Fewer than 5 instructions with two valid ratings: "too few", no alpha.
    seconds = [anns[key][1].id for key in keys if VALUES[key][1] is not None][4:]
    session.execute(update(Annotation).where(Annotation.id.in_(seconds)).values(excluded=True))
    session.commit()
    agree = {r["question"].split(":")[0]: r for r in _tables(session, study)["navigation_followers_agreement"]["rows"]}
    assert agree["Rating"]["alpha"] is None and agree["Rating"]["instructions"] == 4
    assert agree["Rating"]["remark"].startswith("too few: 4 instructions")


def test_rank_labels_clear_and_tied():
    # a and b identical on every path: tied, sharing ranks 1-2; c below both on every path.
    per_path = {
        "a": {"p1": [1.0], "p2": [0.0], "p3": [1.0], "p4": [1.0], "p5": [1.0], "p6": [1.0]},
        "b": {"p1": [1.0], "p2": [0.0], "p3": [1.0], "p4": [1.0], "p5": [1.0], "p6": [1.0]},
        "c": {"p1": [0.0], "p2": [0.0], "p3": [0.0], "p4": [0.0], "p5": [0.0], "p6": [0.0], "p9": [1.0]},
    }
    labels, shared, ties = rank_column(per_path, ["a", "b", "c"])
    assert shared == 6  # p9 is c's alone: left out of the ranking
    assert labels == {"a": "1-2", "b": "1-2", "c": "3"} and ties == [["a", "b"]]
    # Four shared paths resample to too few orders: nobody is ranked above anybody.
    four = {w: {p: v for p, v in paths.items() if p in ("p1", "p2", "p3", "p4")} for w, paths in per_path.items()}
    too_few = {"text": "—", "reason": "4 paths shared by every ranked system: fewer than 5 rank nobody"}
    assert rank_column(four, ["a", "b", "c"])[0] == {"a": too_few, "b": too_few, "c": too_few}
    # One speaker: no ranking.
    assert rank_column({"a": per_path["a"]}, ["a"])[0] == {"a": None}
