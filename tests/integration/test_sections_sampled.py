"""What the sampled surviving mutants of the leaderboard modules changed (issue 25, item 7;
docs/testing.md, "Mutation testing": the sample of 40 mutants per module), each checked against
a hand-worked figure a user sees on the leaderboard page or in the API."""

from __future__ import annotations

import json
import re

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


# ---- Hexagons --------------------------------------------------------------------------------


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_a_single_executors_pairs_stay_out_of_holms_family(session):
    """Two executors (every step right; step 2 left undone) on six procedures, no agent. Holm's
    family is the comparisons the study is run for: here only the pooled executors against the
    No-action baseline. Its six differences are all the same and positive, so p = 2 / 2**6 =
    0.031, and Holm over a family of one leaves it 0.031. Each single executor's pair with the
    baseline shows its p (0.031 too) and no Holm p; counted in, the family of three would make
    every Holm p 3 x 0.031 = 0.094."""
    from tests.integration.test_sections_certified import POOLED, _execute, _hex_rows, _hex_study

    owner = make_user(session, "researcher")
    study = _hex_study(session, owner, procedures=6, per_item=2)
    exact, _ = _execute(session, study, "EXACT01", "exact")
    lazy, _ = _execute(session, study, "LAZY001", "lazy")
    _, _, pairs = _hex_rows(session, study)
    baseline = "No action (paints nothing)"
    assert pairs[POOLED, baseline]["procedures"] == 6
    assert (pairs[POOLED, baseline]["board_f1_p"], pairs[POOLED, baseline]["board_f1_holm"]) == ("0.031", "0.031")
    for single in (exact, lazy):
        assert (pairs[single, baseline]["board_f1_p"], pairs[single, baseline]["board_f1_holm"]) == ("0.031", None)


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_abstraction_alpha_over_one_procedure_has_no_interval(session):
    """Two executors label the two steps of the study's one procedure: 2, 0 and 2, 1. Alpha
    (ordinal) is computed over the two steps, but resampling one procedure always draws the same
    one: the cell shows alpha without an interval, not [alpha, alpha]."""
    import krippendorff
    import numpy as np

    from app.studies import assignment
    from tests.integration.test_sections_certified import EXECUTIONS, _procedure

    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Levels", bundle_size=1, gold_rate=0.0, annotations_per_item=2)
    study = services.create_study(
        session, owner, "hexagons", s, _procedure(1).encode(), "procedures", {"label_abstraction": 1}
    )
    services.set_state(session, study, "live", owner)
    for worker, levels in (("LEVELS1", (2, 0)), ("LEVELS2", (2, 1))):
        bundle = assignment.enter(session, study, "prolific", worker)
        a = assignment.next_item(session, study, bundle.id)
        labels = json.dumps([{"level": lv, "mechanisms": []} for lv in levels])
        response = {"steps": json.dumps(EXECUTIONS["exact"]), "labels": labels}
        assignment.submit(session, study, bundle.id, a.id, response, f"{worker}-answer")
    [row] = _tables(session, study)["hexagons_agreement"]["rows"]
    assert (row["procedures"], row["steps"], row["labels"]) == (1, 2, 4)
    expected = krippendorff.alpha(
        reliability_data=np.array([[2, 0], [2, 1]], dtype=float), level_of_measurement="ordinal"
    )
    assert row["alpha"]["mean"] == pytest.approx(expected)
    assert (row["alpha"]["low"], row["alpha"]["high"]) == (None, None)


