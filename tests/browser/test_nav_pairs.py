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
            {"follow": 0},  # read side by side (following: the test below)
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


@pytest.mark.parametrize("width", [1280, 390])
def test_a_judge_follows_both_instructions_then_picks_and_a_reload_keeps_the_walks(live_server, page, width):
    """The default pair study: follow instruction 1 in the viewer by keyboard, stop, Enter on to
    2 from the same start, a step, a reload (still on 2, where they were), stop, Enter with no
    pick sends nothing, 1 picks, a reload keeps the pick, k walks on and s stops again, Enter
    sends. Both walks are stored under their sides and scored as single follows."""
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import get_graph, import_house
    from app.studies import services
    from app.studies.models import Annotation, Item, Study
    from tests.browser.nav_keys import follow_to
    from tests.browser.test_accessibility import axe_violations
    from tests.integration.test_nav_pairs import house, jsonl, pair_lines

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        h = house()
        import_house(s, h)
        study = services.create_study(
            s,
            owner,
            "navigation",
            services.StudySettings(title="Nav followed pairs", bundle_size=1, gold_rate=0.0, annotations_per_item=1),
            jsonl(pair_lines(h, with_reference=False)[:1]),
            "pairs",
        )
        services.set_state(s, study, "live", owner)
        slug = study.slug
        item = s.scalar(select(Item).where(Item.study_id == study.id))
        payload, route = item.payload, item.reference["route"]
    graph = get_graph(payload["scan"])
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    height = 844 if width < 500 else 800  # 1280x800: the view narrows so that Stop shows whole
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=navfpair{width}&STUDY_ID=s&SESSION_ID=x1")
    page.keyboard.press("Enter")  # consent
    expect(page.get_by_text("Pair 1 of 1", exact=True)).to_be_visible()
    order = page.locator("#nav-follow-pair").get_attribute("data-order").split(",")
    assert sorted(order) == ["a", "b"]

    def on(k: int) -> None:
        expect(page.locator("#nav-fpair-label")).to_have_text(f"Instruction {k} of 2")
        text = payload[f"instruction_{order[k - 1]}"]
        expect(page.locator("#nav-instruction-text")).to_have_text(text)
        page.wait_for_function("() => window.proctorViewer && document.activeElement.tagName === 'CANVAS'")
        for name in ("toy", "human"):
            assert name not in page.locator("#nav-follow-pair").inner_text()
        stop = page.locator("#nav-stop").bounding_box()
        assert stop["y"] + stop["height"] <= height, f"Stop here below the fold on {k} at {width} px"
        if width < 500:
            assert_fits(page, f"following instruction {k} at {width} px")
        assert axe_violations(page) == []

    on(1)
    expect(page.locator("#nav-verdict")).to_be_hidden()
    page.keyboard.press("1")  # no pick while walking
    for here, there in zip(route, route[1:]):
        follow_to(page, graph, here, there)
    page.keyboard.press("s")
    expect(page.locator("#nav-next")).to_be_visible()
    expect(page.locator("#nav-steps")).to_contain_text("You stopped here")
    page.keyboard.press("Enter")  # on to 2, from the start
    on(2)
    assert page.evaluate("proctorViewer.state().viewpoint") == route[0]
    follow_to(page, graph, route[0], route[1])
    page.reload()  # in the middle of walk 2: still on 2, where they were
    on(2)
    assert page.evaluate("proctorViewer.state().viewpoint") == route[1]
    page.keyboard.press("s")
    expect(page.locator("#nav-verdict")).to_be_visible()
    expect(page.locator("#nav-stage")).to_be_hidden()
    for k in (1, 2):
        text = payload[f"instruction_{order[k - 1]}"]
        expect(page.locator(f"#nav-side-{k} p")).to_have_text(text)
    page.keyboard.press("Enter")  # nothing picked: not sent
    expect(page.locator("#nav-pair-status")).to_have_text("Not yet: which is better (1, 2 or t).")
    page.keyboard.press("1")
    expect(page.locator("#nav-winner-1")).to_be_checked()
    expect(page.locator("#nav-side-1")).to_have_class("nav-pair-side picked")
    page.reload()
    expect(page.locator("#nav-verdict")).to_be_visible()
    expect(page.locator("#nav-winner-1")).to_be_checked()
    send = page.locator("#submit").bounding_box()
    assert send["y"] + send["height"] <= height, f"Send below the fold at {width} px"
    assert axe_violations(page) == []
    if width < 500:
        assert_fits(page, f"picking at {width} px")
        a_box, b_box = page.locator("#nav-side-1").bounding_box(), page.locator("#nav-side-2").bounding_box()
        assert b_box["y"] >= a_box["y"] + a_box["height"]  # one above the other
    page.keyboard.press("k")  # walk on after all
    on(2)
    page.keyboard.press("s")
    expect(page.locator("#nav-verdict")).to_be_visible()
    expect(page.locator("#nav-winner-1")).to_be_checked()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    assert errors == []

    with Session() as s:
        study = s.scalar(select(Study).where(Study.slug == slug))
        ann = s.scalar(select(Annotation).where(Annotation.study_id == study.id))
    r = ann.response
    assert r["winner"] == order[0] and r["order"] == order
    first, second = r["follows"][order[0]], r["follows"][order[1]]
    assert first["path"] == route and second["path"] == route[:2]
    assert [e["type"] for e in first["events"]] == ["stop"]
    assert [e["type"] for e in second["events"]] == ["stop", "resume", "stop"]
    assert second["trace"][0][0] == route[0] and second["trace"][-1][0] == route[1]
    assert ann.scores[order[0]]["success"] is True and ann.scores[order[0]]["ndtw"] == 1.0
    assert ann.scores[order[1]]["ndtw"] < 1.0
