"""What a new user's walk of the demo found (issue 24's leftovers), at 1280x800 by keyboard and
on a 390x844 touch phone: every question's legend inside its box; STS's marking buttons and
Send in view without scrolling, and its marker kept over a reload; no key hints on a touch
screen; the consent page opens at its title; navigation's "Stop here" in view; A3DS shows the
picked picture and keeps Next clear of its box."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.nav_keys import skip_practice
from tests.browser.test_kind_words_and_fit import LAPTOP, PHONE, _a3ds_study, _pictures_loaded, _tom_demo_study, in_view
from tests.conftest import make_user

pytestmark = pytest.mark.browser
SIZES = pytest.mark.parametrize("how", [PHONE, LAPTOP], ids=["390x844", "1280x800"])

LEGEND_INSIDE = """(sel) => { const f = document.querySelector(sel); const l = f.querySelector(':scope > legend');
  const fr = f.getBoundingClientRect(), lr = l.getBoundingClientRect();
  const b = parseFloat(getComputedStyle(f).borderTopWidth);
  return {inside: lr.top >= fr.top + b - 0.5 && lr.left >= fr.left && lr.right <= fr.right
                  && lr.bottom <= fr.bottom, legend: [lr.top, lr.bottom], box: [fr.top + b, fr.bottom]}; }"""


def _sts_study(s, owner, ids=("PutNextLocal-2/expert/0",)):
    from app.kinds.sts.demo import demo_lines
    from app.studies import services

    lines = {x.get("id") or f"{x['scenario']}/{x['agent']}/{x['continuation']}": x for x in demo_lines()}
    study = services.create_study(
        s,
        owner,
        "sts",
        services.StudySettings(title="Episodes", bundle_size=len(ids), gold_rate=0.0, annotations_per_item=1),
        "\n".join(json.dumps(lines[i]) for i in ids).encode(),
        "continuations",
    )
    services.set_state(s, study, "live", owner)
    return study


def _context(browser, how):
    ctx = browser.new_context(**how)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    return ctx, page


def _open_sts(live_server, browser, how, pid):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        study = _sts_study(s, make_user(s, "researcher"))
        slug, study_id = study.slug, study.id
    ctx, page = _context(browser, how)
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=x1")
    page.locator("#consent").click()
    expect(page.get_by_text("Episode 1 of 1", exact=True)).to_be_visible()
    expect(page.locator("#sts-step")).to_have_text(re.compile(r"^frame \d+ of \d+$"))
    return ctx, page, study_id


# -- 1. the question inside its box -----------------------------------------------------------


@SIZES
def test_the_sts_question_lies_inside_its_box(live_server, browser, how):
    ctx, page, _ = _open_sts(live_server, browser, how, f"leg{how['viewport']['width']}")
    try:
        got = page.evaluate(LEGEND_INSIDE, "fieldset.sts-mark")
        assert got["inside"], got
    finally:
        ctx.close()


def _walking(live_server, browser, how: dict, pid: str):
    """(context, page) of a follower past the practice, on a navigation study's first path."""
    from app.db import get_sessionmaker
    from tests.integration.test_navigation import create_nav_study

    with get_sessionmaker(live_server.db_url)() as s:
        _, study = create_nav_study(s, make_user(s, "researcher"), bundle_size=1)
        slug = study.slug
    ctx, page = _context(browser, how)
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=x1")
    page.locator("#consent").click()
    skip_practice(page)
    page.wait_for_function("() => window.proctorViewer !== undefined")
    return ctx, page


@SIZES
def test_the_navigation_rating_question_lies_inside_its_box(live_server, browser, how):
    ctx, page = _walking(live_server, browser, how, f"nl{how['viewport']['width']}")
    try:
        page.locator("#nav-stop").click()
        expect(page.locator("#nav-rating")).to_be_visible()
        got = page.evaluate(LEGEND_INSIDE, "#nav-rating")
        assert got["inside"], got
    finally:
        ctx.close()


# -- 3. no key hints on a touch screen; 4. the consent page opens at its title ----------------

SHOWN_KBD = "() => [...document.querySelectorAll('kbd')].filter(k => k.getClientRects().length > 0).length"


@pytest.mark.parametrize("kind", ["tom", "sts", "a3ds"])
def test_a_touch_screen_shows_no_key_hints_and_a_keyboard_does(live_server, browser, kind):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        make = {
            "tom": lambda: _tom_demo_study(s, owner, 1),
            "sts": lambda: _sts_study(s, owner),
            "a3ds": lambda: _a3ds_study(s, owner, "Pairs", pairs=1),
        }[kind]
        slugs = [make().slug, make().slug]  # one each: a study of one item has one worker
    for slug, (how, shown) in zip(slugs, ((PHONE, False), (LAPTOP, True))):
        ctx, page = _context(browser, how)
        try:
            page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=k{kind}{shown}&STUDY_ID=s&SESSION_ID=x1")
            instructions = page.locator("section.card", has=page.get_by_role("heading", name="Instructions"))
            expect(instructions).to_contain_text("This task has 1 ")
            assert ("Keyboard:" in instructions.inner_text()) is shown, how
            page.locator("#consent").click()
            expect(page.locator("#submit")).to_be_visible()
            kbds = page.locator("kbd").count()
            assert kbds >= 2
            assert page.evaluate(SHOWN_KBD) == (kbds if shown else 0), how
        finally:
            ctx.close()