def _followed_once(session, title: str, paths: int, toy_fails: tuple[str, ...]):
    """A live navigation study of `paths` coop paths (toy's instruction and the human
    reference on each), every instruction followed once: exactly, but not toy's on the paths
    named (those stop at the start). The study and the (speaker, path) pairs followed."""
    from app.kinds.navigation.environments import import_house
    from app.studies import assignment
    from tests.integration.test_navigation_leaderboard import coop_file, house

    owner = make_user(session, "researcher")
    h = house()
    import_house(session, h)
    s = services.StudySettings(title=title, bundle_size=1, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(
        session, owner, "navigation", s, coop_file(h, n=paths), "coop", {"speaker": "toy", "with_references": True}
    )
    services.set_state(session, study, "live", owner)
    followed, worker = set(), title.lower().replace(" ", "-")
    for k in range(4 * paths):  # one follower per instruction, until none is left
        bundle = assignment.enter(session, study, "prolific", f"{worker}-{k}")
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            break
        item = session.get(Item, a.item_id)
        ref = item.reference["path"]
        path = item.cluster.split(":")[1]
        followed.add((item.category, path))
        fails = item.category == "toy" and path in toy_fails
        answer = {"path": [ref[0]] if fails else list(ref), "trace": [], "rating": 3}
        assignment.submit(session, study, bundle.id, a.id, answer, f"{worker}-{k}-answer")
    return study, followed


def test_navigation_a_near_tie_is_ranked_the_same_on_every_view(session):
    """Eight paths, one follower per instruction; every human reference is followed to the goal, toy's instruction too on five
    paths and not at all on three: SR 1 against 5/8. Whether the references' rank is "1" or
    "1-2" turns on how many of the 1000 bootstrap resamples of the paths happen to draw none
    of the three (about half of all seeds say one, half the other): the page draws them the
    same way every time, so ten views show the same ranks (an unseeded draw would change them
    between views, 2 in 2**10 left to chance)."""
    study, followed = _followed_once(session, "Near tie", paths=8, toy_fails=("51", "52", "53"))
    assert len(followed) == 16  # 8 paths x (toy's instruction, the human reference)
    views = []
    for _ in range(10):
        rows = {r["category"]: r for r in _tables(session, study)["navigation_metrics"]["rows"]}
        views.append((rows["human"]["rank"], rows["toy"]["rank"]))
    assert rows["human"]["success"]["mean"] == 1.0 and rows["toy"]["success"]["mean"] == pytest.approx(5 / 8)
    assert views[0] in {("1", "2"), ("1-2", "1-2")}
    assert views == [views[0]] * 10


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


# What the STS section's tables say, word for word where it is a name (titles, column labels),
# and as prose a reader can trust elsewhere (notes, column helps): sentences that start with a
# capital, names spelled as the papers spell them, no word in capitals that is not an acronym.
STS_TITLES = {
    "sts_agents": "Success share per agent",
    "sts_categories": "Success share per category",
    "sts_tags": "Success share per tag",
    # The judged tables (app/leaderboards/judged.py): the simulator, then a predictor learned
    # from people's markers on what is known without them (shown from 20 continuations).
    "sts_ppi": "People and the simulator together (PPI++, success share 0-1)",
    "sts_ppi_by_category": "People and the simulator together (PPI++, success share 0-1), per category",
    "sts_learned_ppi": "People and a learned predictor together (cross-prediction, success share 0-1)",
    "sts_scenarios": "Consistency per scenario",
    "sts_correlation": "Rank correlation with other metrics",
    "sts_failure_types": "Why continuations failed (paper appendix A.3)",
    "sts_annotators": "Annotators on reference episodes",
}
JUDGED = ["Agent", "People only", "Judged", "Judge only", "Agreement", "PPI++", "Worth (people)", "People for ±0.05"]
STS_LABELS = {
    "sts_agents": [
        "Agent",
        "Continuations",
        "Rank (95%)",
        "Success share",
        "SE",
        "Success markers",
        "Corrected",
        "Simulator",
        "Agreement",
        "Time to completion (median steps)",
        "Median's 95% interval",
    ],
    "sts_categories": ["Agent", "go to", "open", "pick up", "put next to"],
    "sts_tags": ["Agent", "rule:before success"],
    "sts_ppi": JUDGED,
    "sts_ppi_by_category": ["Agent · category", *JUDGED[1:]],
    "sts_learned_ppi": ["Agent", "People only", "Judged", "Judge only", "Agreement", "Cross-PPI", "Worth (people)"],
    "sts_scenarios": ["Scenario", "Category", "copycat", "expert", "random", "Difficulty"],
    "sts_correlation": ["Against", "Agents", "Spearman rho", "p"],
    "sts_failure_types": ["Source", "Error type", "What it means", "Episodes", "Share", "random"],
    "sts_annotators": [
        "Annotator",
        "Reference",
        "Sensitivity",
        "Specificity",
        "Balanced accuracy",
        "Marker-step error",
    ],
}
STS_FIGURES = [
    "Success share per agent (95% interval)",
    "Success share per category (95% intervals)",
    "Success share per tag (95% intervals)",
    "Time to completion: steps from the takeover to the success marker (CDF)",
]
NAMES = ("BabyAI", "Wilson's", "Rogan-Gladen", "Spearman's", "Figure 9", "PPI++", "Cohen's")
ACRONYMS = {"SE", "PPI", "CDF"}


def assert_prose(where: str, text: str, groups: tuple[str, ...] = ()) -> None:
    """One note or help as a reader meets it: no stray marks, each sentence starting with a
    capital, a digit, a quote or a dash (or a group's own name, a tag's "rule:..."), names as
    the papers write them, no shouted words."""
    assert text == text.strip() and "XX" not in text, (where, text)
    for sentence in re.split(r"(?<=[.?!])\s+", text):
        assert re.match(r'[A-Z0-9"(—]', sentence) or sentence.startswith(groups), (where, sentence)
    for name in NAMES:
        if name.lower() in text.lower():
            assert name in text, (where, name, text)
    assert set(re.findall(r"\b[A-Z]{3,}\b", text)) <= ACRONYMS, (where, text)


def test_sts_tables_say_what_they_show(client, session):
    """The three-agent demo study, every non-reference scenario tagged by the mining rule
    "rule:before success" (uploaded, not from a suite: whether the rule still holds cannot be
    checked, so the tag stays), every continuation marked as the simulator says, one failed
    continuation classified by an admin as "empty"."""
    from tests.conftest import login
    from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents

    owner = make_user(session, "researcher")
    lines = [x if x.get("reference") else {**x, "tags": ["rule:before success"]} for x in _three_agents()]
    study = _sts_study(session, owner, lines)
    _mark_all(session, study)
    admin = make_user(session, "admin")
    csrf = login(client, admin)
    failed = next(
        i
        for i in session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False)))
        if i.reference["simulator"] == "failure" and i.reference["agent"] == "random"
    )
    r = client.put(
        f"/api/v1/sts/studies/{study.id}/failures/{failed.id}",
        json={"error_type": "empty"},
        headers={"X-CSRF-Token": csrf},
    )
    assert r.status_code == 200
    session.expire_all()
    from app.leaderboards.service import compute

    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    assert {k: tables[k]["title"] for k in STS_TITLES} == STS_TITLES
    assert {k: [c["label"] for c in tables[k]["columns"]] for k in STS_LABELS} == STS_LABELS
    assert [f["title"] for f in board["extra"]["figures"]] == STS_FIGURES
    for key in STS_TITLES:
        assert_prose(key, tables[key]["note"], tuple(c["label"] for c in tables[key]["columns"]))
        for c in tables[key]["columns"]:
            assert_prose(f"{key} {c['key']}", c["help"])
    # The learned predictor's agreement is a share of verdicts, not the simulator's 1 - |difference|.
    learned = {c["key"]: c["help"] for c in tables["sts_learned_ppi"]["columns"]}
    assert "(predicted success >= 0.5, from a model not trained on that continuation)" in learned["agreement"]
    # Each scenario row names its scenario's category (the level's family), as the breakdown does.
    categories = [c["label"] for c in tables["sts_categories"]["columns"][1:]]
    assert sorted({r["category"] for r in tables["sts_scenarios"]["rows"]}) == categories
    # The tag, unchecked, is on every continuation: its column repeats the overall share.
    [row] = [r for r in tables["sts_tags"]["rows"] if r["agent"] == "expert"]
    [agent] = [r for r in tables["sts_agents"]["rows"] if r["agent"] == "expert"]
    assert row["g:rule:before success"]["mean"] == agent["success"]["mean"]
    assert tables["sts_tags"]["note"].endswith(
        ' "—": the agent has no continuation there. rule:before success: every continuation is in it, '
        "so the column repeats the agent's overall success share."
    )
    assert tables["sts_categories"]["note"] == (
        "Each agent's success share over its continuations of each category, with its 95% interval. "
        '"—": the agent has no continuation there.'
    )
    # The admin's one classification: the note counts it, the row names its source and type.
    failures = tables["sts_failure_types"]
    assert failures["note"] == (
        "1 failed continuations classified by an admin, by the source of the error and its type; per "
        "agent, how many of its own."
    )
    [row] = failures["rows"]
    assert (row["error_type"], row["episodes"], row["share"], row["a:random"]) == ("empty", 1, 1.0, 1)
    assert [c["key"] for c in failures["columns"]] == [
        "source",
        "error_type",
        "description",
        "episodes",
        "share",
        "a:random",
    ]


