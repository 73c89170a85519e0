"""The STS single page's transport (strip.js, shared with the side-by-side page): space plays
and pauses, Play shows Pause while playing and playing stops at the last frame, the step
buttons step one frame (and stop playing), and a speed change while playing keeps playing."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from app.kinds.sts.demo import demo_lines
from tests.conftest import make_user

pytestmark = pytest.mark.browser


def test_the_player_plays_pauses_steps_and_changes_speed(live_server, page):
    from app.db import get_sessionmaker
    from app.studies import services

    lines = {x.get("id") or f"{x['scenario']}/{x['agent']}/{x['continuation']}": x for x in demo_lines()}
    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "sts",
            services.StudySettings(title="Transport", bundle_size=1, gold_rate=0, annotations_per_item=1),
            json.dumps(lines["PutNextLocal-2/expert/0"]).encode(),
            "continuations",
        )
        services.set_state(s, study, "live", owner)
        slug = study.slug

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=tr1&STUDY_ID=s&SESSION_ID=x1")
    page.keyboard.press("Enter")  # consent
    player, step, play = page.locator("#sts-player"), page.locator("#sts-step"), page.locator("#sts-play")
    n = int(player.get_attribute("data-n"))
    expect(step).to_have_text(f"frame 1 of {n}")

    page.locator("#sts-fwd").click()
    expect(step).to_have_text(f"frame 2 of {n}")
    page.locator("#sts-back").click()
    page.locator("#sts-back").click()  # not before the first frame
    expect(step).to_have_text(f"frame 1 of {n}")

    player.focus()
    page.keyboard.press("Space")
    expect(play).to_have_text("Pause space")
    page.locator("#sts-speed").select_option("4")  # while playing: faster, still playing
    expect(play).to_have_text("Pause space")
    player.focus()
    expect(step).to_have_text(f"frame {n} of {n}", timeout=20_000)  # it ran to the end and stopped
    expect(play).to_have_text("Play space")

    page.keyboard.press("Space")  # at the end, play starts again from the first frame
    expect(play).to_have_text("Pause space")
    page.keyboard.press("Space")
    expect(play).to_have_text("Play space")
    shown = step.inner_text()
    page.wait_for_timeout(400)
    expect(step).to_have_text(shown)  # paused: no frame moves
    page.locator("#sts-fwd").click()
    assert step.inner_text() != shown
