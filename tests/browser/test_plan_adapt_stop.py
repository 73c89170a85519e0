"""Plan, adapt, stop (issue 29) in a real browser, on a demo-sized A3DS study: the researcher
plans on the new-study page, creates the study there from a design, turns adaptive allocation
on and launches it from the study page, a listener answers by keyboard (the other listeners
through the engine), the leaderboard shows the settled comparison, and the study, with that
comparison marked, pauses itself when the sweeper runs. Then the same from the demo's adaptive
ranking study (`proctor demo`'s "Demo: A3DS adaptive ranking"): its plan card, a settled and an
open comparison, the open one marked, answered, and the study paused."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.a3ds_pictures import pictures_loaded
from tests.browser.test_first_hour import _log_in
from tests.conftest import make_user

pytestmark = pytest.mark.browser

# 20 picture pairs, each captioned by both speakers: the contrastive speaker's captions name the
# target, the literal's here always lead the listener to the other picture, so the comparison
# settles ("contrastive above literal") after 16 shared pairs.
DESIGN = {"pairs": {"z": {"1": 10, "3": 10}}, "speakers": ["contrastive", "literal"], "seed": 2}


def _choice(ref: dict) -> int:
    return ref["target"] if ref["captioner"] == "contrastive" else 3 - ref["target"]


def test_plan_adapt_answer_settle_and_pause(live_server, page, tmp_path):
    from app.db import get_sessionmaker
    from app.leaderboards import adaptive, stopping
    from app.studies import assignment
    from app.studies.models import Item, Study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        email = owner.email
    _log_in(page, live_server.url, email)

    # Plan: the simulation answers in place on the new-study page.
    page.goto(f"{live_server.url}/studies/new")
    card = page.locator("#plan")
    card.locator("input[name=items]").fill("20")
    card.locator("#plan-button").click()
    expect(page.locator("#plan-table")).to_be_visible()

    # Create: the design uploaded on the same page, previewed, then created.
    design = tmp_path / "design.json"
    design.write_text(json.dumps(DESIGN))
    page.get_by_label("Title").fill("Plan adapt stop")
    page.locator("#kind").select_option("a3ds")
    page.locator("input[name=annotations_per_item]").first.fill("1")
    page.locator("input[name=bundle_size]").fill("4")
    page.locator("input[name=gold_rate]").fill("0")
    page.locator("input[type=file][name=file]").set_input_files(str(design))
    page.get_by_role("button", name="Preview items").click()
    expect(page.locator("#preview")).to_be_visible()
    page.get_by_role("button", name="Create study").click()
    expect(page).to_have_url(re.compile(r"/studies/\d+$"))
    study_id = int(page.url.rsplit("/", 1)[1])
    with Session() as s:
        study = s.get(Study, study_id)
        assert (study.kind, study.annotations_per_item, study.bundle_size, study.gold_rate) == ("a3ds", 1, 4, 0.0)
        slug = study.slug

    # Adapt: ticked and saved on the study page, then launched there.
    page.locator("#adaptive-on").check()
    page.locator("#adaptive-button").click()
    expect(page.locator("#adaptive-on")).to_be_checked()
    page.locator("#state-live").click()
    expect(page.locator("#study-state")).to_have_text("live")
    with Session() as s:
        study = s.get(Study, study_id)
        assert study.adaptive and study.state == "live"
        adaptive.refresh_study(s, study)  # the sweeper's first run: both captioners open
        s.commit()

    # Answer: one listener in the browser, by keyboard...
    listener = page.context.browser.new_context().new_page()
    listener.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=listener1&STUDY_ID=s&SESSION_ID=x1")
    listener.keyboard.press("Enter")  # agree
    with Session() as s:
        refs = {(tuple(i.payload["scenes"]), i.payload["caption"]): i.reference for i in s.scalars(select(Item))}
    for k in range(4):
        expect(listener.locator(".a3ds-caption")).to_be_visible()
        caption = listener.locator(".a3ds-caption").inner_text().strip("“”")
        srcs = listener.locator(".a3ds-scene img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        scenes = tuple(int(re.search(r"/a3ds/scenes/(\d+)", x).group(1)) for x in srcs)
        listener.wait_for_function(pictures_loaded())
        listener.keyboard.press(str(_choice(refs[(scenes, caption)])))
        listener.keyboard.press("Enter")
        if k < 3:
            expect(listener.locator(".a3ds-caption")).not_to_have_text(f"“{caption}”")
    expect(listener.locator("body")).not_to_contain_text("Which picture")
    listener.context.close()

    # ...the others through the engine, the sweeper refreshing the priorities now and then.
    with Session() as s:
        study = s.get(Study, study_id)
        for n in range(40):
            bundle = assignment.enter(s, study, "prolific", f"listener-{n}")
            a = assignment.next_item(s, study, bundle.id)
            if a is None:
                break
            while a is not None:
                item = s.get(Item, a.item_id)
                assignment.submit(s, study, bundle.id, a.id, {"choice": str(_choice(item.reference))}, f"k{a.id}")
                a = assignment.next_item(s, study, bundle.id)
            adaptive.refresh_study(s, study)
            s.commit()

    # Settled: the leaderboard's table says so.
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    settled = page.locator("#a3ds_settled")
    expect(settled).to_contain_text(re.compile(r"contrastive above literal, settled after \d+ picture pairs"))

    # Stop: the comparison marked on the study page; the sweeper pauses the study.
    page.goto(f"{live_server.url}/studies/{study_id}")
    box = page.locator("#auto-pause input[name=pair]")
    expect(box).to_have_count(1)
    box.check()
    page.locator("#auto-pause-button").click()
    expect(page.locator("#auto-pause-marks")).to_contain_text("contrastive above literal, settled after")
    with Session() as s:
        assert stopping.check(s, s.get(Study, study_id))
        s.commit()
    page.reload()
    expect(page.locator("#auto-paused")).to_contain_text("Paused itself at")
    with Session() as s:
        assert s.get(Study, study_id).state == "paused"


def test_the_demo_ranking_from_plan_to_pause(live_server, page):
    """The researcher opens the demo's adaptive ranking study: plans with its own figures, sees
    on the leaderboard one comparison settled and the others open, marks the open one of the
    two best speakers, a listener answers in the browser (the others through the engine), and
    the study pauses itself once the marked comparison settles."""
    from app.db import get_sessionmaker
    from app.kinds.a3ds import _demo_ranking
    from app.leaderboards import adaptive, stopping
    from app.studies import assignment
    from app.studies.models import Item, Study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        email, study_id = owner.email, _demo_ranking(s, owner).id
        slug = s.get(Study, study_id).slug
    _log_in(page, live_server.url, email)

    # Plan: the card holds the study's figures; its plan answers in place.
    page.goto(f"{live_server.url}/studies/{study_id}")
    expect(page.locator("#plan-scores")).to_have_value(re.compile(r"^0\.9\d, 0\.\d\d, 0\.\d\d$"))
    page.locator("#plan-button").click()
    expect(page.locator("#plan-table")).to_be_visible()
    expect(page.locator("#adaptive-on")).to_be_checked()

    # The leaderboard: the clearest comparison settled, the others open.
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    settled = page.locator("#a3ds_settled")
    expect(settled).to_contain_text(re.compile(r"contrastive above short, settled after \d+ picture pairs"))
    expect(settled.get_by_text(re.compile(r"^open after \d+ picture pairs$"))).to_have_count(2)

    # Stop: the open comparison of the two best marked.
    page.goto(f"{live_server.url}/studies/{study_id}")
    page.get_by_label("contrastive vs literal").check()
    page.locator("#auto-pause-button").click()
    expect(page.locator("#auto-pause-marks")).to_contain_text(re.compile(r"contrastive vs literal: open after"))

    # A listener answers by keyboard (contrastive captions right, literal ones wrong)...
    with Session() as s:
        refs = {
            (tuple(i.payload["scenes"]), i.payload["caption"]): i.reference
            for i in s.scalars(select(Item).where(Item.study_id == study_id))
        }
    listener = page.context.browser.new_context().new_page()
    listener.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=demo-you&STUDY_ID=s&SESSION_ID=x1")
    listener.keyboard.press("Enter")  # agree
    for _ in range(3):
        expect(listener.locator(".a3ds-caption")).to_be_visible()
        caption = listener.locator(".a3ds-caption").inner_text().strip("“”")
        srcs = listener.locator(".a3ds-scene img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        scenes = tuple(int(re.search(r"/a3ds/scenes/(\d+)", x).group(1)) for x in srcs)
        listener.wait_for_function(pictures_loaded())
        ref = refs[(scenes, caption)]
        listener.keyboard.press(str(_demo_choice(ref)))
        listener.keyboard.press("Enter")
        expect(listener.locator(".a3ds-caption")).not_to_have_text(f"“{caption}”")
    listener.context.close()

    # ...the others through the engine, the sweeper running between them, until it pauses.
    with Session() as s:
        for n in range(12):
            study = s.get(Study, study_id)
            if study.state != "live":
                break
            bundle = assignment.enter(s, study, "prolific", f"newcomer-{n}")
            while (a := assignment.next_item(s, study, bundle.id)) is not None:
                ref = s.get(Item, a.item_id).reference
                assignment.submit(s, study, bundle.id, a.id, {"choice": str(_demo_choice(ref))}, f"k{a.id}")
            adaptive.refresh_study(s, study)
            stopping.check(s, study)
            s.commit()
        assert s.get(Study, study_id).state == "paused"
    page.reload()
    expect(page.locator("#auto-paused")).to_contain_text("Paused itself at")
    expect(page.locator("#auto-pause-marks")).to_contain_text(
        "contrastive vs literal: contrastive above literal, settled after"
    )


def _demo_choice(ref: dict) -> int:
    """A listener who reads the contrastive and short captions right and the literal ones wrong."""
    return 3 - ref["target"] if ref["captioner"] == "literal" else ref["target"]
