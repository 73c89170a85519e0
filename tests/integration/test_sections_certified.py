"""What reaches a paper from the kinds' leaderboard sections (issue 25, item 7): the navigation,
A3DS and Hexagons sections, each checked against hand-worked figures a user sees in the
section the page renders (app.leaderboards.service.compute, the page's and the API's source):

- a rejected worker's annotations drop out (rejected through app.quality.service.decide, the
  admin's review queue);
- navigation: an uneven number of followers per instruction (3 on one path, 1 on another);
- ties: two agents with identical per-item results shown as equal, in the section's order;
- two annotators who disagree on an item (1 of 2): what the section (or the page's majority
  row, where the kind shows one) does with it;
- the Hexagons pooled executors' paired row;
- an agent that lacks an item another has.

Which item a worker gets is fixed by the engine's fill order (depth first: the item closest to
its redundancy, then the highest position): the tests set the positions, so every worker's
item is known and checked before its answer goes in. Interval ends are not asserted (their
methods are being changed): only that the interval is there and holds the mean."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import select, update

from app.kinds import get_kind
from app.kinds.navigation.environments import import_house
from app.leaderboards.service import compute
from app.quality.service import decide
from app.studies import assignment, services
from app.studies.models import Item, Study
from tests.conftest import login, make_user
from tests.integration.test_navigation_leaderboard import coop_file, house


def _tables(session, study: Study) -> dict[str, dict]:
    """The kind's section as the page and the API get it: `compute` puts this in
    board["extra"]."""
    session.expire_all()
    extra = get_kind(study.kind).extra_leaderboard(session, study)
    json.dumps(extra, allow_nan=False)  # what the API sends: no NaN or infinity
    return {t["key"]: t for t in extra["tables"]}


def _fill_order(session, items: list[Item]) -> None:
    """The engine leases the highest position first among items equally close to their
    redundancy: `items` get positions in this order."""
    for k, item in enumerate(items):
        session.execute(update(Item).where(Item.id == item.id).values(position=0.9 - 0.01 * k))
    session.commit()


def _within(est: dict) -> bool:
    """An interval is shown and holds the mean (its ends are not asserted here)."""
    return (
        est["low"] is not None and est["high"] is not None and est["low"] - 1e-12 <= est["mean"] <= est["high"] + 1e-12
    )


def _reject(session, study: Study, participant_id: int) -> None:
    admin = make_user(session, "admin")
    assert decide(session, study, [participant_id], "rejected", admin, reason="answers at random") == 1
    session.commit()


# ---- navigation ------------------------------------------------------------------------------


def _nav_study(session, owner, per_item: int, speaker: str = "toy", refs: bool = True) -> tuple[Study, dict]:
    """Two paths (A: key 101, B: key 102); the speaker's instruction of each and, with refs,
    its human reference. Returns the study and its items by (category, path)."""
    h = house()
    import_house(session, h)
    s = services.StudySettings(title="Uneven", bundle_size=1, gold_rate=0.0, annotations_per_item=per_item)
    study = services.create_study(
        session, owner, "navigation", s, coop_file(h, n=2), "coop", {"speaker": speaker, "with_references": refs}
    )
    return study, _nav_items(session, study)


def _nav_items(session, study: Study) -> dict[tuple[str, str], Item]:
    out = {}
    for item in session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))):
        path = {"51": "A", "52": "B"}[item.cluster.split(":")[1]]
        out[item.category, path] = item
    return out


def _follow(session, study: Study, worker: str, expected: Item, style: str, rating: int) -> int:
    """One follower (a bundle of one) follows the instruction the engine leases them, which
    must be `expected`: "exact" walks the reference path, "stay" stops where it starts (the
    goal is more than 3 m away: a failure). Returns the participant id."""
    bundle = assignment.enter(session, study, "prolific", worker)
    a = assignment.next_item(session, study, bundle.id)
    assert a is not None and a.item_id == expected.id, (worker, expected.external_id)
    ref = expected.reference["path"]
    path = list(ref) if style == "exact" else [ref[0]]
    ann = assignment.submit(
        session, study, bundle.id, a.id, {"path": path, "trace": [], "rating": rating}, uuid.uuid4().hex
    )
    assert ann.scores["success"] == (style == "exact"), (worker, style)  # the setup: 1 or 0
    return bundle.participant_id


def _nav_rows(session, study):
    tables = _tables(session, study)
    metrics = {r["category"]: r for r in tables["navigation_metrics"]["rows"]}
    paired = {(r["category"], r["metric"]): r for r in tables["navigation_paired"]["rows"]}
    return tables, metrics, paired


def test_navigation_a_rejected_follower_drops_out_and_a_split_instruction_is_its_mean(session):
    owner = make_user(session, "researcher")
    study, it = _nav_study(session, owner, per_item=2)
    _fill_order(session, [it["toy", "A"], it["human", "A"], it["toy", "B"], it["human", "B"]])
    services.set_state(session, study, "live", owner)
    # Depth first: each instruction gets its two followers before the next is started.
    bad = _follow(session, study, "bad", it["toy", "A"], "stay", 1)
    _follow(session, study, "w1", it["toy", "A"], "exact", 4)
    _follow(session, study, "w2", it["human", "A"], "exact", 4)
    _follow(session, study, "w3", it["human", "A"], "exact", 4)
    _follow(session, study, "w4", it["toy", "B"], "exact", 2)
    _follow(session, study, "w5", it["toy", "B"], "exact", 2)
    _follow(session, study, "w6", it["human", "B"], "exact", 3)
    _follow(session, study, "w7", it["human", "B"], "exact", 3)

    _, before, paired = _nav_rows(session, study)
    assert [r for r in before] == ["human", "toy"]  # the baseline (human) first
    assert (before["toy"]["items"], before["toy"]["n"]) == (2, 4)
    # Two followers who disagree on toy A (1 of 2; the page shows no majority row for
    # navigation): the instruction's SR is their mean 0.5, toy B's is 1; SR = (0.5 + 1) / 2.
    assert before["toy"]["success"]["mean"] == pytest.approx(0.75)
    assert before["toy"]["success"]["n"] == 2 and _within(before["toy"]["success"])
    # Rating: toy A (1 + 4) / 2 = 2.5, toy B (2 + 2) / 2 = 2; (2.5 + 2) / 2 = 2.25.
    assert before["toy"]["rating"]["mean"] == pytest.approx(2.25)
    # Paired on the rating: path A 2.5 - 4 = -1.5, path B 2 - 3 = -1; mean -1.25 over 2 paths.
    assert paired["toy", "Rating (1-4)"]["mean_diff"] == pytest.approx(-1.25)
    assert paired["toy", "Rating (1-4)"]["n_paths"] == 2

    _reject(session, study, bad)
    _, after, paired = _nav_rows(session, study)
    # Without "bad": toy A has w1 alone (SR 1, rating 4), toy B as before (SR 1, rating 2).
    assert (after["toy"]["items"], after["toy"]["n"]) == (2, 3)
    assert after["toy"]["success"]["mean"] == 1.0 and after["toy"]["success"]["n"] == 2  # (1 + 1) / 2
    assert _within(after["toy"]["success"])
    assert after["toy"]["rating"]["mean"] == pytest.approx(3.0)  # (4 + 2) / 2
    # Paired: path A 4 - 4 = 0, path B 2 - 3 = -1: mean -0.5; SR 1 - 1 on both: 0.
    assert paired["toy", "Rating (1-4)"]["mean_diff"] == pytest.approx(-0.5)
    assert paired["toy", "SR"]["mean_diff"] == pytest.approx(0.0) and paired["toy", "SR"]["n_paths"] == 2
    # The human references are untouched: (4 + 3) / 2.
    assert after["human"] == before["human"] and after["human"]["rating"]["mean"] == pytest.approx(3.5)


def test_navigation_uneven_followers_per_path_weigh_each_instruction_once(session):
    owner = make_user(session, "researcher")
    study, it = _nav_study(session, owner, per_item=1)
    _fill_order(session, [it["toy", "A"], it["human", "A"], it["toy", "B"], it["human", "B"]])
    services.set_state(session, study, "live", owner)
    _follow(session, study, "f1", it["toy", "A"], "exact", 4)
    _follow(session, study, "f2", it["human", "A"], "exact", 4)
    _follow(session, study, "f3", it["toy", "B"], "stay", 1)
    _follow(session, study, "f4", it["human", "B"], "exact", 2)
    # Three followers for toy A: the study asks for more; the engine goes on with the item
    # closest to its redundancy, the highest first (toy A), until it has three.
    session.execute(update(Study).where(Study.id == study.id).values(annotations_per_item=3))
    session.commit()
    session.refresh(study)
    _follow(session, study, "f5", it["toy", "A"], "exact", 4)
    _follow(session, study, "f6", it["toy", "A"], "stay", 1)

    _, rows, paired = _nav_rows(session, study)
    toy, human = rows["toy"], rows["human"]
    assert (toy["items"], toy["n"]) == (2, 4) and (human["items"], human["n"]) == (2, 2)
    # SR: toy A (1 + 1 + 0) / 3 = 2/3, toy B 0; over instructions (2/3 + 0) / 2 = 1/3 (the
    # four annotations pooled would give 2/4 = 0.5).
    assert toy["success"]["mean"] == pytest.approx(1 / 3) and toy["success"]["n"] == 2
    assert _within(toy["success"])
    # Rating: toy A (4 + 4 + 1) / 3 = 3, toy B 1; (3 + 1) / 2 = 2 (pooled: 10 / 4 = 2.5).
    assert toy["rating"]["mean"] == pytest.approx(2.0) and toy["rating"]["n"] == 2
    assert _within(toy["rating"])
    # Human: one follower each, both at the goal: SR 1; rating (4 + 2) / 2 = 3.
    assert human["success"]["mean"] == 1.0 and human["rating"]["mean"] == pytest.approx(3.0)
    # Paired, per path the mean over the speaker's followers there, then over paths:
    # SR: A 2/3 - 1 = -1/3, B 0 - 1 = -1: mean -2/3; rating: A 3 - 4 = -1, B 1 - 2 = -1: -1.
    assert paired["toy", "SR"]["mean_diff"] == pytest.approx(-2 / 3) and paired["toy", "SR"]["n_paths"] == 2
    assert paired["toy", "Rating (1-4)"]["mean_diff"] == pytest.approx(-1.0)
    assert paired["toy", "Rating (1-4)"]["n_paths"] == 2


def test_navigation_tied_speakers_are_equal_and_a_missing_path_is_left_out(session, client):
    owner = make_user(session, "researcher")
    study, it = _nav_study(session, owner, per_item=1, speaker="zeta")
    h = house()
    more = []
    for speaker, paths in (("alpha", ("51", "52")), ("beta", ("51",))):  # beta: path A only
        specs = services.preview_items(
            "navigation", coop_file(h, n=2), "coop", {"speaker": speaker, "with_references": False}
        ).items
        more += [s for s in specs if not s.is_gold and s.cluster.split(":")[1] in paths]
    assert services.add_items(session, study, more) == 3
    session.commit()
    it = _nav_items(session, study)
    services.set_state(session, study, "live", owner)
    # One follower per instruction, in whatever order: every speaker's instruction of path A is
    # followed to the goal with rating 4, of path B not at all (rating 2); the references are
    # followed on both (rating 3).
    for k in range(len(it)):
        bundle = assignment.enter(session, study, "prolific", f"f{k}")
        a = assignment.next_item(session, study, bundle.id)
        item = session.get(Item, a.item_id)
        path_a = item.cluster.endswith(":51")
        style, rating = ("exact", 3) if item.category == "human" else (("exact", 4) if path_a else ("stay", 2))
        ref = item.reference["path"]
        assignment.submit(
            session,
            study,
            bundle.id,
            a.id,
            {"path": list(ref) if style == "exact" else [ref[0]], "trace": [], "rating": rating},
            uuid.uuid4().hex,
        )
    assert assignment.next_item(session, study, assignment.enter(session, study, "prolific", "late").id) is None

    tables, rows, paired = _nav_rows(session, study)
    # The baseline first, then the speakers by name: the tie alpha = zeta keeps that order.
    assert [r["category"] for r in tables["navigation_metrics"]["rows"]] == ["human", "alpha", "beta", "zeta"]
    alpha, zeta = dict(rows["alpha"], category=None), dict(rows["zeta"], category=None)
    assert alpha == zeta  # every column equal, intervals included
    assert (rows["alpha"]["items"], rows["alpha"]["n"]) == (2, 2)
    assert rows["alpha"]["success"]["mean"] == 0.5  # (1 + 0) / 2
    assert rows["alpha"]["rating"]["mean"] == pytest.approx(3.0)  # (4 + 2) / 2
    assert _within(rows["alpha"]["success"]) and _within(rows["alpha"]["rating"])
    # beta lacks path B: its figures are over the instruction it has (a missing path is not a
    # failure): SR 1, rating 4, one instruction.
    assert (rows["beta"]["items"], rows["beta"]["n"]) == (1, 1)
    assert rows["beta"]["success"]["mean"] == 1.0 and rows["beta"]["rating"]["mean"] == pytest.approx(4.0)
    # Paired against the references: alpha and zeta alike over both paths (rating 4 - 3 = 1,
    # 2 - 3 = -1: mean 0; SR 1 - 1 = 0, 0 - 1 = -1: mean -0.5); beta over path A only.
    assert [r["category"] for r in tables["navigation_paired"]["rows"] if r["metric"] == "SR"] == [
        "alpha",
        "beta",
        "zeta",
    ]
    for cat in ("alpha", "zeta"):
        assert paired[cat, "Rating (1-4)"]["mean_diff"] == pytest.approx(0.0)
        assert paired[cat, "SR"]["mean_diff"] == pytest.approx(-0.5) and paired[cat, "SR"]["n_paths"] == 2
    assert paired["beta", "Rating (1-4)"]["mean_diff"] == pytest.approx(1.0)  # 4 - 3 on path A
    assert paired["beta", "SR"]["n_paths"] == 1 and paired["beta", "SR"]["mean_diff"] == pytest.approx(0.0)

    # The API sends the same section.
    login(client, owner)
    api = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert api.status_code == 200
    nav = next(t for t in api.json()["extra"]["tables"] if t["key"] == "navigation_metrics")
    assert nav["rows"] == tables["navigation_metrics"]["rows"]


# ---- A3DS ------------------------------------------------------------------------------------

PAIRS = [(12500 + 10 * k, 12501 + 10 * k) for k in range(3)]  # P1, P2, P3


def _a3ds_study(session, owner, captioners: dict[str, tuple[int, ...]], per_item: int) -> tuple[Study, dict]:
    """Imported captions: each captioner captions the pairs named (0 = P1, ...). Returns the
    study and its items by (captioner, pair number)."""
    lines = [
        {"target": PAIRS[p][0], "distractor": PAIRS[p][1], "caption": "a small ball", "captioner": who}
        for who, pairs in captioners.items()
        for p in pairs
    ]
    s = services.StudySettings(title="Listeners", bundle_size=1, gold_rate=0.0, annotations_per_item=per_item)
    study = services.create_study(session, owner, "a3ds", s, "\n".join(map(json.dumps, lines)).encode(), "captions")
    items = {}
    for item in session.scalars(select(Item).where(Item.study_id == study.id)):
        items[
            item.reference["captioner"], PAIRS.index((item.reference["target_id"], item.reference["distractor_id"])) + 1
        ] = item
    return study, items


def _listen(session, study: Study, worker: str, expected: Item, right: bool) -> int:
    """One listener (a bundle of one) picks the target or the other picture on the item the
    engine leases them, which must be `expected`. Returns the participant id."""
    bundle = assignment.enter(session, study, "prolific", worker)
    a = assignment.next_item(session, study, bundle.id)
    assert a is not None and a.item_id == expected.id, (worker, expected.external_id)
    target = expected.reference["target"]
    ann = assignment.submit(
        session, study, bundle.id, a.id, {"choice": str(target if right else 3 - target)}, uuid.uuid4().hex
    )
    assert ann.score == (1.0 if right else 0.0)
    return bundle.participant_id


def _a3ds_rows(session, study):
    tables = _tables(session, study)
    acc = {r["captioner"]: r for r in tables["a3ds_accuracy"]["rows"]}
    paired = {(r["a"], r["b"]): r for r in tables.get("a3ds_paired", {"rows": []})["rows"]}
    return tables, acc, paired


def test_a3ds_a_rejected_listener_drops_out(session):
    owner = make_user(session, "researcher")
    study, it = _a3ds_study(session, owner, {"a": (0, 1), "b": (0, 1)}, per_item=2)
    _fill_order(session, [it["a", 1], it["a", 2], it["b", 1], it["b", 2]])
    services.set_state(session, study, "live", owner)
    bad = _listen(session, study, "bad", it["a", 1], False)
    _listen(session, study, "l1", it["a", 1], True)
    _listen(session, study, "l2", it["a", 2], True)
    _listen(session, study, "l3", it["a", 2], False)
    _listen(session, study, "l4", it["b", 1], True)
    _listen(session, study, "l5", it["b", 1], True)
    _listen(session, study, "l6", it["b", 2], False)
    _listen(session, study, "l7", it["b", 2], False)

    _, acc, paired = _a3ds_rows(session, study)
    # a: P1 0 + 1, P2 1 + 0: 2 of 4; b: P1 2, P2 0: 2 of 4.
    assert (acc["a"]["answers"], acc["a"]["accuracy"]["mean"]) == (4, 0.5)
    assert (acc["b"]["answers"], acc["b"]["accuracy"]["mean"]) == (4, 0.5)
    # Paired per pair: P1 1/2 - 1 = -0.5, P2 1/2 - 0 = 0.5: mean 0 over 2 pairs.
    assert paired["a", "b"]["pairs"] == 2 and paired["a", "b"]["diff"]["mean"] == pytest.approx(0.0)

    _reject(session, study, bad)
    tables, acc, paired = _a3ds_rows(session, study)
    # Without "bad": a has 2 right of 3 answers, but accuracy is the mean over PAIRS of each
    # pair's share right: P1 1 of 1, P2 1 of 2: (1 + 1/2) / 2 = 3/4 over n = 2 pairs. (The old
    # figure, 2/3 over 3 answers, counted P2 twice for its two listeners: the wrong one.)
    assert (acc["a"]["items"], acc["a"]["answers"]) == (2, 3)
    assert acc["a"]["accuracy"]["mean"] == pytest.approx(3 / 4) and acc["a"]["accuracy"]["n"] == 2
    assert _within(acc["a"]["accuracy"])
    # Every pair is in exactly one z column.
    zs = [c["key"] for c in tables["a3ds_accuracy"]["columns"] if c["key"].startswith("z")]
    assert sum(acc["a"][z]["n"] for z in zs) == 2
    assert (acc["b"]["answers"], acc["b"]["accuracy"]["mean"]) == (4, 0.5)
    # Paired: P1 1 - 1 = 0, P2 1/2 - 0 = 0.5: mean 0.25.
    assert paired["a", "b"]["diff"]["mean"] == pytest.approx(0.25) and paired["a", "b"]["pairs"] == 2
    corr = {r["captioner"]: r for r in tables["a3ds_correlation"]["rows"]}
    assert corr["a"]["items"] == 2


def test_a3ds_ties_a_split_pair_and_a_missing_pair(session, client):
    owner = make_user(session, "researcher")
    # x and y caption P1-P3; m only P1 and P2 (it lacks P3).
    study, it = _a3ds_study(session, owner, {"x": (0, 1, 2), "y": (0, 1, 2), "m": (0, 1)}, per_item=2)
    order = [it["x", 1], it["y", 1], it["m", 1], it["x", 2], it["y", 2], it["m", 2], it["x", 3], it["y", 3]]
    _fill_order(session, order)
    services.set_state(session, study, "live", owner)
    # Two listeners per item, one after the other. P1: the two disagree (x and m: right then
    # wrong; y: wrong then right); P2: both right; P3: both wrong.
    picks = {
        1: {"x": (True, False), "y": (False, True), "m": (True, False)},
        2: {"x": (True, True), "y": (True, True), "m": (True, True)},
        3: {"x": (False, False), "y": (False, False)},
    }
    n = 0
    for item in order:
        who, pair = (
            item.reference["captioner"],
            PAIRS.index((item.reference["target_id"], item.reference["distractor_id"])) + 1,
        )
        for right in picks[pair][who]:
            _listen(session, study, f"l{n}", item, right)
            n += 1

    tables, acc, paired = _a3ds_rows(session, study)
    # Captioners by name: m, then the tie x = y in name order.
    assert [r["captioner"] for r in tables["a3ds_accuracy"]["rows"]] == ["m", "x", "y"]
    # x and y: P1 1 of 2, P2 2 of 2, P3 0 of 2: 3 of 6 each, every column equal.
    assert dict(acc["x"], captioner=None) == dict(acc["y"], captioner=None)
    assert (acc["x"]["items"], acc["x"]["answers"], acc["x"]["accuracy"]["mean"]) == (3, 6, 0.5)
    # m lacks P3: as the generic table counts an agent's missing answer wrong, P3 counts 0 for
    # m (coverage 2 of 3 pairs): (1/2 + 1 + 0) / 3 = 1/2, not 3/4 over its own answers (the
    # old figure made a captioner that skips a hard pair look better).
    assert (acc["m"]["items"], acc["m"]["answers"], acc["m"]["coverage"]) == (2, 4, pytest.approx(2 / 3))
    assert acc["m"]["accuracy"]["mean"] == pytest.approx(0.5) and acc["m"]["accuracy"]["n"] == 3
    assert _within(acc["m"]["accuracy"])
    # All three have 1/2, 1, 0 on P1-P3: tied, every rank interval 1-3.
    # Three pairs: under stats.MIN_RANK_UNITS, nobody is ranked ("—" with the reason).
    assert [acc[c]["rank"] for c in ("m", "x", "y")] == [
        {"text": "—", "reason": "3 pairs shared by every ranked system: fewer than 5 rank nobody"}
    ] * 3
    # Paired: x - y over P1-P3, every difference 0; m against x or y over the 2 pairs both
    # captioned (P1: 1/2 - 1/2, P2: 1 - 1): 0.
    assert list(paired) == [("m", "x"), ("m", "y"), ("x", "y")]
    assert (paired["x", "y"]["pairs"], paired["x", "y"]["diff"]["mean"]) == (3, 0.0)
    assert (paired["m", "x"]["pairs"], paired["m", "x"]["diff"]["mean"]) == (2, 0.0)
    assert paired["m", "x"] == dict(paired["m", "y"], b="x")
    metrics = {r["captioner"]: r for r in tables["a3ds_metrics"]["rows"]}
    assert (metrics["m"]["items"], metrics["x"]["items"], metrics["all captioners"]["items"]) == (2, 3, 8)

    # The page's majority row (A3DS shows the generic table): each item's answer with the most
    # votes, a 1-1 split going to the earliest answer. x P1 and m P1: the earliest was right
    # (1); y P1: wrong (0); P2 items right, P3 items wrong: 1 + 0 + 1 + 1 + 1 + 1 + 0 + 0 = 5
    # of 8 items.
    board = compute(session, study)
    [majority] = [r for r in board["rows"] if r["type"] == "majority"]
    assert (majority["answered"], majority["correct"]) == (8, 5)
    assert majority["accuracy"]["mean"] == pytest.approx(5 / 8) and majority["accuracy"]["n"] == 8
    login(client, owner)
    api = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    assert [r for r in api["rows"] if r["type"] == "majority"] == [majority]
    assert (
        next(t for t in api["extra"]["tables"] if t["key"] == "a3ds_accuracy")["rows"]
        == tables["a3ds_accuracy"]["rows"]
    )


# ---- Hexagons --------------------------------------------------------------------------------

BLANK = [0] * 180
ONE = [4] + [0] * 179  # step 1: tile 0 red
TWO = [4, 5] + [0] * 178  # step 2: tile 1 blue as well


def _procedure(index: int) -> str:
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple" if index % 2 else "symmetry",
            "image_id": f"P{index}",
            "instructor_id": 3,
            "number_of_drawing_steps": 2,
            "agreement_tags": ["A", "A"],
            "agreement_scores": [[1, 1, 1]] * 2,
            "drawing_procedure": [[0, "NONE", BLANK], [1, "tile 0 red", ONE], [2, "tile 1 blue", TWO]],
        }
    )


# What an executor paints: every step right (board F1 1, 1), step 2 left undone (board F1 1
# and 2/3: precision 1, recall 1/2; action F1 1 and 0), or nothing at all (board F1 0, 0).
EXECUTIONS = {
    "exact": [{"board": ONE, "actions": [[0, 4, 500]]}, {"board": TWO, "actions": [[1, 5, 700]]}],
    "lazy": [{"board": ONE, "actions": [[0, 4, 500]]}, {"board": ONE, "actions": []}],
    "blank": [{"board": BLANK, "actions": []}, {"board": BLANK, "actions": []}],
}


def _hex_study(session, owner, procedures: int, per_item: int) -> Study:
    data = "\n".join(_procedure(i) for i in range(1, procedures + 1)).encode()
    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Hex", bundle_size=procedures, gold_rate=0.0, annotations_per_item=per_item),
        data,
        "procedures",
    )
    services.set_state(session, study, "live", owner)
    return study


def _execute(session, study: Study, worker: str, how: str, limit: int = 100) -> tuple[str, int]:
    """A worker executes up to `limit` procedures, all the same way; returns their pseudonym
    (the row's name) and participant id."""
    bundle = assignment.enter(session, study, "prolific", worker)
    for _ in range(limit):
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            break
        assignment.submit(session, study, bundle.id, a.id, {"steps": json.dumps(EXECUTIONS[how])}, uuid.uuid4().hex)
    return assignment.pseudonym("prolific", worker), bundle.participant_id


def _predict(session, study: Study, owner, name: str, second: list[int], procedures) -> None:
    agent = services.register_agent(session, owner, "hexagons", name, "1")
    preds = "\n".join(
        json.dumps({"index": i, "step": k, "board": b}) for i in procedures for k, b in ((1, ONE), (2, second))
    ).encode()
    services.import_agent_outputs(session, study, agent, preds)


def _hex_rows(session, study):
    tables = _tables(session, study)
    rows = {r["who"]: r for r in tables["hexagons_metrics"]["rows"]}
    pairs = {(r["a"], r["b"]): r for r in tables.get("hexagons_paired", {"rows": []})["rows"]}
    return tables, rows, pairs


def _pair(pairs: dict, a: str, b: str) -> tuple[dict, int]:
    """The paired row of a and b (either way round) and the sign that makes it a - b."""
    return (pairs[a, b], 1) if (a, b) in pairs else (pairs[b, a], -1)


POOLED = "All human executors"


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_a_rejected_executor_drops_out_of_their_row_and_the_pooled_one(session):
    owner = make_user(session, "researcher")
    study = _hex_study(session, owner, procedures=6, per_item=3)
    exact, _ = _execute(session, study, "EXACT01", "exact")
    lazy, _ = _execute(session, study, "LAZY001", "lazy")
    bad, bad_id = _execute(session, study, "BLANK01", "blank")

    _, rows, pairs = _hex_rows(session, study)
    assert set(rows) == {POOLED, exact, lazy, bad, "No action (paints nothing)"}
    assert rows[bad]["board_f1"]["mean"] == 0.0
    # Pooled: 18 executions, 36 steps: exact 12 x 1, lazy 6 x 1 + 6 x 2/3 = 10, blank 0:
    # 22 / 36 = 11/18.
    assert (rows[POOLED]["executions"], rows[POOLED]["steps"]) == (18, 36)
    assert rows[POOLED]["board_f1"]["mean"] == pytest.approx(11 / 18)

    _reject(session, study, bad_id)
    _, rows, pairs = _hex_rows(session, study)
    assert set(rows) == {POOLED, exact, lazy, "No action (paints nothing)"}
    # Pooled without the blank executor: 12 executions, 24 steps, (12 + 10) / 24 = 11/12.
    assert (rows[POOLED]["procedures"], rows[POOLED]["executions"], rows[POOLED]["steps"]) == (6, 12, 24)
    assert rows[POOLED]["board_f1"]["mean"] == pytest.approx(11 / 12) and _within(rows[POOLED]["board_f1"])
    assert not any(bad in key for key in pairs)
    # Pooled against exact, per procedure: (1 + 1 + 1 + 2/3) / 4 - 1 = -1/12 on all 6.
    p, sign = _pair(pairs, POOLED, exact)
    assert sign * p["board_f1"]["mean"] == pytest.approx(-1 / 12) and p["procedures"] == 6


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_pooled_executors_paired_with_an_agent_by_hand(session):
    owner = make_user(session, "researcher")
    study = _hex_study(session, owner, procedures=6, per_item=3)
    exact, _ = _execute(session, study, "EXACT01", "exact")
    lazy, _ = _execute(session, study, "LAZY001", "lazy")
    lazy2, _ = _execute(session, study, "LAZY002", "lazy", limit=3)  # 3 of the 6 procedures
    _predict(session, study, owner, "copier", ONE, range(1, 7))  # step 2 undone, as lazy

    tables, rows, pairs = _hex_rows(session, study)
    assert [r["who"] for r in tables["hexagons_metrics"]["rows"]][:2] == ["copier v1", POOLED]
    assert (rows[lazy2]["procedures"], rows[lazy2]["steps"]) == (3, 6)
    # Pooled: 15 executions of 6 procedures, 30 steps. Board F1: exact 12, lazy 6 + 6 x 2/3
    # = 10, lazy2 3 + 3 x 2/3 = 5: 27 / 30 = 0.9. Action F1: 12 + 6 + 3 = 21 of 30 = 0.7.
    # Executors who disagree on a procedure are both in it (the Hexagons page has no majority
    # row: its generic table is off).
    pooled = rows[POOLED]
    assert (pooled["procedures"], pooled["executions"], pooled["steps"]) == (6, 15, 30)
    assert pooled["board_f1"]["mean"] == pytest.approx(0.9) and pooled["action_f1"]["mean"] == pytest.approx(0.7)
    assert _within(pooled["board_f1"]) and pooled["board_f1"]["n"] == 30
    assert rows["copier v1"]["board_f1"]["mean"] == pytest.approx(5 / 6)  # (1 + 2/3) / 2

    # The paired row, per procedure the mean over the steps of all its executions:
    # with lazy2 (3 procedures) (1 + 1 + 1 + 2/3 + 1 + 2/3) / 6 = 8/9, without (1 + 1 + 1 +
    # 2/3) / 4 = 11/12. copier - pooled: 5/6 - 8/9 = -1/18 on 3, 5/6 - 11/12 = -1/12 on 3;
    # every procedure has 2 steps: mean (-1/18 - 1/12) / 2 = -5/72. All 6 differences are
    # negative and not all equal: only the all-minus and all-plus sign patterns reach it,
    # p = 2 / 2**6 = 0.031.
    p = pairs["copier v1", POOLED]
    assert (p["procedures"], p["steps"]) == (6, 12)
    assert p["board_f1"]["mean"] == pytest.approx(-5 / 72) and p["board_f1"]["n"] == 6
    assert p["board_f1"]["low"] <= p["board_f1"]["mean"] <= p["board_f1"]["high"]
    assert p["board_f1_p"] == "0.031"
    # Pooled - exact: 8/9 - 1 = -1/9 on 3, 11/12 - 1 = -1/12 on 3: (-1/9 - 1/12) / 2 = -7/72.
    q, sign = _pair(pairs, POOLED, exact)
    assert sign * q["board_f1"]["mean"] == pytest.approx(-7 / 72) and q["procedures"] == 6
    # lazy2 shares 3 procedures with everyone: under the 6 a pair needs, no row.
    assert not any(lazy2 in key for key in pairs)
    # Pairs of single annotators come after the agent's and the pooled row's.
    order = [(r["a"], r["b"]) for r in tables["hexagons_paired"]["rows"]]
    assert order.index(("copier v1", POOLED)) < order.index((exact, lazy) if (exact, lazy) in pairs else (lazy, exact))


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_tied_agents_and_an_agent_missing_a_procedure(session):
    owner = make_user(session, "researcher")
    study = _hex_study(session, owner, procedures=7, per_item=1)
    _predict(session, study, owner, "copier-b", ONE, range(1, 8))
    _predict(session, study, owner, "copier-a", ONE, range(1, 8))
    _predict(session, study, owner, "partial", TWO, range(1, 7))  # right everywhere, lacks procedure 7

    tables, rows, pairs = _hex_rows(session, study)
    # Agents by name (the tie copier-a = copier-b in that order), then the baseline.
    assert [r["who"] for r in tables["hexagons_metrics"]["rows"]] == [
        "copier-a v1",
        "copier-b v1",
        "partial v1",
        "No action (paints nothing)",
    ]
    assert dict(rows["copier-a v1"], who=None) == dict(rows["copier-b v1"], who=None)
    assert (rows["copier-a v1"]["procedures"], rows["copier-a v1"]["steps"]) == (7, 14)
    assert rows["copier-a v1"]["board_f1"]["mean"] == pytest.approx(5 / 6)  # (1 + 2/3) / 2 per procedure
    # partial is scored over every procedure of the study, procedure 7 counting 0 at both its
    # steps (coverage 6/7 beside): 12 / 14 = 6/7, not 1 over the 12 steps it executed (the old
    # figure: an agent that skips hard procedures looked better).
    assert (rows["partial v1"]["procedures"], rows["partial v1"]["steps"]) == (6, 14)
    assert rows["partial v1"]["coverage"] == pytest.approx(6 / 7)
    assert rows["partial v1"]["board_f1"]["mean"] == pytest.approx(6 / 7)
    # Ranks over the 7 procedures: partial beats the copiers' 5/6 unless the resample draws
    # procedure 7 twice or more (probability 0.26), so partial and the tied copiers all span
    # 1-3; No action (1/3) is 4th.
    assert [rows[w]["rank"] for w in ("copier-a v1", "copier-b v1", "partial v1", "No action (paints nothing)")] == [
        "1-3",
        "1-3",
        "1-3",
        "4",
    ]
    # The tied pair: 7 procedures, difference 0, p 1.
    tie = pairs["copier-a v1", "copier-b v1"]
    assert (tie["procedures"], tie["board_f1"]["mean"], tie["board_f1_p"]) == (7, 0.0, "1.000")
    # Against partial: the 6 procedures both executed, 5/6 - 1 = -1/6 on each; p = 2 / 2**6.
    p = pairs["copier-a v1", "partial v1"]
    assert (p["procedures"], p["steps"]) == (6, 12)
    assert p["board_f1"]["mean"] == pytest.approx(-1 / 6) and p["board_f1_p"] == "0.031"
    assert pairs["copier-b v1", "partial v1"] == dict(p, a="copier-b v1")
