"""A listener in a real browser: reads each caption, sees the two pictures and picks by keyboard
only (1, 2 and the arrow keys, Enter to go on); the researcher's leaderboard then shows, per
captioner, the share of targets picked that the answers given make."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import make_user
from tests.browser.a3ds_pictures import pictures_loaded

pytestmark = pytest.mark.browser


def test_a_worker_picks_by_keyboard_and_the_leaderboard_agrees(live_server, page):
    from app.db import get_sessionmaker
    from app.studies import services
    from app.studies.models import Annotation, Item

    design = {"pairs": {"z": {"1": 2, "3": 2}}, "speakers": ["contrastive", "literal"], "seed": 2}
    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher", email="a3ds-owner@example.org")
        study = services.create_study(
            s,
            owner,
            "a3ds",
            services.StudySettings(title="Pick", bundle_size=4, gold_rate=0.0, annotations_per_item=1),
            json.dumps(design).encode(),
            "design",
        )
        services.set_state(s, study, "live", owner)
        slug, study_id = study.slug, study.id
        items = {
            (tuple(i.payload["scenes"]), i.payload["caption"]): i.reference
            for i in s.scalars(select(Item).where(Item.study_id == study_id))
        }

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=a3ds1&STUDY_ID=s&SESSION_ID=x1")
    page.keyboard.press("Enter")  # agree
    picked: dict[str, list[int]] = {}
    keys = [("1", "2"), ("ArrowLeft", "ArrowRight")]
    for k in range(4):  # one item per pair: a worker never sees a pair twice
        expect(page.locator(".a3ds-caption")).to_be_visible()
        caption = page.locator(".a3ds-caption").inner_text().strip("“”")
        srcs = page.locator(".a3ds-scene img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        scenes = tuple(int(re.search(r"/a3ds/scenes/(\d+)", x).group(1)) for x in srcs)
        # The pictures load (drawn by the server).
        page.wait_for_function(pictures_loaded())
        ref = items[(scenes, caption)]
        # The contrastive speaker's captions: the target; the literal's: the other one.
        right = ref["captioner"] == "contrastive"
        choice = ref["target"] if right else 3 - ref["target"]
        page.keyboard.press(keys[k % 2][choice - 1])
        expect(page.locator(f".a3ds-pick input[value='{choice}']")).to_be_checked()
        page.keyboard.press("Enter")
        picked.setdefault(ref["captioner"], []).append(int(right))
        if k < 3:
            expect(page.locator(".a3ds-caption")).not_to_have_text(f"“{caption}”")

    expect(page.locator("body")).not_to_contain_text("Which picture")
    with Session() as s:
        assert s.scalar(select(Annotation).where(Annotation.study_id == study_id)) is not None

    page.goto(f"{live_server.url}/login")
    page.fill("input[name=email]", "a3ds-owner@example.org")
    page.fill("input[name=password]", "pw-" + "x" * 8)
    page.locator("form button[type=submit], form input[type=submit]").first.click()
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    table = page.locator("#a3ds_accuracy")
    header = table.locator("thead th").all_inner_texts()
    acc = next(i for i, h in enumerate(header) if h.startswith("Accuracy"))
    answers = header.index("Answers")
    for captioner, right in picked.items():
        row = table.locator("tr", has=page.locator(f"td:text-is('{captioner}')"))
        # One listener per pair here: the mean over pairs is the share of answers right.
        expect(row.locator("td").nth(acc)).to_contain_text(f"{sum(right) / len(right):.3f}")
        expect(row.locator("td").nth(answers)).to_have_text(str(len(right)))
