"""Every column of every leaderboard table says what it is (issue 25, "a new user reading each
kind's page can say what each number is without the docs"): each installed kind's section,
walked through the kind registry on a small study with data, gives every column a "help"
sentence (app/kinds/base.py's contract), and the page shows it (the header's title and
"What the columns mean" under the table), the generic and Dawid-Skene tables included. And
Cohen's d_z reads the same in every section (app/leaderboards/rows.py effect_size_cell): a
rounded number, "∞" or "—", each word with its reason; the Hexagons baselines are executed
once per page."""

from __future__ import annotations

import json
import math
import re
import uuid

import pytest

from app.kinds import all_kinds
from app.kinds.base import TaskKind
from app.leaderboards import stats
from app.leaderboards.rows import DZ_INFINITE, DZ_NO_EFFECT, DZ_TOO_FEW, effect_size_cell
from tests.conftest import login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "what each column's help says and where the page shows it: words, not stored figures"
)

# ---- d_z: one rule -----------------------------------------------------------------------------


def test_a_d_z_cell_is_a_rounded_number_or_a_word_with_its_reason():
    assert effect_size_cell(1.1547005383792515, 3) == 1.155
    assert effect_size_cell(-0.35218, 3) == -0.352
    assert math.copysign(1, effect_size_cell(-0.0001, 5)) == 1.0  # -0.0 reads 0.000, not -0.000
    assert effect_size_cell(math.inf, 4) == {"text": "∞", "reason": DZ_INFINITE}
    assert effect_size_cell(-math.inf, 4) == {"text": "−∞", "reason": DZ_INFINITE}
    assert effect_size_cell(math.nan, 1) == {"text": "—", "reason": DZ_TOO_FEW}
    assert effect_size_cell(math.nan, 0) == {"text": "—", "reason": DZ_TOO_FEW}
    assert effect_size_cell(math.nan, 4) == {"text": "—", "reason": DZ_NO_EFFECT}


@pytest.mark.parametrize(
    "a, b, cell",
    [
        # (2/3) / (1/sqrt(3)) = 1.1547: A3DS's hand-worked pair (test_sections_shapes).
        ([1.0, 1.0, 0.0], [0.0, 0.0, 0.0], 1.155),
        # The same difference, 0.2, on every unit: sd 0, mean not 0.
        ([0.9, 0.7, 0.5], [0.7, 0.5, 0.3], {"text": "∞", "reason": DZ_INFINITE}),
        ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], {"text": "−∞", "reason": DZ_INFINITE}),
        # No difference at all, and a single unit: undefined.
        ([0.5, 0.4], [0.5, 0.4], {"text": "—", "reason": DZ_NO_EFFECT}),
        ([0.5], [0.1], {"text": "—", "reason": DZ_TOO_FEW}),
    ],
)
def test_stats_paired_effect_reaches_the_page_by_the_rule(a, b, cell):
    from app.web import templates

    got = effect_size_cell(stats.paired_effect(a, b)["cohen_dz"], len(a))
    assert got == cell
    json.dumps(got, allow_nan=False)  # what the API sends
    table = {
        "key": "t",
        "title": "T",
        "columns": [{"key": "d_z", "label": "d_z", "help": "Cohen's d_z."}],
        "rows": [{"d_z": got}],
    }
    html = str(templates.env.get_template("research/_estimates.html").module.kind_table(table))
    if isinstance(cell, dict):
        # The word, and why, in words beside it (a phone has no hover).
        assert (
            f'<td><span title="{cell["reason"]}">{cell["text"]}</span> '
            f'<span class="muted">({cell["reason"]})</span></td>' in html
        )
    else:
        assert f"<td>{cell:.3f}</td>" in html


# ---- help on every column of every kind's section -------------------------------------------


