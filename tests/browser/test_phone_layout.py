"""The researcher's study page (a study of every kind), the studies list, the agents page, the
new-study form and the preview fit
a phone's 390 px screen: nothing wider than the screen, no sideways scrolling, nothing
overlapping."""

from __future__ import annotations

import pytest

from tests.browser.layout import assert_fits
from tests.conftest import make_user

pytestmark = pytest.mark.browser
PASSWORD = "pw-" + "x" * 8


def test_the_study_pages_the_studies_list_and_the_agents_page_fit_390_px(live_server, browser):
    from app.db import get_sessionmaker
    from app.studies import services
    from tests.preview_fixtures import every_kind

    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        email = owner.email
        studies = every_kind(s, owner)
        for kind in ("tom", "navigation", "sts", "hexagons", "a3ds"):
            services.register_agent(s, owner, kind, f"an-agent-with-a-rather-long-name-for-{kind}", "12")
        s.commit()
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        page.goto(f"{live_server.url}/login")
        page.get_by_label("Email").fill(email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/studies")
        pages = ["/studies", "/agents", "/studies/new"] + [f"/studies/{sid}" for sid in studies.values()]
        for path in pages + [f"/studies/{studies['tom']}/preview", f"/studies/{studies['tom']}/preview?n=1"]:
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("load")
            for d in page.locator("details").all():  # open every fold: its contents must fit too
                d.evaluate("e => e.open = true")
            assert_fits(page, path)
    finally:
        ctx.close()
