"""The new-study page's "Plan" card in a real browser: the plan comes back in place (htmx, no
reload), and a refusal (422) shows in place too, naming its field (static/app.js)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_first_hour import _log_in
from tests.conftest import make_user

pytestmark = pytest.mark.browser


def test_the_plan_answers_in_place(live_server, page):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        email = make_user(s, "researcher").email
    _log_in(page, live_server.url, email)
    page.goto(f"{live_server.url}/studies/new")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    card = page.locator("#plan")
    card.locator("input[name=items]").fill("60")
    card.locator("input[name=payment]").fill("0.1")
    card.locator("#plan-button").click()
    expect(page.locator("#plan-table")).to_be_visible()
    expect(page.locator("#plan-result")).to_contain_text("cost 36.00")
    assert page.locator("#plan-table .half-width").count() == 2
    card.locator("input[name=scores]").fill("0.8, 1.5")
    card.locator("#plan-button").click()
    expect(page.locator("#plan-error")).to_contain_text("field 'scores'")
    assert navigations == []  # no reload
