"""What the sampled surviving mutants of the leaderboard modules changed (issue 25, item 7;
docs/testing.md, "Mutation testing": the sample of 40 mutants per module), each checked against
a hand-worked figure a user sees on the leaderboard page or in the API."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.studies import services
from app.studies.models import Item, Study
from tests.conftest import make_user
from tests.integration.test_sections_certified import _fill_order, _listen, _tables

# ---- A3DS ------------------------------------------------------------------------------------

FIVE_PAIRS = [(12500 + 10 * k, 12501 + 10 * k) for k in range(5)]


def _a3ds_five_pairs(session, owner) -> tuple[Study, dict]:
    """Captioners a and b each caption the five pairs; one listener per caption."""
    lines = [
        {"target": t, "distractor": d, "caption": "a small ball", "captioner": who}
        for who in ("a", "b")
        for t, d in FIVE_PAIRS
    ]
    s = services.StudySettings(title="Ranks", bundle_size=1, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "a3ds", s, "\n".join(map(json.dumps, lines)).encode(), "captions")
    items = {}
    for item in session.scalars(select(Item).where(Item.study_id == study.id)):
        pair = FIVE_PAIRS.index((item.reference["target_id"], item.reference["distractor_id"])) + 1
        items[item.reference["captioner"], pair] = item
    return study, items


def test_a3ds_ranks_order_the_captioners_by_their_share_over_five_pairs(session):
    """Listeners pick the target for every one of a's captions and the other picture for every
    one of b's: a's share is 1 on each of the five pairs, b's 0, so every bootstrap resample of
    the pairs puts a first: ranks "1" and "2" (not "1-2": the pairs' z, which both captioners
    share, would tie them)."""
    owner = make_user(session, "researcher")
    study, it = _a3ds_five_pairs(session, owner)
    order = [it["a", p] for p in range(1, 6)] + [it["b", p] for p in range(1, 6)]
    _fill_order(session, order)
    services.set_state(session, study, "live", owner)
    for k, item in enumerate(order):
        _listen(session, study, f"l{k}", item, item.reference["captioner"] == "a")
    tables = _tables(session, study)
    acc = {r["captioner"]: r for r in tables["a3ds_accuracy"]["rows"]}
    assert (acc["a"]["accuracy"]["mean"], acc["b"]["accuracy"]["mean"]) == (1.0, 0.0)
    assert (acc["a"]["accuracy"]["n"], acc["b"]["accuracy"]["n"]) == (5, 5)
    assert (acc["a"]["rank"], acc["b"]["rank"]) == ("1", "2")
    assert [r["captioner"] for r in tables["a3ds_accuracy"]["rows"]] == ["a", "b"]
    # Paired over the five pairs: every difference a - b is 1: mean 1, no spread.
    [paired] = tables["a3ds_paired"]["rows"]
    assert (paired["a"], paired["b"], paired["pairs"]) == ("a", "b", 5)
    assert paired["diff"]["mean"] == pytest.approx(1.0)


# ---- navigation ------------------------------------------------------------------------------


def test_navigation_the_studys_baseline_speaker_and_spl_equal_to_sr(session):
    """A study whose baseline speaker is "toy" (kind setting "baseline"), not the human
    references: toy's row comes first and the paired table compares the human references with
    toy. Every follower walks the reference path, the shortest: SPL equals SR (1) in both rows,
    and the metrics table's note says so."""
    from app.kinds.navigation.environments import import_house
    from tests.integration.test_navigation_leaderboard import coop_file, house
    from tests.integration.test_sections_certified import _follow, _nav_items

    owner = make_user(session, "researcher")
    h = house()
    import_house(session, h)
    s = services.StudySettings(title="Baseline", bundle_size=1, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(
        session,
        owner,
        "navigation",
        s,
        coop_file(h, n=2),
        "coop",
        {"speaker": "toy", "with_references": True, "baseline": "toy"},
    )
    it = _nav_items(session, study)
    order = [it["toy", "A"], it["human", "A"], it["toy", "B"], it["human", "B"]]
    _fill_order(session, order)
    services.set_state(session, study, "live", owner)
    for k, item in enumerate(order):
        _follow(session, study, f"f{k}", item, "exact", 4)
    tables = _tables(session, study)
    metrics = tables["navigation_metrics"]
    assert [r["category"] for r in metrics["rows"]] == ["toy", "human"]  # the baseline first
    assert all(r["success"]["mean"] == r["spl"]["mean"] == 1.0 for r in metrics["rows"])
    assert "SPL equals SR in every row here" in metrics["note"]
    paired = tables["navigation_paired"]
    assert paired["title"].startswith("Paired differences against toy")
    assert {r["category"] for r in paired["rows"]} == {"human"}
    sr = next(r for r in paired["rows"] if r["metric"] == "SR")
    assert (sr["mean_diff"], sr["n_paths"]) == (0.0, 2)


# ---- STS -------------------------------------------------------------------------------------


def test_sts_tables_are_shown_whole(session):
    """The STS section of the three-agent demo study, every continuation marked as the simulator
    says: every table has its title, note, columns (each with a key, a label and a help) and
    rows, and no column the page would show empty."""
    from tests.integration.test_sections_shapes import assert_shown
    from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents

    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, _three_agents())
    _mark_all(session, study)
    tables = _tables(session, study)
    assert {"sts_agents", "sts_scenarios", "sts_correlation", "sts_annotators"} <= tables.keys()
    assert_shown(tables)