def test_the_consent_page_opens_at_its_title_on_a_phone(live_server, browser):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        study = _sts_study(s, make_user(s, "researcher"))
        # A study's own instructions, long enough to put the button below a phone's fold.
        study.instructions = " ".join(["Watch each recording to its end before you place a marker."] * 8)
        s.commit()
        slug = study.slug
    ctx, page = _context(browser, PHONE)
    try:
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=c1&STUDY_ID=s&SESSION_ID=x1")
        page.wait_for_load_state("load")
        expect(page.locator("#consent")).to_be_focused()  # Enter still agrees
        assert page.evaluate("window.scrollY") == 0
        assert in_view(page, ["h1"]) == []
        # The button is below the fold on this screen: a page opened at it would cut the title.
        assert page.locator("#consent").bounding_box()["y"] > 844
    finally:
        ctx.close()


# -- 2. STS: marking and Send in view; the marker kept over a reload ---------------------------


@SIZES
def test_sts_marking_buttons_and_send_show_without_scrolling(live_server, browser, how):
    ctx, page, _ = _open_sts(live_server, browser, how, f"fit{how['viewport']['width']}")
    try:
        page.wait_for_load_state("load")
        parts = [
            "#sts-screen",
            "#sts-scrub",
            "#sts-play",
            "fieldset.sts-mark > legend",
            "#sts-success",
            "#sts-failure",
            "#sts-marker",
            "#submit",
        ]
        assert in_view(page, parts) == []
        assert page.evaluate("window.scrollY") == 0
        # The frame stays big enough to watch.
        assert page.locator("#sts-screen").bounding_box()["height"] >= 200
    finally:
        ctx.close()


def test_sts_a_reload_keeps_the_marker_and_the_frame(live_server, browser):
    from app.db import get_sessionmaker
    from app.studies.models import Annotation

    ctx, page, study_id = _open_sts(live_server, browser, LAPTOP, "rl1")
    try:
        player = page.locator("#sts-player")
        n, takeover = int(player.get_attribute("data-n")), int(player.get_attribute("data-takeover"))
        step = page.locator("#sts-step")
        page.keyboard.press("End")
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        expect(step).to_have_text(f"frame {n - 2} of {n}")
        page.keyboard.press("f")
        at = n - 3 - takeover
        expect(page.locator("#sts-marker")).to_contain_text(f"Failure at step {at} after the takeover")
        page.keyboard.press("Home")  # the frame shown is saved too
        page.keyboard.press("ArrowRight")
        expect(step).to_have_text(f"frame 2 of {n}")
        page.reload()
        expect(page.locator("#sts-marker")).to_contain_text(f"Failure at step {at} after the takeover")
        expect(step).to_have_text(f"frame 2 of {n}")
        expect(page.locator("#sts-scrub")).to_have_value("1")
        expect(page.locator("#sts-marker-tick")).to_be_visible()
        expect(page.locator("#submit")).to_be_enabled()
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
        with get_sessionmaker(live_server.db_url)() as s:
            assert s.scalars(select(Annotation.response).where(Annotation.study_id == study_id)).all() == [
                {"marker": "failure", "step": at}
            ]
    finally:
        ctx.close()


# -- 4. navigation's Stop here at 1280x800; A3DS's picked picture and Next --------------------


def test_navigation_stop_here_shows_whole_at_1280x800(live_server, browser):
    ctx, page = _walking(live_server, browser, LAPTOP, "ns1")
    try:
        page.wait_for_load_state("load")
        assert in_view(page, ["#nav-instruction", "#nav-view canvas", "#nav-stop", "#nav-steps"]) == []
        assert page.evaluate("window.scrollY") == 0
    finally:
        ctx.close()


@SIZES
def test_a3ds_shows_the_picked_picture_and_keeps_next_clear_of_its_box(live_server, browser, how):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        slug = _a3ds_study(s, make_user(s, "researcher"), "Pairs", pairs=1).slug
    ctx, page = _context(browser, how)
    outlined = """(sel) => { const s = getComputedStyle(document.querySelector(sel));
      return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2; }"""
    try:
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=ap{how['viewport']['width']}&STUDY_ID=s&SESSION_ID=x1")
        page.locator("#consent").click()
        expect(page.get_by_text("Picture pair 1 of 1", exact=True)).to_be_visible()
        _pictures_loaded(page)
        one, two = ".a3ds-scene:nth-child(1)", ".a3ds-scene:nth-child(2)"
        assert not page.evaluate(outlined, one) and not page.evaluate(outlined, two)
        page.locator(f"{two} img").click()
        expect(page.locator(f"{two} input")).to_be_checked()
        page.wait_for_function(outlined, arg=two)
        assert not page.evaluate(outlined, one)
        page.keyboard.press("1")
        # Checked first, then outlined: a failure says which of the two went wrong.
        expect(page.locator(f"{one} input")).to_be_checked()
        page.wait_for_function(outlined, arg=one)
        assert not page.evaluate(outlined, two)
        # Next stands clear of the box's bottom edge.
        box = page.locator("fieldset.a3ds-pick").bounding_box()
        nxt = page.locator("#submit").bounding_box()
        assert nxt["y"] >= box["y"] + box["height"] + 8, (box, nxt)
    finally:
        ctx.close()
