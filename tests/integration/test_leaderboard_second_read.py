"""A second new reader of every kind's leaderboard (issue 25: "a new user reading each kind's
page can say what each number is without the docs"): what the first reading left unsaid or
said wrong. The STS corrected share is of the success markers, which the table now shows
beside it (with sensitivity and specificity 1 the two agree, and a reader can check it); the
reference game's cells count pairs as the other kinds' count their units, and its correlation
is over captions, not pairs; the Hexagons note's "same figure in P, R, F1 and EM" is true of
the action-based columns only, and a breakdown's note speaks of its own column; on the
generic table a random baseline's brackets say what they are, and the majority "labels"."""

from __future__ import annotations

import html as html_lib
import json
import re
from collections import Counter

import pytest
from sqlalchemy import select

from app.kinds import get_kind
from app.kinds.tom.demo import simulate_worker
from app.studies import services
from app.studies.models import Item
from tests.conftest import create_tom_study, login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "what the tables' notes and labels say: words over figures other modules check on both"
)


def _text(page: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


def _est_macro():
    from app.web import templates

    return templates.env.get_template("research/_estimates.html").module.est


# ---- STS: the corrected share is of the markers, and the page shows them ----------------------


def _sts_three_markers(session):
    """The demo's continuations, each marked by three annotators: the first two say success,
    the third failure (so every continuation's outcome is a success, 2 of its 3 markers say
    so); reference episodes marked right (sensitivity = specificity = 1)."""
    from tests.integration.test_sts import _truth, _upload
    from app.kinds.sts.demo import demo_lines
    from tests.integration.test_sts_analysis import _mark_all

    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="STS x3", bundle_size=6, gold_rate=0.2, annotations_per_item=3),
        _upload(demo_lines()),
        "continuations",
    )
    services.set_state(session, study, "live", owner)
    seen: Counter = Counter()

    def marker_of(item: Item):
        marker, step = _truth(item)
        if item.is_gold:
            return marker, step
        seen[item.id] += 1
        return ("success" if seen[item.id] <= 2 else "failure"), step

    _mark_all(session, study, marker_of)
    session.expire_all()
    return owner, study


def test_sts_corrected_share_is_the_marker_share_and_the_table_shows_it(client, session):
    owner, study = _sts_three_markers(session)
    section = get_kind("sts").extra_leaderboard(session, study)
    agents = next(t for t in section["tables"] if t["key"] == "sts_agents")
    # Every reference episode marked right: the correction is the identity.
    assert "sensitivity (1.00," in agents["note"] and "specificity (1.00," in agents["note"]
    keys = [c["key"] for c in agents["columns"]]
    assert "marked" in keys and keys.index("marked") < keys.index("corrected_share")
    marked_help = next(c["help"] for c in agents["columns"] if c["key"] == "marked")
    assert "the share the correction adjusts" in marked_help
    for row in agents["rows"]:
        # Majority of (success, success, failure): every continuation a success ...
        assert row["success"]["mean"] == pytest.approx(1.0)
        # ... but 2 of 3 markers say so, and that is what Rogan-Gladen corrects.
        assert row["marked"] == pytest.approx(2 / 3)
        assert row["corrected_share"]["mean"] == pytest.approx(row["marked"])
    # The note says which share is corrected, so 0.667 beside 1.000 reads as it should.
    assert "Corrected: that marker share (not the success share)" in agents["note"]
    assert "(marker share - (1 - specificity))" in agents["note"]
    ttc = next(c for c in agents["columns"] if c["key"] == "ttc_interval")
    assert ttc["label"] == "Median's 95% interval"
    login(client, owner)
    page = _text(client.get(f"/studies/{study.id}/leaderboard").text)
    assert "Success markers" in page and "Its interval" not in page


# ---- A3DS: cells count pairs; the correlation is over captions ---------------------------------


def test_a3ds_cells_count_pairs_and_the_correlation_says_captions(session):
    from app.kinds.a3ds.leaderboard import CORRELATION_HELP
    from tests.integration.test_sections_shapes import _tables, a3ds_picked_study

    study, _ = a3ds_picked_study(session)
    tables = _tables(session, study)
    est = _est_macro()
    for row in tables["a3ds_accuracy"]["rows"]:
        cell = row["accuracy"]
        assert (cell["unit"], cell["units"], cell["n"]) == ("pair", 3, 3)
        assert "(n = 3 pairs: too few for an interval)" in str(est(cell))
        for key in (k for k in row if k.startswith("z")):
            assert row[key]["unit"] == "pair"
    for row in tables["a3ds_paired"]["rows"]:
        assert "(n = 3 pairs: too few for an interval)" in str(est(row["diff"]))
    # Nine captions of three pairs: "all captioners" is over 9 captions, more than the pairs.
    assert "over pairs" not in CORRELATION_HELP and "captions" in CORRELATION_HELP
    note = tables["a3ds_correlation"]["note"]
    assert "Over items (pairs)" not in note and "one captioner's caption of one pair" in note
    (everyone,) = [r for r in tables["a3ds_correlation"]["rows"] if r["captioner"] == "all captioners"]
    assert everyone["items"] == 9


