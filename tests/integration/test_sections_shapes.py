"""What the page shows of each kind's leaderboard section (issue 25, item 7; docs/testing.md,
"Mutation testing"): every table of the navigation, A3DS and Hexagons sections, on a small
study with data, has a title, a note, columns with a key and a label, and no column the page
would show empty (each column's key is in some row); every estimate names its method. Then the
figures the sampled surviving mutants changed, each against a hand-worked value: the tie note
of tied speakers, the path as the unit of an instruction's interval, Holm's adjusted p, no
rank for a lone captioner, A3DS's z columns, Hexagons' "< 0.001", the rule-based baseline, the
study's score metric, the breakdown's column labels and the executors' abstraction alpha."""

from __future__ import annotations

import dataclasses
import json
import uuid

import numpy as np
import pytest

from app.leaderboards import stats
from app.studies import assignment, services
from app.studies.models import Item
from tests.conftest import make_user
from tests.integration.test_hex_consolidation import disagreement_study
from tests.integration.test_hex_rule_baseline import ONE, TWO
from tests.integration.test_hex_rule_baseline import _line as _rule_line
from tests.integration.test_navigation_leaderboard import coop_file, house
from tests.integration.test_sections_certified import _a3ds_study, _fill_order, _listen, _nav_study, _tables


def _estimates(value):
    """The estimates (dicts with a mean and an interval) in a cell, however nested."""
    if isinstance(value, dict):
        if {"mean", "low", "high"} <= value.keys():
            yield value
        else:
            for v in value.values():
                yield from _estimates(v)


def assert_shown(tables: dict[str, dict]) -> None:
    """Every table as the page renders it: a title, a note, columns each with a key, a label
    and a help, rows; with rows, each column's key in at least one row (else the page shows the
    column empty); every estimate names its method (the page's tooltip)."""
    assert tables
    for key, t in tables.items():
        assert isinstance(t.get("title"), str) and t["title"].strip(), key
        assert isinstance(t.get("note"), str) and t["note"].strip(), key
        assert isinstance(t.get("rows"), list) and t["rows"], key  # a study with data: rows
        assert t.get("columns"), key
        for c in t["columns"]:
            assert isinstance(c.get("key"), str) and c["key"], (key, c)
            assert isinstance(c.get("label"), str) and c["label"].strip(), (key, c)
            # The page puts each column's help beside its header (one sentence: what it is).
            assert isinstance(c.get("help"), str) and c["help"].strip(), (key, c)
            assert any(c["key"] in r for r in t["rows"]), (key, c["key"])  # an empty column
        for r in t["rows"]:
            for cell in r.values():
                for est in _estimates(cell):
                    assert isinstance(est.get("method"), str) and est["method"], (key, est)


# ---- navigation ------------------------------------------------------------------------------


def _nav_with_two_toy_instructions_on_path_a(session):
    """Paths A and B; the toy speaker has two instructions of path A (the second a copy of the
    first) and one of B, the human references one of each. One follower per instruction:
    toy A (both) at the goal, toy B stays at the start; the references at the goal."""
    owner = make_user(session, "researcher")
    study, it = _nav_study(session, owner, per_item=1, speaker="toy")
    specs = services.preview_items(
        "navigation", coop_file(house(), n=2), "coop", {"speaker": "toy", "with_references": False}
    ).items
    [a] = [s for s in specs if not s.is_gold and s.cluster == it["toy", "A"].cluster]
    assert services.add_items(session, study, [dataclasses.replace(a, external_id="toy:second-of-A")]) == 1
    session.commit()
    services.set_state(session, study, "live", owner)
    path_a = it["toy", "A"].cluster
    for k in range(5):
        bundle = assignment.enter(session, study, "prolific", f"f{k}")
        lease = assignment.next_item(session, study, bundle.id)
        item = session.get(Item, lease.item_id)
        exact = item.category == "human" or item.cluster == path_a
        ref = item.reference["path"]
        assignment.submit(
            session,
            study,
            bundle.id,
            lease.id,
            {"path": list(ref) if exact else [ref[0]], "trace": [], "rating": 3},
            uuid.uuid4().hex,
        )
    assert assignment.next_item(session, study, assignment.enter(session, study, "prolific", "late").id) is None
    return study, path_a, it["toy", "B"].cluster


