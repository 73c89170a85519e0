"""Leftovers of issue 24 (the crowd side), as a new user walking the demo meets them: on the
Hexagons execution page Enter means Next step wherever the focus is and only Space paints; the
description page names its item a target image and its read-only target gives no painting
hint; the navigation practice fits the screen like the real instruction, at 1280x800 and on a
phone, where it shows no key hints."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_hex_describe import _describe_study
from tests.browser.test_hex_execute import _annotations, _study, _tile
from tests.conftest import make_user
from tests.integration.test_navigation import create_nav_study

pytestmark = pytest.mark.browser


def _in_view(page, selector: str, width: int, height: int) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    assert 0 <= box["x"] and box["x"] + box["width"] <= width, (selector, box)
    assert 0 <= box["y"] and box["y"] + box["height"] <= height, (selector, box)


# -- 1. Hexagons execution: one key, one meaning ---------------------------------------------------


def test_enter_after_consent_is_next_step_and_paints_nothing_space_paints(live_server, page):
    """A worker who pressed Enter on "I agree, start" and presses it again goes to step 2 (it
    painted tile 0 black on step 1); Enter on the board is the button's "Next step Enter";
    Space paints; the hint beside the buttons names Space, not Enter, for painting."""
    Session, _, study_id, slug, _ = _study(live_server, 3)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=enter2&STUDY_ID=s&SESSION_ID=enter2")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('#hex-board .hexboard-tile').length === 180")
    surface = page.locator("#hex-board .hexboard-surface")
    expect(surface).to_be_focused()
    page.keyboard.press("Enter")  # the second Enter: Next step, no paint
    expect(page.locator("#hex-pos")).to_have_text("2")
    expect(_tile(page, 0)).to_have_attribute("data-colour", "0")
    expect(surface).to_be_focused()
    page.keyboard.press("Space")  # Space paints the cursor's tile in the colour chosen (black)
    expect(_tile(page, 0)).to_have_attribute("data-colour", "1")
    page.keyboard.press("Enter")  # on the board: Next step, as the button says
    expect(page.locator("#hex-pos")).to_have_text("3")
    expect(_tile(page, 0)).to_have_attribute("data-colour", "1")
    page.keyboard.press("Enter")  # the last step: nothing, and still no paint
    expect(page.locator("#hex-pos")).to_have_text("3")
    expect(page.locator("#hex-error")).to_be_hidden()
    assert _annotations(Session, study_id) == []
    hint = page.locator("#hex-keys")
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("Space paints")
    _in_view(page, "#hex-keys", 1280, 800)
    expect(surface).to_have_accessible_description(
        "Arrow keys move between neighbouring tiles (Shift with "
        "Left or Right: the other side neighbour); digits 0 to 7 "
        "choose a colour; Space paints; Z undoes."
    )
    page.keyboard.press("s")
    expect(page.locator("#hex-pos")).to_have_count(0)
    [response] = _annotations(Session, study_id)
    assert [[a[:2] for a in st["actions"]] for st in response["steps"]] == [[], [[0, 1]], []]


# -- 2. Hexagons description: the item is a target image; the target paints nothing -----------------


def test_the_description_page_names_a_target_image_and_its_target_gives_no_paint_hint(live_server, page):
    _, _, slug = _describe_study(live_server)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=noun1&STUDY_ID=s&SESSION_ID=noun1")
    expect(page.get_by_text("This task has 1 target image.")).to_be_visible()  # the consent page too
    page.locator("#consent").click()
    page.wait_for_function("() => document.querySelectorAll('#hex-target .hexboard-tile').length === 180")
    position = page.locator("#task-position")
    expect(position).to_have_text("Target image 1 of 1")
    expect(position).not_to_contain_text("Procedure")
    target = page.locator("#hex-target .hexboard-surface")
    expect(target).not_to_have_accessible_description("Space or Enter paints")
    assert "paint" not in page.evaluate(
        """() => { const s = document.querySelector('#hex-target .hexboard-surface');
                   return document.getElementById(s.getAttribute('aria-describedby')).textContent; }"""
    ).replace("cannot be painted", "")
    expect(page.locator("#hex-target")).not_to_contain_text("Space or Enter paints")
    # The instructor's own board still names its keys.
    expect(page.locator("#hex-board .hexboard-surface")).to_have_accessible_description(
        "Arrow keys move between neighbouring tiles (Shift with Left or Right: the other side neighbour); "
        "digits 0 to 7 choose a colour; Space or Enter paints; Z undoes."
    )


# -- 3. Navigation practice: fits like the real instruction; no key hints on touch -----------------


def _nav_practice(live_server, page, pid: str) -> None:
    from app.db import get_sessionmaker

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        _, study = create_nav_study(s, make_user(s, "researcher"), bundle_size=2)
        slug = study.slug
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
    page.locator("#consent").click()
    expect(page.locator("#nav-practice")).to_be_visible()
    page.wait_for_function("() => window.proctorPractice !== undefined")


def test_the_practice_fits_1280x800_like_the_instruction_page(live_server, browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        _nav_practice(live_server, page, "fit1")
        assert page.evaluate("window.scrollY") == 0
        for sel in (
            "#nav-practice-title",
            "#nav-practice-instruction",
            "#nav-practice-view canvas",
            "#nav-practice-stop",
            "#nav-practice-done",
        ):
            _in_view(page, sel, 1280, 800)
        page.locator("#nav-practice-stop").click()
        expect(page.locator("#nav-practice-again")).to_be_visible()
        for sel in ("#nav-practice-again", "#nav-practice-done", "#nav-practice-feedback"):
            _in_view(page, sel, 1280, 800)
    finally:
        ctx.close()


def test_on_a_phone_the_practice_buttons_show_and_no_key_hint(live_server, browser):
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        from app.db import get_sessionmaker

        Session = get_sessionmaker(live_server.db_url)
        with Session() as s:
            _, study = create_nav_study(s, make_user(s, "researcher"), bundle_size=2)
            slug = study.slug
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=phone9&STUDY_ID=s&SESSION_ID=phone9")
        page.locator("#consent").tap()
        expect(page.locator("#nav-practice")).to_be_visible()
        page.wait_for_function("() => window.proctorPractice !== undefined")
        shown = page.locator(".nav-practice-controls").inner_text()  # what is on the screen
        assert "Enter" not in shown and "arrow keys" not in shown and "press" not in shown.lower(), shown
        assert page.locator("#nav-practice kbd:visible").count() == 0
        for sel in ("#nav-practice-stop", "#nav-practice-done"):
            _in_view(page, sel, 390, 844)
        page.locator("#nav-practice-stop").tap()
        expect(page.locator("#nav-practice-again")).to_be_visible()
        assert page.evaluate("window.scrollY") == 0
        for sel in ("#nav-practice-again", "#nav-practice-done"):
            _in_view(page, sel, 390, 844)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        ctx.close()
