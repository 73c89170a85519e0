"""What a new worker and researcher see first: signs drawn without an emoji font, the
consent page's contact, duration and pay, closing a study only after confirming."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import create_tom_study, make_user

pytestmark = pytest.mark.browser


def _loaded(img) -> bool:
    return img.evaluate("i => i.complete && i.naturalWidth > 0")


def test_the_stop_sign_is_our_icon_not_an_emoji(live_server, page):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        study = create_tom_study(
            s,
            make_user(s, "researcher"),
            title="Icon study",
            bundle_size=2,
            payment="£1.20",
            estimated_minutes=5,
            contact="lab@example.org",
        )
        slug = study.slug
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=x1")
    # The default instructions name the sign: drawn as our icon, not as a character.
    instructions = page.locator(".card", has=page.get_by_role("heading", name="Instructions"))
    sign = instructions.get_by_role("img", name="stop sign")
    expect(sign).to_be_visible()
    assert _loaded(sign) and "\U0001f6d1" not in instructions.inner_text()
    # Contact, time and pay, as the worker reads them before agreeing.
    details = page.locator("#consent-details")
    for line in ("Contact", "lab@example.org", "Estimated time", "about 5 minutes", "Payment", "£1.20"):
        expect(details.get_by_text(line, exact=True)).to_be_visible()
    page.locator("#consent").click()
    marker = page.locator(".utt.target").get_by_role("img", name="stop sign: the time asked about")
    expect(marker).to_be_visible()
    assert _loaded(marker)
    legend = page.locator("fieldset.question legend")
    expect(legend.get_by_role("img", name="stop sign")).to_be_visible()
    assert "\U0001f6d1" not in page.locator("main").inner_text()


PASSWORD = "pw-" + "x" * 8


def _log_in(page, url: str, email: str) -> None:
    page.goto(f"{url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Studies")).to_be_visible()


@pytest.mark.parametrize("javascript", [True, False])
def test_close_asks_first_and_the_study_can_be_reopened(live_server, browser, javascript):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        study_id = create_tom_study(s, owner, title="Closing study").id
    ctx = browser.new_context(java_script_enabled=javascript)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    _log_in(page, live_server.url, owner.email)
    page.goto(f"{live_server.url}/studies/{study_id}")
    close = page.locator("#state-closed")
    # Close does not look like Pause: it is the red button.
    assert "danger" in close.get_attribute("class") and "danger" not in (
        page.locator("#state-paused").get_attribute("class") or ""
    )
    close.click()
    expect(page.get_by_role("heading", name="Close “Closing study”?")).to_be_visible()
    expect(page.locator("#close-effects")).to_contain_text("nothing is deleted")
    page.locator("#keep-open").click()
    expect(page.locator("#study-state")).to_have_text("live")

    page.locator("#state-closed").click()
    page.locator("#confirm-close").click()
    expect(page.locator("#study-state")).to_have_text("closed")
    expect(page.locator("#state-closed")).to_have_count(0)
    page.get_by_role("button", name="Reopen").click()
    expect(page.locator("#study-state")).to_have_text("live")
    expect(page.get_by_text("The study is open again.")).to_be_visible()
    ctx.close()