def test_navigation_tables_are_shown_whole_ties_are_named_and_the_path_is_the_unit(session):
    study, path_a, path_b = _nav_with_two_toy_instructions_on_path_a(session)
    tables = _tables(session, study)
    assert {"navigation_metrics", "navigation_paired"} <= tables.keys()
    assert_shown(tables)
    metrics = tables["navigation_metrics"]
    rows = {r["category"]: r for r in metrics["rows"]}
    # Two paths, under the 5 units a rank interval needs: no ranking, "—" with the reason (the
    # rule every kind's rank column follows: app/leaderboards/rows.py rank_cells), and the note says so.
    too_few = {"text": "—", "reason": "2 paths shared by every ranked system: fewer than 5 rank nobody"}
    assert (rows["human"]["rank"], rows["toy"]["rank"]) == (too_few, too_few)
    assert '"—", no ranking (2 paths shared by every ranked system: fewer than 5 rank nobody)' in metrics["note"]
    # toy's SR: A 1, A 1, B 0 over its 3 instructions = 2/3; the unit of the interval is the
    # path (the two path-A instructions are one cluster), not the instruction.
    toy = rows["toy"]["success"]
    assert (rows["toy"]["items"], rows["toy"]["n"]) == (3, 3)
    assert toy["mean"] == pytest.approx(2 / 3)
    by_path = stats.mean_interval([1.0, 1.0, 0.0], [path_a, path_a, path_b]).as_dict()
    by_instruction = stats.mean_interval([1.0, 1.0, 0.0], ["1", "2", "3"]).as_dict()
    assert (by_path["low"], by_path["high"]) != pytest.approx((by_instruction["low"], by_instruction["high"]))
    assert (toy["low"], toy["high"]) == pytest.approx((by_path["low"], by_path["high"]))
    # The paired table: toy's path means (A 1, B 0) against the references' (1, 1): -1/2.
    paired = {(r["category"], r["metric"]): r for r in tables["navigation_paired"]["rows"]}
    assert paired["toy", "SR"]["mean_diff"] == pytest.approx(-0.5) and paired["toy", "SR"]["n_paths"] == 2


# ---- A3DS ------------------------------------------------------------------------------------

# One listener per item: right (1) or wrong (0) on P1, P2, P3.
A3DS_PICKS = {"a": (1, 1, 1), "b": (1, 0, 0), "c": (0, 0, 1)}


def a3ds_picked_study(session):
    """A live A3DS study of three captioners on three pairs, one listener per item picking as
    A3DS_PICKS says (used by the leaderboard tests that read A3DS's tables); and its items in
    the order listeners answered them."""
    owner = make_user(session, "researcher")
    study, it = _a3ds_study(session, owner, {who: (0, 1, 2) for who in A3DS_PICKS}, per_item=1)
    order = [it[who, p] for who in A3DS_PICKS for p in (1, 2, 3)]
    _fill_order(session, order)
    services.set_state(session, study, "live", owner)
    for n, item in enumerate(order):
        who, pair = next(k for k, v in it.items() if v.id == item.id)
        _listen(session, study, f"l{n}", item, bool(A3DS_PICKS[who][pair - 1]))
    return study, order


