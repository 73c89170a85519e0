"""What a new reader of each kind's leaderboard sees (issue 25: "a new user reading each kind's
page can say what each number is without the docs"): one rank rule, exact p-values for a few
agents, paired tests that say when they are too small, cells whose blanks say why, and the
page's wording for the STS and Common-ToM tables. The first half checks the statistics core and
the cells alone (no database; one file, as tests/unit and tests/integration share basenames'
module names)."""

from __future__ import annotations

import html as html_lib
import itertools
import json
import re

import numpy as np
import pytest
import scipy.stats
from sqlalchemy import select

from app.kinds import get_kind
from app.kinds.tom.demo import simulate_worker
from app.leaderboards import rows, stats
from app.leaderboards.plot import COLOURS, interval_svg
from app.studies import services
from app.studies.models import Item
from tests.conftest import create_tom_study, login, make_user
from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents


def _exact_p(a, b):
    """Two-sided exact permutation p of Spearman's rho, by enumerating every ordering of b:
    each ordering of the values ranked afresh (mean ranks for ties) and its rho the Pearson
    correlation of the ranks, as scipy's spearmanr defines it (checked on b's own order; 5,040
    spearmanr calls for seven took 5 s)."""
    ra = scipy.stats.rankdata(a)
    ranks = scipy.stats.rankdata(np.asarray(b, dtype=float)[list(itertools.permutations(range(len(b))))], axis=1)
    da, dr = ra - ra.mean(), ranks - ranks.mean(axis=1, keepdims=True)
    rhos = (dr @ da) / np.sqrt((da @ da) * (dr * dr).sum(axis=1))
    assert rhos[0] == pytest.approx(scipy.stats.spearmanr(a, b)[0])  # the identity ordering comes first
    return float(np.mean(np.abs(rhos) >= abs(rhos[0]) - 1e-12))


# ---- 2: Spearman's p is exact for a few agents -------------------------------------------------


def test_spearman_over_three_agents_in_perfect_order_has_p_one_third():
    # Of the 3! = 6 orderings of three agents, 2 have |rho| = 1: p = 1/3, not scipy's 0.000.
    got = stats.spearman([0.667, 0.333, 0.0], [1.0, 0.333, 0.0])
    assert got["rho"] == pytest.approx(1.0) and got["p"] == pytest.approx(1 / 3)
    assert got["method"] == "exact permutation" and got["n"] == 3


@pytest.mark.parametrize("seed", range(5))
def test_spearman_p_is_the_exact_enumeration_up_to_nine(seed):
    rng = np.random.default_rng(seed)
    n = 3 + seed  # 3 .. 7: the code is one path up to nine; the reference's 8! scipy calls took 12 s
    a = rng.integers(0, 4, n).astype(float).tolist()  # ties too
    b = rng.random(n).tolist()
    if len(set(a)) < 2:
        a[0] += 1
    got = stats.spearman(a, b)
    assert got["rho"] == pytest.approx(scipy.stats.spearmanr(a, b)[0])
    assert got["p"] == pytest.approx(_exact_p(a, b))


def test_spearman_is_undefined_for_under_three_or_a_constant_side():
    assert stats.spearman([1, 2], [1, 2])["p"] is None
    assert stats.spearman([1, 1, 1], [1, 2, 3])["rho"] is None


def test_the_sts_and_a3ds_correlation_cells_use_the_exact_p_in_one_format():
    from app.kinds.a3ds.leaderboard import spearman as a3ds_spearman
    from app.kinds.sts.leaderboard import spearman as sts_spearman

    assert sts_spearman([0.667, 0.333, 0.0], [1.0, 0.333, 0.0]) == {
        "rho": pytest.approx(1.0),
        "p": pytest.approx(1 / 3),
    }
    assert a3ds_spearman([3.0, 2.0, 1.0], [0.9, 0.5, 0.1])["p"] == pytest.approx(1 / 3)
    # Every p prints with three places ("1.000", never "1"), "<0.001" below 0.0005.
    assert [rows.p_text(p) for p in (1.0, 0.4229, 0.0001, None)] == ["1.000", "0.423", "<0.001", "—"]


# ---- 1: one rank rule --------------------------------------------------------------------------


def test_under_min_rank_units_every_rank_cell_is_a_dash_with_its_reason():
    few = {"a": [1.0, 0.0, 1.0], "b": [0.0, 0.0, 1.0], "c": [0.0, 0.0, 0.0]}
    cells = rows.rank_cells(few, "scenario")
    assert cells == {
        w: {"text": "—", "reason": "3 scenarios shared by every ranked system: fewer than 5 rank nobody"} for w in few
    }
    assert rows.rank_cells({w: [] for w in few}, "scenario")["a"]["reason"].startswith("0 scenarios")
    enough = {w: v * 3 for w, v in few.items()}  # 9 units
    assert rows.rank_cells(enough, "scenario") == {
        w: stats.rank_label(i) for w, i in stats.rank_intervals(enough).items()
    }
    assert rows.rank_cells({"a": [1.0] * 9}, "scenario") == {}