def _navigation(session, monkeypatch) -> list[dict]:
    """Speakers human and toy, two followers per instruction, two Likert questions; the model
    listeners' agreement and the capability analysis come from their own tests' material."""
    from app.kinds.navigation import agreement, capability
    from app.kinds.navigation.environments import import_house
    from app.studies import assignment, services
    from app.studies.models import Item
    from tests.integration.test_nav_likert import LIKERT
    from tests.integration.test_navigation_leaderboard import coop_file, house
    from tests.unit.test_nav_capability_analysis import P1, P2, P3

    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Speakers", bundle_size=4, gold_rate=0.0, annotations_per_item=2)
    study = services.create_study(
        session, owner, "navigation", s, coop_file(h), "coop", {"speaker": "toy", "likert": LIKERT}
    )
    services.set_state(session, study, "live", owner)
    for w in range(5):
        bundle = assignment.enter(session, study, "prolific", f"lk-{w}")
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {
                    "path": item.reference["path"],
                    "rating": 1 + (w + a.id) % 4,
                    "likert": {"clarity": 1 + (w * 7 + a.id) % 3, "confidence": 1 + (w + a.id) % 2},
                },
                uuid.uuid4().hex,
            )
    est = stats.mean_interval([0.5, 0.7, 0.9]).as_dict()
    monkeypatch.setattr(
        agreement,
        "agreement_rows",
        lambda session, study: [
            {"category": "toy", "listener": "l v1", "agreement": est, "instructions": 3, "human_paths": 6}
        ],
    )
    monkeypatch.setattr(
        capability,
        "tables",
        lambda session, study: capability.speaker_tables(
            "t5", capability.analyse([P1, P2, P3], metrics=("success", "ndtw"))
        ),
    )
    return _section(session, study)


def _a3ds(session, monkeypatch) -> list[dict]:
    from tests.integration.test_sections_shapes import a3ds_picked_study

    study, _ = a3ds_picked_study(session)
    return _section(session, study)


def _hexagons(session, monkeypatch) -> list[dict]:
    """Eleven procedures and two agents (the paired table), and the executors' abstraction
    labels of the consolidation test's study (the agreement table)."""
    from app.studies import services
    from tests.integration.test_hex_consolidation import disagreement_study
    from tests.integration.test_hex_rule_baseline import ONE, TWO
    from tests.integration.test_hex_rule_baseline import _line as rule_line

    owner = make_user(session, "researcher")
    data = "\n".join(rule_line(i) for i in range(1, 12)).encode()
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
    labelled = disagreement_study(session, make_user(session, "researcher"), label_abstraction=True)
    return _section(session, study) + _section(session, labelled)


def _sts(session, monkeypatch) -> list[dict]:
    """The demo's continuations and a third agent, every continuation marked; the admins'
    failure classification as its summary gives it."""
    from app.kinds.sts import failures
    from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents

    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, _three_agents())
    _mark_all(session, study)
    monkeypatch.setattr(
        failures,
        "summary",
        lambda session, study: {
            "total": 2,
            "agents": ["random"],
            "rows": [
                {"source": "agent", "error_type": "t", "description": "d", "episodes": 2, "share": 1.0, "a:random": 2}
            ],
        },
    )
    return _section(session, study)


def _section(session, study) -> list[dict]:
    from app.kinds import get_kind
    from app.leaderboards.ranking import section

    session.expire_all()
    extra = section(session, study, get_kind(study.kind))  # the kind's tables and the settled one
    assert extra and extra["tables"], study.kind
    return extra["tables"]


# A study with data for each kind that has a section of its own; a kind added without one here
# fails the walk below, so its columns are checked too.
STUDIES = {"navigation": _navigation, "a3ds": _a3ds, "hexagons": _hexagons, "sts": _sts}
# The tables each study shows: every one of the kind's tables (breakdowns by tag or suite
# version, and Hexagons' by abstraction level, are the same code as the breakdowns here).
EXPECTED = {
    "navigation": {
        "navigation_metrics",
        "navigation_paired",
        "navigation_settled",
        "navigation_followers_agreement",
        "navigation_agreement",
        "nav_capability",
        "nav_capability_advice",
        "nav_capability_scores",
        "navigation_likert",
    },
    "a3ds": {"a3ds_accuracy", "a3ds_metrics", "a3ds_correlation", "a3ds_paired", "a3ds_settled"},
    "hexagons": {
        "hexagons_metrics",
        "hexagons_by_category",
        "hexagons_by_step",
        "hexagons_paired",
        "hexagons_agreement",
        "hexagons_ppi",  # one category of procedures: no settled table (the others' is the same code)
    },
    "sts": {
        "sts_agents",
        "sts_categories",
        "sts_scenarios",
        "sts_correlation",
        "sts_failure_types",
        "sts_annotators",
        "sts_settled",
    },
}


def _unhelped(tables: list[dict]) -> list[str]:
    """table key: column label, for every column without a help sentence."""
    bad = []
    for t in tables:
        for c in t["columns"]:
            help_ = c.get("help")
            if not (isinstance(help_, str) and len(help_.split()) >= 2 and help_.rstrip().endswith((".", ")"))):
                bad.append(f"{t['key']}: {c.get('label')!r}")
    return bad


