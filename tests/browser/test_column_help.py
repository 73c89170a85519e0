"""A column's help can be read on the leaderboard with a mouse, the keyboard and on a phone: the
header carries it as its title (hover), and "What the columns mean" under each table lists
every column's label and help (a tap, a click or Enter opens it). An A3DS study: its own lead
table (listener accuracy per captioner, with the paired d_z) and the generic table."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import make_user

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8
PICKS = {"a": (1, 1, 1), "b": (1, 0, 0), "c": (0, 0, 1)}  # one listener per caption: right or not


def _study(db_url: str) -> tuple[str, int]:
    from app.db import get_sessionmaker
    from app.studies import services
    from tests.integration.test_sections_certified import _a3ds_study, _fill_order, _listen

    with get_sessionmaker(db_url)() as s:
        owner = make_user(s, "researcher")
        study, it = _a3ds_study(s, owner, {who: (0, 1, 2) for who in PICKS}, per_item=1)
        order = [it[who, p] for who in PICKS for p in (1, 2, 3)]
        _fill_order(s, order)
        services.set_state(s, study, "live", owner)
        for n, item in enumerate(order):
            who, pair = next(k for k, v in it.items() if v.id == item.id)
            _listen(s, study, f"l{n}", item, bool(PICKS[who][pair - 1]))
        return owner.email, study.id


def _log_in(page, url: str, email: str) -> None:
    page.goto(f"{url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def _reads_the_help(page, open_with: str) -> None:
    """The accuracy column's help: the header's title, and the legend's entry once opened."""
    lead = page.locator("section#a3ds_accuracy")
    header = lead.locator("thead th", has_text="Accuracy").first
    help_ = header.get_attribute("title")
    assert help_ and "share of listeners who picked the target" in help_
    described = header.get_attribute("aria-describedby")
    entry = page.locator(f"#{described}")
    summary = lead.locator("details.column-help summary")
    expect(summary).to_have_text("What the columns mean")
    expect(entry).to_be_hidden()  # closed until asked for
    if open_with == "tap":
        summary.tap()
    else:
        summary.focus()
        page.keyboard.press("Enter")
    expect(entry).to_be_visible()
    expect(entry).to_have_text(help_)
    expect(entry.locator("xpath=preceding-sibling::dt[1]")).to_have_text("Accuracy")
    # d_z says what it is too.
    paired = page.locator("section#a3ds_paired")
    dz = paired.locator("thead th", has_text="d_z")
    assert "Cohen's d_z" in dz.get_attribute("title")
    # And the generic table (its own legend, the same way).
    generic = page.locator("section#generic")
    generic.locator("details.column-help summary").click()
    expect(generic.locator("details.column-help dd").first).to_be_visible()
    expect(generic.locator("details.column-help")).to_contain_text("Items answered")


def test_column_help_on_a_desktop(live_server, page):
    email, study_id = _study(live_server.db_url)
    _log_in(page, live_server.url, email)
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    lead = page.locator("section#a3ds_accuracy")
    # The pointer's hover: the header is marked as having help (a dotted underline, the help cursor).
    header = lead.locator("thead th", has_text="Accuracy").first
    assert header.evaluate("e => getComputedStyle(e).cursor") == "help"
    _reads_the_help(page, "keyboard")


def test_column_help_on_a_phone(live_server, browser):
    email, study_id = _study(live_server.db_url)
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        _log_in(page, live_server.url, email)
        page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
        _reads_the_help(page, "tap")
        # The opened legend fits the screen: label above help, nothing to scroll sideways.
        entry = page.locator("section#a3ds_accuracy details.column-help dd").first
        box = entry.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    finally:
        ctx.close()