def test_sts_without_reference_episodes_shows_why_nothing_is_corrected(session):
    """A study of the demo's continuations without its reference episodes: nothing measures the
    annotators' sensitivity or specificity, so every agent's corrected cell says why it is
    empty (a sentence, not an estimate), and the note says n/a over 0 markers."""
    from app.kinds.sts.demo import demo_lines
    from tests.integration.test_sts_analysis import _mark_all, _sts_study

    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, [x for x in demo_lines() if not x.get("reference")])
    _mark_all(session, study)
    agents = _tables(session, study)["sts_agents"]
    why = "n/a: no reference episodes labelled success and failure: sensitivity and specificity are not both measured"
    assert [r["corrected_share"] for r in agents["rows"]] == [why] * len(agents["rows"])
    assert all(r["corrected"] is None for r in agents["rows"])
    assert (
        "sensitivity (n/a, over 0 markers on success-labelled reference episodes) and specificity "
        "(n/a, over 0 on failure-labelled ones)" in agents["note"]
    )


# ---- the judged tables (app/leaderboards/judged.py) -----------------------------------------


def test_a_learned_judge_that_separates_peoples_verdicts_agrees_with_all_of_them():
    """The learned-predictor table's agreement cell: 20 continuations people marked, 10 success
    (1) and 10 failure (0), with a feature that says which; one they split (0.5), left out of
    the agreement as a tie; 10 more nobody marked. The cross-fitted predictor calls every one
    of the 20 as people did: agreement 20 of 20, 1.0 (Wilson n 20), not the 10 of 20 a verdict
    read as never success would give."""
    from app.leaderboards.judged import learned_row

    human = {f"c{i}": float(i % 2) for i in range(20)} | {"split": 0.5}
    features = {f"c{i}": [float(i % 2), float(i % 3)] for i in range(20)} | {"split": [0.5, 1.0]}
    features |= {f"new{i}": [float(i % 2), 0.0] for i in range(10)}
    row = learned_row(human, features, "continuation")
    assert (row["judged"], row["people"]["n"]) == (31, 21)
    assert (row["agreement"]["n"], row["agreement"]["mean"]) == (20, 1.0)