@pytest.mark.usefixtures("hexagons_kind")
def test_every_column_of_every_kinds_section_has_help(session, monkeypatch):
    walked = {}
    for name, kind in all_kinds().items():
        if type(kind).extra_leaderboard is TaskKind.extra_leaderboard:
            continue  # the generic table only: its help is the page's own (the test below)
        assert name in STUDIES, f"the {name!r} kind has a leaderboard section: add a study to walk it here"
        tables = STUDIES[name](session, monkeypatch)
        assert EXPECTED.get(name, set()) <= {t["key"] for t in tables}, name
        assert not _unhelped(tables), (name, _unhelped(tables))
        walked[name] = len(tables)
    assert set(STUDIES) <= set(walked)


def test_a_column_without_help_is_caught():
    assert _unhelped(
        [
            {
                "key": "t",
                "columns": [
                    {"key": "a", "label": "A", "help": "The first thing."},
                    {"key": "b", "label": "B"},
                    {"key": "c", "label": "C", "help": ""},
                ],
            }
        ]
    ) == ["t: 'B'", "t: 'C'"]


# ---- the page shows it -----------------------------------------------------------------------


def _headers(html: str, table_id: str) -> list[tuple[str, str]]:
    """(attributes, text) of the header cells of the table with that id."""
    start = html.index(f'id="{table_id}"')
    head = html[start : html.index("</thead>", start)]
    return re.findall(r"<th([^>]*)>(.*?)</th>", head.split("<thead>", 1)[1], flags=re.DOTALL)


def test_the_generic_and_dawid_skene_tables_explain_every_column(session, client):
    """Common-ToM's page leads with the generic table: each header with its help as its title
    and description, the same help listed under the table, and the Dawid-Skene table likewise."""
    from app import jobs
    from app.kinds.tom.demo import simulate_worker
    from tests.conftest import create_tom_study

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    for n, name in enumerate(("careful", "hasty")):
        simulate_worker(session, study, name, accuracy=0.9 - n * 0.3, seed=n)
    assert jobs.refresh_cached_models() == [study.id]
    assert jobs.run_queued_once() == 1  # the Dawid-Skene labels, as the worker fits them
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200
    html = page.text
    heads = _headers(html, "leaderboard")
    assert len(heads) >= 5
    legend = html[html.index('id="leaderboard-help"') :]
    legend = legend[: legend.index("</details>")]
    assert "<summary>What the columns mean</summary>" in legend
    for k, (attrs, label) in enumerate(heads, start=1):
        # The help on hover (the header's title) and for screen readers (its description).
        assert f'aria-describedby="leaderboard-help-{k}"' in attrs, label
        help_ = re.search(r'title="([^"]+)"', attrs).group(1)
        assert f'<dt>{label}</dt><dd id="leaderboard-help-{k}">{help_}</dd>' in legend
    ds = _headers(html, "dawid-skene-table")
    assert len(ds) >= 3 and all('title="' in attrs for attrs, _ in ds)
    assert 'id="dawid-skene-table-help"' in html and 'id="agreement-help"' in html


@pytest.mark.usefixtures("hexagons_kind")
def test_the_hexagons_page_computes_its_baselines_once(session, client, monkeypatch):
    """The generic rows (Hexagons.baselines) and the section both need "No action" and the
    rule-based executor: one page render executes them once."""
    from app.kinds.hexagons import leaderboard
    from app.studies import services
    from tests.integration.test_hex_rule_baseline import ONE
    from tests.integration.test_hex_rule_baseline import _line as rule_line

    owner = make_user(session, "researcher")
    data = "\n".join(rule_line(i) for i in range(1, 8)).encode()
    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Hex once", bundle_size=7, gold_rate=0.0, annotations_per_item=1),
        data,
        "procedures",
    )
    agent = services.register_agent(session, owner, "hexagons", "copier", "1")
    services.import_agent_outputs(
        session,
        study,
        agent,
        "\n".join(json.dumps({"index": i, "step": k, "board": ONE}) for i in range(1, 8) for k in (1, 2)).encode(),
    )
    calls = []
    real = leaderboard._rule_based
    monkeypatch.setattr(leaderboard, "_rule_based", lambda refs, payloads: calls.append(1) or real(refs, payloads))
    monkeypatch.setattr(leaderboard, "_BASELINES", [])
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200 and 'id="hexagons_metrics"' in page.text
    assert "No action (paints nothing)" in page.text
    assert len(calls) == 1
