"""The STS mining page's timeline (scenario.html, timeline.js with strip.js): the recording's
strip opens at the scenario's takeover point, the arrow keys step along it (shift: ten) and the
takeover field follows the step shown, so "Take over here" posts the frame on screen."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.conftest import make_user

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8


def test_the_mining_timeline_opens_at_the_takeover_and_the_arrows_step_it(live_server, page):
    from app.db import get_sessionmaker
    from app.kinds.sts import suites

    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        rows, _ = suites.expert_recordings(s, owner, "BabyAI-GoToLocal-v0", [1])
        suite = suites.create_suite(s, owner, "Go to")
        version = suites.latest_version(s, suite)
        suites.add_scenarios(s, version, takeover=1, recordings=[rows[0].id], continuation=12)
        scenario_id = suites.scenarios_of(s, version)[0].id
        email, n = owner.email, rows[0].n_actions + 1

    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/sts/scenarios/{scenario_id}")

    step, field, screen = page.locator("#sts-step"), page.locator("#takeover-step"), page.locator("#sts-screen")
    expect(step).to_have_text(
        f"Step 1 of {n - 1}: the agent would get the first 1 actions as context (the takeover point now)"
    )
    expect(field).to_have_value("1")
    # The takeover tick stands at frame 1 of n on the timeline.
    left = page.evaluate("document.getElementById('sts-takeover-tick').style.left")
    assert float(left.rstrip("%")) == pytest.approx(100 * 1 / (n - 1))
    assert "url(" in screen.evaluate("e => e.style.backgroundImage")

    page.locator("#sts-timeline").focus()
    page.keyboard.press("ArrowRight")
    expect(step).to_have_text(f"Step 2 of {n - 1}: the agent would get the first 2 actions as context")
    expect(field).to_have_value("2")
    # The screen shows frame 2: the strip moved two screens to the left.
    width = screen.evaluate("e => e.clientWidth")
    expect(screen).to_have_attribute("style", re.compile(rf"background-position: -{2 * width}px 0"))
    page.keyboard.press("Shift+ArrowLeft")  # ten back stops at the first frame
    expect(step).to_have_text(f"Step 0 of {n - 1}: the agent would get the first 0 actions as context")
    expect(field).to_have_value("0")