# ---- 4: a paired difference too small for an interval is too small for a test ------------------


def test_too_few_for_a_test_below_the_interval_cutoff():
    assert rows.too_few_for_a_test(3) == {"text": "—", "reason": "n = 3: too few for a test"}
    assert rows.too_few_for_a_test(rows.MIN_INTERVAL_N) is None


# ---- 3: a clustered cell counts its clusters ---------------------------------------------------


def _est_macro():
    from app.web import templates

    return templates.env.get_template("research/_estimates.html").module.est


def test_a_clustered_estimate_on_few_clusters_says_too_few_counting_clusters():
    # 6 steps of 2 procedures: the interval resamples 2 units, so no interval, n = 2 procedures.
    cell = rows.clustered([1, 1, 0.9, 1, 1, 0.8], [1, 1, 1, 2, 2, 2], "procedure")
    assert (cell["n"], cell["units"], cell["unit"]) == (6, 2, "procedure")
    html = str(_est_macro()(cell))
    assert "(n = 2 procedures: too few for an interval)" in html and "[" not in html
    # Enough clusters: the interval, its hover naming both counts.
    cell = rows.clustered([1, 0.5] * 5, [1, 1, 2, 2, 3, 3, 4, 4, 5, 5], "procedure")
    assert "n = 5 procedures (10 values)" in str(_est_macro()(cell))


def test_hexagons_cells_count_procedures_not_steps():
    from app.kinds.hexagons import metrics
    from app.kinds.hexagons.leaderboard import ProcedureInfo, Row, build

    procs = {1: ProcedureInfo("c", 3, [None] * 3), 2: ProcedureInfo("c", 3, [None] * 3)}
    person = Row("human", "w-1")
    for i, values in {1: [1, 1, 0.9], 2: [1, 1, 0.8]}.items():
        person.executions[i].append(np.repeat(np.array(values)[:, None], len(metrics.KEYS), axis=1))
    table = build([person], procs)["tables"][0]
    cell = table["rows"][0]["board_f1"]
    assert (cell["n"], cell["units"], cell["unit"]) == (6, 2, "procedure")
    assert "n = 2 procedures: too few for an interval" in str(_est_macro()(cell))
    assert "procedures" in table["note"] and "under 5 procedures" in table["note"]


# ---- 5: the plots draw only what the colour key names ------------------------------------------


def test_the_generic_plot_leaves_out_the_dawid_skene_row():
    e = {"mean": 0.9, "low": 0.6, "high": 0.98, "n": 10, "method": "Wilson"}
    board = {
        "rows": [
            {"type": "majority", "name": "Human majority (per item)", "accuracy": e},
            {"type": "dawid_skene", "name": "Dawid-Skene labels", "accuracy": e},
            {"type": "agent", "name": "bot", "accuracy": e},
        ]
    }
    svg = str(interval_svg(board))
    assert "Dawid-Skene" not in svg and "#111" not in svg
    assert COLOURS["majority"] in svg and COLOURS["agent"] in svg


# ==== the kinds' sections and pages ============================================================