def test_a3ds_tables_are_shown_whole_with_holm_p_and_z_columns(session):
    study, order = a3ds_picked_study(session)
    tables = _tables(session, study)
    assert {"a3ds_accuracy", "a3ds_metrics", "a3ds_correlation", "a3ds_paired"} <= tables.keys()
    assert_shown(tables)

    # One z column per number of differing features among the pairs, "z = <that number>".
    zs = sorted({str(i.reference["metrics"]["z"]) for i in order})
    assert all(z.isdigit() for z in zs)
    acc = tables["a3ds_accuracy"]
    assert [c["label"] for c in acc["columns"] if c["key"].startswith("z")] == [f"z = {z}" for z in zs]
    for row in acc["rows"]:
        assert sum(row[f"z{z}"]["n"] for z in zs) == 3  # each pair in one z column

    # Paired, a minus b over P1-P3: a - b = (0, 1, 1) and a - c = (1, 1, 0): mean 2/3, sd
    # 1/sqrt(3), t = 2 on 2 df, p = 1 - 2/sqrt(6); b - c = (1, 0, -1): t = 0, p = 1. Holm over
    # the three: the two smallest 3p (the second's 2p is below the first's 3p), then 1.
    paired = {(r["a"], r["b"]): r for r in tables["a3ds_paired"]["rows"]}
    assert list(paired) == [("a", "b"), ("a", "c"), ("b", "c")]
    # Three pairs are under the 5 units an interval needs: the mean difference shows "too few
    # for an interval", so d_z, p and Holm p (the interval's dual) are "—" with the reason too.
    too_few = {"text": "—", "reason": "n = 3: too few for a test"}
    assert all(paired[k][c] == too_few for k in paired for c in ("d_z", "p", "p_holm"))


def test_a3ds_a_lone_captioner_has_no_rank(session):
    owner = make_user(session, "researcher")
    study, it = _a3ds_study(session, owner, {"solo": (0, 1)}, per_item=1)
    _fill_order(session, [it["solo", 1], it["solo", 2]])
    services.set_state(session, study, "live", owner)
    _listen(session, study, "l1", it["solo", 1], True)
    _listen(session, study, "l2", it["solo", 2], False)
    tables = _tables(session, study)
    [row] = tables["a3ds_accuracy"]["rows"]
    assert row["captioner"] == "solo" and row["accuracy"]["mean"] == pytest.approx(0.5)
    assert row["rank"] is None  # nothing to rank against
    assert "a3ds_paired" not in tables


# ---- Hexagons --------------------------------------------------------------------------------


