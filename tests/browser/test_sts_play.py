"""A worker plays an STS mission in a real browser: the expert's moves typed as keys (one as a
click), an undo, Enter refused while the mission is unfinished, the grid redrawn by the server
after each move, success announced, and the stored answer is exactly the moves typed."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import make_user

pytestmark = pytest.mark.browser

LEVEL = "BabyAI-GoToLocal-v0"
KEYS = {0: "ArrowLeft", 1: "ArrowRight", 2: "ArrowUp", 3: "p", 4: "d", 5: "t"}


def test_a_worker_plays_a_mission_by_keyboard_and_the_moves_are_stored(live_server, page):
    from app.db import get_sessionmaker
    from app.kinds.sts.recordings import expert_recording
    from app.studies import services
    from app.studies.models import Annotation, Study

    expert = expert_recording(LEVEL, 2)
    moves = expert.actions
    assert len(moves) >= 3 and set(moves) <= set(KEYS), moves  # every move has a key
    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "sts",
            services.StudySettings(title="Play", bundle_size=1, annotations_per_item=1),
            json.dumps({"level": LEVEL, "seed": 2, "id": "m2"}).encode(),
            "missions",
        )
        services.set_state(s, study, "live", owner)
        slug = study.slug
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=player1&STUDY_ID=s&SESSION_ID=x1")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")  # consent
    expect(page.get_by_text("Episode 1 of 1", exact=True)).to_be_visible()
    expect(page.locator(".sts-instruction")).to_have_text(expert.mission)
    step = page.locator("#sts-play-step")
    expect(step).to_contain_text("step 0 of at most")
    max_steps = int(step.inner_text().rsplit(" ", 1)[1])
    grid = page.locator("#sts-grid")
    first_frame = grid.get_attribute("src")
    assert first_frame.startswith("data:image/png;base64,")
    page.wait_for_function("() => document.getElementById('sts-grid').naturalWidth > 0")  # a real PNG

    # A wrong turn, undone: back at the first frame.
    page.keyboard.press("ArrowLeft" if moves[0] != 0 else "ArrowRight")
    expect(step).to_have_text(f"step 1 of at most {max_steps}")
    page.keyboard.press("Backspace")
    expect(step).to_have_text(f"step 0 of at most {max_steps}")
    assert grid.get_attribute("src") == first_frame
    # The first move by its button, the rest by keys; Enter midway only asks for a confirmation.
    page.locator(f'#sts-pad button[data-move="{moves[0]}"]').click()
    expect(step).to_have_text(f"step 1 of at most {max_steps}")
    page.keyboard.press(KEYS[moves[1]])
    expect(step).to_have_text(f"step 2 of at most {max_steps}")
    page.keyboard.press("Enter")
    expect(page.locator("#sts-play-status")).to_contain_text("not done yet")
    expect(page.get_by_text("Episode 1 of 1", exact=True)).to_be_visible()
    for move in moves[2:]:
        page.keyboard.press(KEYS[move])  # typed without waiting: the page queues them
    expect(page.locator("#sts-play-status")).to_contain_text(f"Mission accomplished in {len(moves)} steps")
    # A move after the end is never sent (the server would refuse it, and the page would then
    # not send the answer): the stored moves below are the expert's, no more.
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()

    with Session() as s:
        study = s.scalar(select(Study).where(Study.slug == slug))
        (answer,) = s.scalars(select(Annotation).where(Annotation.study_id == study.id)).all()
        assert answer.response == {"actions": moves, "success_step": len(moves)}
        assert answer.score == 1.0