def _text(page: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


def _sts_tables(session, scenarios: int | None = None):
    """The demo's continuations and a third agent (copycat: the expert's episodes); with
    `scenarios`, only the first that many scenarios' continuations (reference episodes all)."""
    owner = make_user(session, "researcher")
    lines = _three_agents()
    if scenarios is not None:
        keep = sorted({x["scenario"] for x in lines if not x.get("reference")})[:scenarios]
        lines = [x for x in lines if x.get("reference") or x["scenario"] in keep]
    study = _sts_study(session, owner, lines)
    _mark_all(session, study)
    session.expire_all()
    section = get_kind("sts").extra_leaderboard(session, study)
    return owner, study, {t["key"]: t for t in section["tables"]}


# ---- 1: one rank rule everywhere ---------------------------------------------------------------


def test_sts_ranks_nobody_on_too_few_shared_scenarios_and_says_why(client, session):
    _, _, tables = _sts_tables(session, scenarios=3)
    agents = tables["sts_agents"]
    shared = re.search(r"over the (\d+) scenarios every agent played", agents["note"])
    assert shared and int(shared.group(1)) < stats.MIN_RANK_UNITS
    n = int(shared.group(1))
    reason = f"{n} scenario{'' if n == 1 else 's'} shared by every ranked system: fewer than 5 rank nobody"
    assert [r["rank"] for r in agents["rows"]] == [{"text": "—", "reason": reason}] * len(agents["rows"])


# ---- 2: Spearman's p over three agents is exact ------------------------------------------------


def _check_the_correlation_over_three_agents_prints_the_exact_p(tables) -> None:
    (row,) = tables["sts_correlation"]["rows"]
    assert row["agents"] == 3
    # Over 3 agents the smallest possible two-sided p is 1/3 (2 of the 3! orderings are as
    # extreme): never scipy's asymptotic 0.000.
    shares = {r["agent"]: r for r in tables["sts_agents"]["rows"]}
    exact = stats.spearman([r["success"]["mean"] for r in shares.values()], [r["simulator"] for r in shares.values()])
    assert exact["method"] == "exact permutation" and exact["p"] >= 1 / 3 - 1e-12
    assert row["p"] == pytest.approx(exact["p"])
    assert "exact" in tables["sts_correlation"]["note"]


# ---- 7 and 10: the STS table's blanks, corrections and formats ---------------------------------


def test_sts_correlation_and_cells_say_what_they_are(client, session):
    """Sections 2, 7 and 10 on one three-agent study: making it and marking every item
    through the engine is most of the time, and both checks read the same study."""
    owner, study, tables = _sts_tables(session)
    _check_the_correlation_over_three_agents_prints_the_exact_p(tables)
    agents = tables["sts_agents"]
    # One format for time to completion: every median a float ("4.000", never "4" beside it).
    assert all(r["ttc"] is None or isinstance(r["ttc"], float) for r in agents["rows"])
    # The corrected share says it is clipped; the pooled rates say how many markers they rest on.
    assert "clipped to [0, 1]" in agents["note"]
    assert re.search(r"sensitivity \([0-9.na/]+, over \d+ markers? on success-labelled", agents["note"])
    assert any("clipped" in c["help"] for c in agents["columns"] if c["key"] == "corrected_share")
    # Clustered cells count their scenarios.
    assert all(r["success"]["unit"] == "scenario" and r["success"]["units"] >= 1 for r in agents["rows"])
    # An agent that did not play a scenario or category: the blank says so.
    assert "did not play that scenario" in tables["sts_scenarios"]["note"]
    assert "no continuation there" in tables["sts_categories"]["note"]
    # The Dawid-Skene table names what an STS item's right answer is.
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    if "dawid-skene-table" in page:
        assert "the simulator's own verdict" in page


# ---- 4: a paired difference too small for an interval shows no d_z or p ------------------------


def test_a3ds_paired_rows_on_three_pairs_show_no_test(session):
    from tests.integration.test_sections_shapes import _tables, a3ds_picked_study

    study, _ = a3ds_picked_study(session)
    tables = _tables(session, study)
    too_few = {"text": "—", "reason": "n = 3: too few for a test"}
    for row in tables["a3ds_paired"]["rows"]:
        assert row["pairs"] == 3 and row["diff"]["n"] == 3
        assert (row["d_z"], row["p"], row["p_holm"]) == (too_few, too_few, too_few)
    acc = tables["a3ds_accuracy"]
    assert all(
        r["rank"] == {"text": "—", "reason": "3 pairs shared by every ranked system: fewer than 5 rank nobody"}
        for r in acc["rows"]
    )
    # One format for a correlation's p, "—" (not "-") where there is none.
    for row in tables["a3ds_correlation"]["rows"]:
        for k, v in row.items():
            if k not in ("captioner", "items"):
                assert v == "—" or re.search(r"\(p (<0\.001|\d\.\d{3}), n \d+\)$", v), v


# ---- 6: Common-ToM people: consistency blanks say why; the People count ------------------------


def test_tom_people_rows_say_why_they_have_no_consistency(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=40, gold_rate=0.1, annotations_per_item=3)
    items = session.execute(select(Item.external_id, Item.reference).where(Item.study_id == study.id)).all()
    agent = services.register_agent(session, owner, "tom", "bot")
    services.import_agent_outputs(
        session,
        study,
        agent,
        "\n".join(json.dumps({"question_id": ext, "answer": ref["answer"]}) for ext, ref in items).encode(),
    )
    for w, acc in enumerate((0.95, 0.8)):
        simulate_worker(session, study, f"sim-{w}", acc, seed=w)
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    people = page[page.index('id="section-people"') :]
    people = people[: people.index("</tbody>")]
    head = _text(people[: people.index("</tr>")])
    n = people.count('<tr class="annotator">')
    assert f"People ({n} annotator{'' if n == 1 else 's'} and their majority)" in head
    # A person who answered no proposition in full has no consistency: the cell says so.
    assert "— (answered no cluster in full" in _text(people) or "[" in _text(people)
    people_rows = [r for r in re.findall(r'<tr class="(?:annotator|majority)">(.*?)</tr>', people, re.S)]
    for r in people_rows:
        last = _text(r.split("<td>")[-1])
        assert last.strip() != "—"


# ---- 5: the Dawid-Skene section links the statistics page, not a file path -------------------


def test_no_file_paths_or_function_names_in_the_page_text(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=40, gold_rate=0.1, annotations_per_item=3)
    simulate_worker(session, study, "sim-0", 0.9, seed=0)
    login(client, owner)
    text = _text(client.get(f"/studies/{study.id}/leaderboard").text)
    for word in ("docs/quality.md", "DESIGN.md", "stats.mean_interval", "stats.paired_effect"):
        assert word not in text


@pytest.mark.parametrize("kind", ["navigation", "navigation.agreement", "navigation.likert", "hexagons", "a3ds", "sts"])
def test_kind_tables_name_no_code_or_files(kind):
    import importlib
    import inspect

    name = kind if "." in kind else f"{kind}.leaderboard"
    module = importlib.import_module(f"app.kinds.{name}")
    source = inspect.getsource(module)
    # Only in user-facing strings ("note"/"help" text): a quoted "stats.x" or a design file.
    shown = re.findall(r'"[^"\n]*(?:\(stats\.\w+|DESIGN\.md|docs/quality\.md)[^"\n]*"', source)
    assert not [s for s in shown if not s.startswith('"""')], shown


# ---- 8: columns equal by construction say so ---------------------------------------------------


def test_sts_group_columns_that_hold_every_continuation_say_they_repeat_the_share():
    from app.kinds.sts.leaderboard import _group_table

    outcomes = {("a", "s1", "c1"): 1.0, ("a", "s2", "c1"): 0.0}
    members = {k: ["v1", "demo"] + (["rare"] if k[1] == "s1" else []) for k in outcomes}
    table = _group_table("sts_tags", "Tags", "Tags.", ["a"], ["demo", "rare", "v1"], members, outcomes)
    assert "demo, v1: every continuation is in each, so the column repeats" in table["note"]
    assert "rare" not in table["note"].split("no continuation there.")[1]


def test_hexagons_note_says_when_p_r_f1_and_em_coincide():
    from app.kinds.hexagons.leaderboard import CELL_NOTE

    assert "same figure in P, R, F1 and EM" in CELL_NOTE


# ---- 9: legends say the method in words --------------------------------------------------------


def test_navigation_sr_legend_names_its_method():
    from app.kinds.navigation.leaderboard import COLUMN_HELP

    assert "Wilson's at the effective number of paths" in COLUMN_HELP["success"]
    assert all("resampling paths" not in h for h in COLUMN_HELP.values())


# ---- 11: the ranked metric in view; a scroll cue on wide tables --------------------------------


def test_hexagons_lead_table_puts_the_ranked_metric_beside_the_names():
    from tests.integration.test_hex_a3ds_certified import PROCS, _rows
    from app.kinds.hexagons.leaderboard import build

    keys = [c["key"] for c in build(_rows(), PROCS)["tables"][0]["columns"]]
    assert keys[:4] == ["section", "who", "rank", "board_f1"] and keys.count("board_f1") == 1


def test_wide_tables_show_a_scroll_cue():
    from tests.conftest import ROOT

    css = (ROOT / "static" / "app.css").read_text()
    rule = css[css.index("/* A scroll cue") :]
    rule = rule[: rule.index("}")]
    assert "no-repeat local" in rule and "no-repeat scroll" in rule


# ---- 10: "too few" reads the same in the time-to-completion column -----------------------------


def test_sts_time_to_completion_says_too_few_as_every_cell_does():
    from app.kinds.sts.leaderboard import ttc_cell
    from app.kinds.sts.score import time_to_completion

    assert ttc_cell(time_to_completion([4.0, 5.0])) == "n = 2: too few for an interval"
    assert ttc_cell(time_to_completion([])) is None


def test_a_kind_table_prints_every_p_and_blank_one_way():
    from app.web import templates

    table = {
        "key": "t",
        "title": "T",
        "columns": [{"key": "p", "label": "p", "help": "p."}],
        "rows": [{"p": 1.0}, {"p": 0.4229}, {"p": 0.0001}, {"p": None}, {"p": "-"}],
    }
    html = str(templates.env.get_template("research/_estimates.html").module.kind_table(table))
    cells = re.findall(r"<td>(.*?)</td>", html)
    assert cells == ["1.000", "0.423", "&lt;0.001", '<span class="muted">—</span>', '<span class="muted">—</span>']