def hex_two_agents_study(session):
    """Eleven procedures whose steps the rule-based executor reads (step 1 "In the first
    column, color the 1st tile red" paints tile 0; step 2 "tile 1 blue" names no column, so
    it paints nothing), scored by action F1; two agents: "copier" leaves step 2 undone,
    "painter" paints both steps right."""
    owner = make_user(session, "researcher")
    data = "\n".join(_rule_line(i) for i in range(1, 12)).encode()
    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Hex", bundle_size=11, gold_rate=0.0, annotations_per_item=1),
        data,
        "procedures",
        {"score_metric": "action_f1"},
    )
    for name, second in (("copier", ONE), ("painter", TWO)):
        agent = services.register_agent(session, owner, "hexagons", name, "1")
        services.import_agent_outputs(
            session,
            study,
            agent,
            "\n".join(
                json.dumps({"index": i, "step": k, "board": b})
                for i in range(1, 12)
                for k, b in ((1, ONE), (2, second))
            ).encode(),
        )
    return study


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_tables_are_shown_whole_with_the_studys_score_metric(session):
    study = hex_two_agents_study(session)
    tables = _tables(session, study)
    assert {"hexagons_metrics", "hexagons_by_category", "hexagons_by_step", "hexagons_paired"} <= tables.keys()
    assert_shown(tables)

    rows = {r["who"]: r for r in tables["hexagons_metrics"]["rows"]}
    rule = "Rule-based (paper's paint(position, colour) matcher)"
    assert list(rows) == ["copier v1", "painter v1", "No action (paints nothing)", rule]
    # Board F1 per step: copier and the rule 1 then 2/3 (tile 1 missing: P 1, R 1/2);
    # painter 1, 1; No action 0, 2/3. Action F1: copier and the rule 1 then 0; painter 1, 1;
    # No action 0, 0.
    assert [rows[w]["board_f1"]["mean"] for w in rows] == pytest.approx([5 / 6, 1, 1 / 3, 5 / 6])
    assert [rows[w]["action_f1"]["mean"] for w in rows] == pytest.approx([0.5, 1, 0, 0.5])
    # The study scores by action F1: the breakdowns are of action F1.
    by_cat = tables["hexagons_by_category"]
    assert by_cat["title"].startswith("Action F1")
    assert [c["label"] for c in by_cat["columns"]] == ["Section", "Agent / executor", "simple"]
    cells = {r["who"]: r["g:category: simple"]["mean"] for r in by_cat["rows"]}
    assert [cells[w] for w in rows] == pytest.approx([0.5, 1, 0, 0.5])
    assert [c["label"] for c in tables["hexagons_by_step"]["columns"][2:]] == ["step 1", "step 2"]

    # painter - copier: 1/6 on board F1 and 1/2 on action F1 on each of the 11 procedures,
    # all the same sign: the sign-flip p is 2 / 2**11 = 0.00098, shown "< 0.001".
    pairs = {(r["a"], r["b"]): r for r in tables["hexagons_paired"]["rows"]}
    p = pairs.get(("copier v1", "painter v1")) or pairs["painter v1", "copier v1"]
    assert p["procedures"] == 11
    assert (p["board_f1_p"], p["action_f1_p"]) == ("< 0.001", "< 0.001")
    # Holm over the family (agents, baselines, pooled people): every pair has its adjusted p.
    assert all(
        r[f"{m}_holm"] is not None
        for r in pairs.values()
        for m in ("board_f1", "action_f1")
        if r.get(f"{m}_p") not in (None, "—")
    )
    assert p["action_f1_holm"] is not None
    assert abs(p["board_f1"]["mean"]) == pytest.approx(1 / 6)
    # The effect on per-procedure means: the same differences, each procedure once.
    assert abs(p["board_f1_effect"]["mean"]) == pytest.approx(1 / 6)
    assert abs(p["action_f1_effect"]["mean"]) == pytest.approx(1 / 2)


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_executors_abstraction_alpha_by_hand(session):
    """Executors A and B label both steps of both procedures: A 2, 0 and B 2, 1 (the
    consolidation test's study)."""
    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner, label_abstraction=True)
    tables = _tables(session, study)
    assert "hexagons_agreement" in tables
    assert_shown(tables)
    [row] = tables["hexagons_agreement"]["rows"]
    assert (row["procedures"], row["steps"], row["labels"]) == (2, 4, 8)
    # Ordinal alpha: values 0 (2 labels), 1 (2), 2 (4), n = 8; the coincidences o(0,1) =
    # o(1,0) = 2 (the step-2 units), o(2,2) = 4. Ordinal distances: d(0,1) = (2 + 2 - 2)^2 =
    # 4, d(0,2) = (2 + 2 + 4 - 3)^2 = 25, d(1,2) = (2 + 4 - 3)^2 = 9. alpha = 1 - (n - 1)
    # * sum o d / sum n_c n_k d = 1 - 7 * 16 / (2 * (4 * 4 + 8 * 25 + 8 * 9)) = 29/36.
    assert row["alpha"]["mean"] == pytest.approx(29 / 36)
    assert row["alpha"]["n"] == 2  # procedures, the unit resampled


def test_hexagons_a_row_with_nothing_executed_has_no_step_values():
    # build() drops such rows before it asks; row_steps still answers with empty arrays.
    from app.kinds.hexagons.leaderboard import K, ProcedureInfo, Row, row_steps

    values, ids, order = row_steps(Row("human", "nobody"), {1: ProcedureInfo("simple", 2, [None, None])})
    assert values.shape == (0, K) and ids.shape == (0,) and order == []
    # A baseline answers for every procedure: zeros where it has none.
    values, ids, order = row_steps(Row("baseline", "none"), {1: ProcedureInfo("simple", 2, [None, None])})
    assert values.shape == (2, K) and not values.any() and list(ids) == [1, 1] and order == [1]
    assert np.issubdtype(values.dtype, np.floating)
