"""Each kind's leaderboard leads with its own table (issue 25, item 1), the generic table only
where its columns mean something, and a continuous score is a mean, never a rounded count."""

from __future__ import annotations

import re

import pytest

from app.kinds import all_kinds
from app.leaderboards import service
from tests.conftest import login, make_user


def _sections(page: str) -> list[tuple[str, str]]:
    """(id, heading) of every card on the page, in order."""
    return re.findall(r'<section class="card[^"]*" id="([^"]+)">\s*<h2>([^<]*)', page)


def test_each_kinds_page_leads_with_its_own_table(client, session):
    from app.studies.models import Study
    from tests.preview_fixtures import every_kind

    owner = make_user(session, "researcher")
    studies = every_kind(session, owner)
    login(client, owner)
    for name, study_id in studies.items():
        kind = all_kinds()[session.get(Study, study_id).kind]
        page = client.get(f"/studies/{study_id}/leaderboard")
        assert page.status_code == 200, name
        sections = _sections(page.text)
        assert sections, name
        lead_id, lead_title = sections[0]
        # The first card on the page is the kind's own primary table (or, for a kind whose
        # generic table is its primary one, that table titled with the kind's own metric).
        assert lead_id == (kind.primary_table or "generic"), (name, sections)
        if kind.primary_table is None:
            assert lead_title.strip() == kind.score_title, name
        # Navigation, STS and Hexagons have no generic table: its columns repeat their own.
        assert ('id="leaderboard"' in page.text) == kind.generic_table, name
        assert 'href="/help/statistics"' in page.text, name
    assert {all_kinds()[k].name for k in ("navigation", "sts", "hexagons")} and not any(
        all_kinds()[k].generic_table for k in ("navigation", "sts", "hexagons")
    )


def test_the_statistics_page_every_table_links_to_answers():
    from fastapi.testclient import TestClient

    from app.main import create_app

    with TestClient(create_app()) as c:
        r = c.get("/help/statistics")
    assert r.status_code == 200 and "unit resampled" in r.text.lower()


# Hand-worked: three procedures with board F1 0.9, 1.0 and 0.8 (sum 2.7) are a mean of 0.900,
# not round(2.7)/3 = 1.000; an annotator with a single 0.73 is 0.730, not 1.000. Wilson's
# interval with the fractional count k = 2.7 of n = 3 (z = 1.959964, z^2 = 3.841459):
#   centre = (k + z^2/2) / (n + z^2) = (2.7 + 1.920730) / 6.841459 = 0.675401
#   half   = z / (n + z^2) * sqrt(k (n - k) / n + z^2 / 4)
#          = 0.286484 * sqrt(0.27 + 0.960365) = 0.286484 * 1.109218 = 0.317773
#   -> [0.357629, 0.993174]
@pytest.mark.parametrize(
    "k, n, mean, low, high",
    [
        (2.7, 3, 0.9, 0.357629, 0.993174),
        (0.73, 1, 0.73, None, None),
    ],
)
def test_a_continuous_score_is_a_mean_not_a_rounded_count(k, n, mean, low, high):
    rows = service._assemble([("agent", "c", n, k)], {}, (n, {"c": n}, {}), over_all_items=True)
    acc = rows["agent"]["accuracy"]
    assert acc["mean"] == pytest.approx(mean, abs=1e-12) and acc["n"] == n
    assert rows["agent"]["by_category"]["c"]["mean"] == pytest.approx(mean, abs=1e-12)
    assert acc["method"] and acc["low"] <= mean <= acc["high"]
    if low is not None:
        assert (acc["low"], acc["high"]) == pytest.approx((low, high), abs=2e-6)


def test_rows_side_by_side_are_computed_alike():
    """An agent and a person with the same scores on the same items get the same estimate."""
    per_cat = [("agent", "c", 4, 3.5), ("person", "c", 4, 3.5)]
    agent = service._assemble(per_cat[:1], {}, (4, {"c": 4}, {}), over_all_items=True)["agent"]
    person = service._assemble(per_cat[1:], {}, (4, {"c": 4}, {}), over_all_items=False)["person"]
    assert agent["accuracy"] == person["accuracy"]
    assert agent["accuracy"]["mean"] == pytest.approx(0.875)