# ---- Hexagons: which columns coincide; a breakdown's note is about its column -----------------


def test_hexagons_notes_say_which_columns_coincide_and_breakdowns_speak_of_their_own():
    from app.kinds.hexagons.leaderboard import CELL_NOTE, build
    from tests.integration.test_hex_a3ds_certified import PROCS, _rows

    # A baseline that paints nothing: action P = R = F1 = EM = 0, but its board still holds the
    # earlier steps' tiles, so board P, R, F1 differ (the demo's "No action": 0.667, 0.267, 0.359).
    assert "same figure in P, R, F1 and EM of its action-based columns" in CELL_NOTE
    assert "board-based ones differ" in CELL_NOTE
    section = build(_rows(), PROCS)
    tables = {t["key"]: t for t in section["tables"]}
    assert "of its action-based columns" in tables["hexagons_metrics"]["note"]
    breakdowns = [t for k, t in tables.items() if k.startswith("hexagons_by_")]
    assert breakdowns
    for t in breakdowns:
        shown = {c["label"] for c in t["columns"]}
        assert "Coverage" not in shown and "Coverage" not in t["note"]
        assert "P, R, F1 and EM" not in t["note"] and "Action-based" not in t["note"]
        assert t["note"].startswith("Board F1: the harmonic mean of precision and recall")
        assert "under 5 procedures" in t["note"]


# ---- Common-ToM: the random baseline's brackets, the majority's blanks, who is ranked ---------


def test_tom_generic_table_says_what_a_baseline_bracket_is_and_who_is_ranked(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=40, gold_rate=0.1, annotations_per_item=3)
    items = session.execute(select(Item.external_id, Item.reference).where(Item.study_id == study.id)).all()
    for name in ("bot", "bot2"):
        agent = services.register_agent(session, owner, "tom", name)
        services.import_agent_outputs(
            session,
            study,
            agent,
            "\n".join(json.dumps({"question_id": ext, "answer": ref["answer"]}) for ext, ref in items).encode(),
        )
    simulate_worker(session, study, "sim-0", 0.9, seed=0)
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    generic = page[page.index('id="generic"') :]
    generic = generic[: generic.index("</section>")]
    text = _text(generic)
    assert "Random baseline" in text
    assert "A baseline's figures are not measured but expected" in text
    assert "the range 95% of such runs fall in" in text
    assert "Only agents are ranked" in text and "agents only (baselines and people are not ranked)" in text
    # The majority labels items, it answers none.
    majority = re.search(r'<tr class="majority">(.*?)</tr>', generic, re.S).group(1)
    if "no cluster in full" in majority:
        assert "— (labelled no cluster in full" in _text(majority)


# ---- What a third reading still tripped on ------------------------------------------------------


def test_tom_consistency_hover_counts_propositions(client, session):
    """A consistency figure's hover names what its n counts (ToM: propositions), as the
    clustered cells name procedures or scenarios."""
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
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    row = re.search(r'<tr class="agent">(.*?)</tr>', page, re.S).group(1)
    consistency = re.findall(r"<td>(.*?)</td>", row, re.S)[-1]  # the row's last cell
    # This study has 2 whole propositions: too few for an interval, counted in propositions.
    assert "(n = 2 propositions: too few for an interval)" in _text(consistency)
    # With enough of them, the interval's hover counts them too, once.
    cell = str(_est_macro()({"n": 12, "mean": 0.75, "low": 0.47, "high": 0.91, "method": "Wilson"}, "proposition"))
    assert 'title="95% interval: Wilson, n = 12 propositions"' in cell


def test_a_median_of_steps_reads_as_steps_not_to_three_places():
    from app.web import templates

    table = {
        "key": "t",
        "title": "T",
        "columns": [
            {"key": "ttc", "label": "Median steps", "help": "h", "format": "g"},
            {"key": "share", "label": "Share", "help": "h"},
        ],
        "rows": [{"ttc": 4.0, "share": 0.5}, {"ttc": 4.5, "share": 1.0}],
    }
    module = templates.env.get_template("research/_estimates.html").make_module({"min_interval_n": 5})
    cells = re.findall(r"<td>(.*?)</td>", str(module.kind_table(table)))
    assert cells == ["4", "0.500", "4.5", "1.000"]
