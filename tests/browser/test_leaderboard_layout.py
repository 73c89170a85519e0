"""The leaderboard separates agents, baselines and people at a glance, with the items each row
answered beside it, and fits a phone's 390 px screen."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import ROOT, make_user

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8


def _study(db_url: str) -> tuple[str, int, int]:
    from app.db import get_sessionmaker
    from app.kinds.tom.demo import simulate_worker
    from app.studies import services
    from app.studies.models import Item

    with get_sessionmaker(db_url)() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "tom",
            services.StudySettings(
                title="A study whose title is long enough to wrap", bundle_size=10, annotations_per_item=1
            ),
            (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes(),
            "csv",
            {"random_yes_rate": 0.5},
        )
        services.set_state(s, study, "live", owner)
        ids = s.scalars(select(Item.external_id).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
        agent = services.register_agent(s, owner, "tom", "a-language-model-with-a-long-name", "3")
        services.import_agent_outputs(
            s, study, agent, "".join(json.dumps({"question_id": i, "answer": "Yes"}) + "\n" for i in ids[:12]).encode()
        )
        for n, name in enumerate(("careful", "hasty")):
            simulate_worker(s, study, name, accuracy=0.9 - n * 0.3, seed=n)
        return owner.email, study.id, len(ids)


def _log_in(page, url: str, email: str) -> None:
    page.goto(f"{url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_the_leaderboard_separates_agents_from_people(live_server, page):
    email, study_id, n_items = _study(live_server.db_url)
    _log_in(page, live_server.url, email)
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    board = page.locator("#leaderboard")
    expect(board.locator("th", has_text=f"Items answered (of {n_items})")).to_be_visible()
    agents, people = board.locator("#section-agents"), board.locator("#section-people")
    expect(agents.locator("tr.section-head")).to_contain_text("Agents (1)")
    expect(agents.locator("tr.agent td").nth(0)).to_have_text("a-language-model-with-a-long-name v3")
    expect(agents.locator("tr.agent td").nth(2)).to_have_text("12")  # items answered, beside it
    expect(board.locator("#section-baselines tr.baseline")).to_have_count(1)
    expect(people.locator("tr.section-head")).to_contain_text("People (2 annotators and their majority)")
    expect(people.locator("tr.majority")).to_have_count(1)
    expect(people.locator("tr.annotator")).to_have_count(2)
    expect(agents.locator("tr.annotator, tr.majority")).to_have_count(0)
    # Sections come in that order, and the rows are edged in the plots' colours.
    order = board.locator("tbody.board-section").evaluate_all("els => els.map(e => e.id)")
    assert order == ["section-agents", "section-baselines", "section-people"]
    edge = lambda sel: board.locator(f"{sel} td").first.evaluate(  # noqa: E731
        "e => getComputedStyle(e).borderLeftColor"
    )
    assert edge("tr.agent") == "rgb(37, 99, 235)" and edge("tr.majority") == "rgb(5, 150, 105)"


def test_the_leaderboard_fits_390_px(live_server, browser):
    email, study_id, _ = _study(live_server.db_url)
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        _log_in(page, live_server.url, email)
        page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        # The names stay on screen while the wide table scrolls in its own box.
        name = page.locator("#leaderboard tr.agent td").first
        box = name.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        page.locator(".table-scroll").first.evaluate("e => e.scrollLeft = 10000")
        box = name.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        for plot in page.locator("svg.plot").all():
            b = plot.bounding_box()
            assert b["x"] + b["width"] <= 390
    finally:
        ctx.close()