def test_agents_that_items_cannot_tell_apart_share_a_rank(client, session):
    """Two perfect agents are tied ("1-2"); one that gets every question wrong is 3rd, on the
    page and in the API, with the interval resampling propositions (Common-ToM's clusters)."""
    import json

    from sqlalchemy import select

    from app.studies import services
    from app.studies.models import Item
    from tests.conftest import create_tom_study

    from tests.integration.test_tom_leaderboard import _split_csv

    owner = make_user(session, "researcher")
    login(client, owner)

    def ranks(study) -> dict:
        refs = session.execute(
            select(Item.external_id, Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False))
        ).all()
        flip = {"Yes": "No", "No": "Yes"}
        for name, right in (("first", True), ("second", True), ("wrong", False)):
            agent = services.register_agent(session, owner, "tom", name, "1")
            services.import_agent_outputs(
                session,
                study,
                agent,
                "".join(
                    json.dumps({"question_id": q, "answer": r["answer"] if right else flip[r["answer"]]}) + "\n"
                    for q, r in refs
                ).encode(),
            )
        session.commit()
        return {
            r["name"]: r["rank"]
            for r in client.get(f"/api/v1/studies/{study.id}/leaderboard").json()["rows"]
            if r["type"] == "agent"
        }

    # The fixture's few propositions cannot order anyone (fewer than 5 units resampled): "—"
    # with the reason, the rule every kind's rank column follows (rows.rank_cells).
    few = {"text": "—", "reason": "2 clusters shared by every ranked system: fewer than 5 rank nobody"}
    assert ranks(create_tom_study(session, owner)) == {"first v1": few, "second v1": few, "wrong v1": few}
    # 100 questions on 6 propositions (18 questions each, the last 10).
    study = create_tom_study(session, owner, data=_split_csv(50, 50), title="Six propositions")
    assert ranks(study) == {"first v1": "1-2", "second v1": "1-2", "wrong v1": "3"}
    page = client.get(f"/studies/{study.id}/leaderboard").text
    assert "Rank (95%)</th>" in page
    assert re.search(r'<td>first v1</td><td>agent</td><td class="rank">1-2</td>', page)
    assert re.search(r'<td>wrong v1</td><td>agent</td><td class="rank">3</td>', page)


@pytest.mark.parametrize(
    "estimate, shown",
    [
        # A mean with no interval (t on one path, an unbounded value): the mean and why.
        (
            {"n": 6, "mean": 4.25, "low": None, "high": None, "method": "too few units for an interval (one)"},
            '4.250 <span class="muted">(too few units for an interval (one))</span>',
        ),
        # No mean at all (an agreement nobody varied on): a dash and the reason, never a 500.
        (
            {"n": 2, "mean": None, "low": None, "high": None, "method": "alpha", "reason": "no variation"},
            "— (no variation)",
        ),
        (
            {"n": 3, "mean": 0.9, "low": 0.36, "high": 0.99, "method": "Wilson"},
            '0.900 <span class="muted too-few">(n = 3: too few for an interval)</span>',
        ),
        (
            {"n": 12, "mean": 0.75, "low": 0.5, "high": 0.9, "method": "Wilson"},
            '<span title="95% interval: Wilson, n = 12">0.750 <span class="muted">[0.500, 0.900]</span></span>',
        ),
    ],
)
def test_every_estimate_renders_whatever_it_lacks(estimate, shown):
    from app.web import templates

    est = templates.env.get_template("research/_estimates.html").module.est
    assert shown in str(est(estimate))


def test_scores_csv_holds_every_figure_the_kinds_tables_show():
    """A kind's own tables reach scores.csv: one line per estimate, the table's key as its type."""
    from app.studies.exports import score_rows

    est = {"n": 12, "mean": 0.75, "low": 0.5, "high": 0.9, "method": "Wilson (effective n, clusters)"}
    board = {
        "rows": [],
        "extra": {
            "tables": [
                {
                    "key": "navigation_metrics",
                    "title": "Followers' metrics",
                    "columns": [
                        {"key": "category", "label": "Speaker"},
                        {"key": "items", "label": "Instructions"},
                        {"key": "success", "label": "SR (0-1)"},
                        {"key": "rank", "label": "Rank (95%)"},
                    ],
                    "rows": [{"category": "human", "items": 6, "success": est, "rank": "1"}],
                }
            ]
        },
    }
    assert list(score_rows(board)) == [
        ["navigation_metrics", "human", "SR (0-1)", "all", 12, 0.75, 0.5, 0.9, "Wilson (effective n, clusters)"]
    ]
