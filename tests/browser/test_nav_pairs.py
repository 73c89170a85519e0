"""Navigation side by side in a real browser, at a desktop's width and a phone's (390 px): a judge
reads two speakers' instructions for one path and works the pair by keyboard only (Enter with
no pick sends nothing, a reason typed then a reload keeps the pick and the reason, a change
of mind, Enter sends), then a reference pair; the stored answers are the ones they left, and
the reference pair scores them. No speaker's name is on the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.layout import assert_fits
from tests.conftest import make_user

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1280, 390])
def test_a_judge_works_a_navigation_pair_by_keyboard_and_a_reload_keeps_it(live_server, page, width):
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import import_house
    from app.studies import services
    from app.studies.models import Annotation, Item, Study
    from tests.integration.test_nav_pairs import house, jsonl, pair_lines

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        h = house()
        import_house(s, h)
        lines = pair_lines(h)
        upload = [lines[0], lines[-1]]  # one pair of toy and human, and the reference pair
        study = services.create_study(
            s,
            owner,
            "navigation",
            services.StudySettings(title="Nav pairs", bundle_size=2, gold_rate=0.5, annotations_per_item=1),
            jsonl(upload),
            "pairs",
        )
        services.set_state(s, study, "live", owner)
        slug = study.slug
        refs = {i.external_id: i.reference for i in s.scalars(select(Item).where(Item.study_id == study.id))}

    page.set_viewport_size({"width": width, "height": 844 if width < 500 else 900})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=navpair{width}&STUDY_ID=s&SESSION_ID=x1")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")  # consent
    for k in (1, 2):
        expect(page.get_by_text(f"Pair {k} of 2", exact=True)).to_be_visible()
        expect(page.locator("#nav-pair-keys")).to_contain_text("1 A better")
        for name in ("toy", "human", "other"):
            assert name not in page.locator("#nav-pair-wrap").inner_text()
        a_box = page.locator("#nav-side-a").bounding_box()
        b_box = page.locator("#nav-side-b").bounding_box()
        if width < 500:  # one above the other, each the page's width, and all of it fits
            assert b_box["y"] >= a_box["y"] + a_box["height"] and a_box["width"] > 300
            assert_fits(page, f"navigation pair {k} at {width} px")
        else:  # side by side on one row
            assert abs(a_box["y"] - b_box["y"]) < 1 and b_box["x"] > a_box["x"] + a_box["width"]
        send = page.locator("#submit")
        assert send.bounding_box()["y"] + send.bounding_box()["height"] <= page.viewport_size["height"]
        page.keyboard.press("Enter")  # nothing picked: not sent
        expect(page.get_by_text(f"Pair {k} of 2", exact=True)).to_be_visible()
        page.keyboard.press("2")
        expect(page.locator("#nav-winner-b")).to_be_checked()
        expect(page.locator("#nav-side-b")).to_have_class("nav-pair-side picked")
        expect(page.locator("#nav-pair-status")).to_have_text("B is better. Enter sends.")
        if k == 1:
            # A reason, then a reload in the middle: the pick and the reason come back.
            page.keyboard.press("r")
            expect(page.locator("#nav-reason")).to_be_focused()
            page.keyboard.type("B names the landmarks")
            page.keyboard.press("Escape")
            expect(page.locator("#nav-reason")).not_to_be_focused()
            page.reload()
            expect(page.get_by_text("Pair 1 of 2", exact=True)).to_be_visible()
            expect(page.locator("#nav-winner-b")).to_be_checked()
            expect(page.locator("#nav-reason")).to_have_value("B names the landmarks")
            page.keyboard.press("t")  # changed mind: a tie, then B after all
            expect(page.locator("#nav-winner-tie")).to_be_checked()
            expect(page.locator("#nav-pair-status")).to_have_text("Tie. Enter sends.")
            page.keyboard.press("2")
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()

    with Session() as s:
        study = s.scalar(select(Study).where(Study.slug == slug))
        got = s.execute(
            select(Item.external_id, Annotation.response, Annotation.score)
            .join(Item, Item.id == Annotation.item_id)
            .where(Annotation.study_id == study.id)
        ).all()
    stored = {pid: response for pid, response, _ in got}
    assert set(stored) == set(refs)
    assert all(r["winner"] == "b" for r in stored.values())
    assert sorted(r["reason"] for r in stored.values()) == ["", "B names the landmarks"]
    # The reference pair: right only where its better side (the human's) is B.
    gold = next(pid for pid, ref in refs.items() if ref["better"])
    assert {pid: score for pid, _, score in got}[gold] == (1.0 if refs[gold]["better"] == "b" else 0.0)
