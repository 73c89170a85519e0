"""One settled-table builder for every kind that ranks agents (issue 29): an STS study's page
shows its agents' settled comparisons from people's markers, and adaptive allocation puts the
open agents' episodes first, through the same core (app/leaderboards/ranking.py) navigation
uses. SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select

from app.kinds import all_kinds
from app.leaderboards import adaptive
from app.studies.models import Item
from tests.conftest import login, make_user
from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents


def test_an_sts_study_has_the_settled_table_and_can_adapt(client, session):
    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, _three_agents())
    # The expert and its copy always succeed; the random policy always fails.
    _mark_all(session, study, lambda item: ("failure" if item.reference.get("agent") == "random" else "success", 1))
    login(client, owner)
    got = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert got.status_code == 200, got.text
    table = next(t for t in got.json()["extra"]["tables"] if t["key"] == "sts_settled")
    pairs = {(r["first"], r["second"]): r for r in table["rows"]}
    agents = {a for pair in pairs for a in pair}
    assert {"expert", "copycat", "random"} <= agents
    scenarios = len({i.cluster for i in session.scalars(select(Item).where(Item.study_id == study.id))})
    for row in table["rows"]:  # one value per agent and scenario, the agents' own
        assert 0 < row["n"] <= scenarios
        if "random" in (row["first"], row["second"]):
            assert row["difference"]["mean"] == (1.0 if row["second"] == "random" else -1.0)
        else:
            assert row["difference"]["mean"] == 0.0
    assert "scenario" in table["note"] and "success" in table["title"]
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200 and 'id="sts_settled"' in page.text

    # Adaptive allocation reads the same arrivals: turned on, its job gives each agent's
    # episodes a priority (open agents' above 1).
    r = client.patch(f"/api/v1/studies/{study.id}", json={"adaptive": True})
    assert r.status_code == 200, r.text
    session.expire_all()
    found = adaptive.refresh_study(session, study)
    assert set(found["open"]) | set(found["settled"]) >= {"expert", "copycat", "random"}
    for item in session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))):
        assert (item.priority >= 1) == (item.reference["agent"] in found["open"]), item.external_id


def test_every_kind_that_ranks_agents_can_run_adaptively():
    ranked = {name for name, kind in all_kinds().items() if kind.ranking_for({}) is not None}
    assert {"navigation", "sts", "a3ds", "hexagons"} <= ranked
    for name in ranked:
        assert all_kinds()[name].adaptive_for({}), name


def test_the_pages_say_what_adaptivity_buys_and_when_the_table_is_valid(client, session):
    """Review findings b and c: adaptivity above the floor settles nothing (a unit's first value
    per agent counts), and the table is valid when the units' order does not depend on their
    values; the study card and the table's note say so, no more."""
    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, _three_agents())
    login(client, owner)
    card = client.get(f"/studies/{study.id}").text
    what = card[card.index('id="adaptive-what"') :].split("</p>")[0]
    assert "first judgement on a unit" in what and "beyond an item's first changes no verdict" in what
    assert "so the ranking settles with fewer judgements" not in card
    _mark_all(session, study)
    board = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    note = next(t for t in board["extra"]["tables"] if t["key"] == "sts_settled")["note"]
    assert "does not depend on their values" in note and "without seeing its value" not in note