def test_an_offline_scorers_ppi_with_too_few_people_says_what_it_counts():
    """The A3DS, navigation and Hexagons scorers' people-and-judge figures (judged_summary):
    people judged 2 of 3 captions (1 and 0), the judge all three. Under 10 people's units: the
    mean 0.5 without an interval, and the reason names the unit, captions."""
    from app.leaderboards.judged import judged_summary

    got = judged_summary({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 0.0, "c": 1.0}, 0.05, "caption")
    assert got["judge"] == pytest.approx(2 / 3) and got["judge_agreement"]["mean"] == 1.0
    assert (got["ppi"]["n_human"], got["ppi"]["n_judge"], got["ppi"]["low"]) == (2, 1, None)
    assert got["ppi"]["reason"] == "2 captions judged by people: under 10, no interval"


def test_a_learned_judges_prediction_of_one_half_counts_as_success():
    """The learned table's agreement counts a prediction >= 0.5 as a success verdict (its column's
    help says so). People's 12 continuations: one success (1.0), eleven ties (0.5, left out of the
    agreement). The fold holding the success trains on ties only, so its model is their constant
    0.5: the success is predicted 0.5 exactly, a success verdict, and the predictor agrees with
    people on 1 of 1 decided continuation (0 of 1 if 0.5 were read as failure)."""
    from app.leaderboards.judged import learned_row

    human = {f"c{i}": (1.0 if i == 0 else 0.5) for i in range(12)}
    features = {f"c{i}": [float(i % 3), float(i)] for i in range(16)}
    row = learned_row(human, features, "continuation")
    assert (row["agreement"]["n"], row["agreement"]["mean"]) == (1, 1.0)
    assert row["judged"] == 16 and row["people"]["n"] == 12


def test_navigation_five_shared_paths_are_enough_to_rank(session):
    """Five paths, the fewest a rank interval needs (stats.MIN_RANK_UNITS): the speakers are
    ranked, and the note says by what, not "no ranking" (docs/testing.md, seed 53:
    `n_shared <= MIN_RANK_UNITS` read five paths as too few)."""
    from app.leaderboards import stats

    assert stats.MIN_RANK_UNITS == 5
    study, _ = _followed_once(session, "Five", paths=5, toy_fails=("51", "52"))
    metrics = _tables(session, study)["navigation_metrics"]
    rows = {r["category"]: r for r in metrics["rows"]}
    assert (rows["human"]["items"], rows["toy"]["items"]) == (5, 5)
    assert all(isinstance(r["rank"], str) for r in rows.values()), rows  # labels, not "—"
    assert "no ranking" not in metrics["note"]
    assert "Rank (95%): speakers ranked by SR over the 5 paths every speaker has" in metrics["note"]


# ---- the generic table -------------------------------------------------------------------------


def test_a_page_of_annotators_counts_only_this_studys_answers(session):
    """One worker (the same account: one Prolific id) annotates in two Common-ToM studies. The
    page's annotator rows (`compute(..., annotators=(offset, limit))`, the rows the page lists)
    count this study's answers only, as the unpaged rows do (docs/testing.md, seed 53: dropping
    the study from the paged query added the other study's answers to the worker's row)."""
    from app.leaderboards.service import compute
    from app.studies import assignment
    from app.studies.models import Annotation
    from tests.integration.test_tom_leaderboard import make_study

    owner = make_user(session, "researcher")
    studies = [make_study(session, owner, {}, title=t) for t in ("First", "Second")]
    for study in studies:  # one bundle in each
        bundle = assignment.enter(session, study, "prolific", "SAMEWORKER")
        a = assignment.next_item(session, study, bundle.id)
        while a is not None:
            item = session.get(Item, a.item_id)
            answer = {"answer": item.reference["answer"]}
            assignment.submit(session, study, bundle.id, a.id, answer, f"{study.id}-{a.id}")
            a = assignment.next_item(session, study, bundle.id)
    workers = {
        s.id: set(session.scalars(select(Annotation.worker_id).where(Annotation.study_id == s.id))) for s in studies
    }
    assert workers[studies[0].id] == workers[studies[1].id] and len(workers[studies[0].id]) == 1
    session.expire_all()
    first = studies[0]
    n_answers = len(session.scalars(select(Annotation.id).where(Annotation.study_id == first.id)).all())
    whole = [r for r in compute(session, first)["rows"] if r["type"] == "annotator"]
    paged = [r for r in compute(session, first, annotators=(0, 50))["rows"] if r["type"] == "annotator"]
    assert len(whole) == len(paged) == 1
    assert whole[0]["answered"] == paged[0]["answered"] == n_answers
    assert json.dumps(paged, sort_keys=True) == json.dumps(whole, sort_keys=True)
