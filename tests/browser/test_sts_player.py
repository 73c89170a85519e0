"""An STS annotator in a real browser: scrubs by keyboard and by dragging, cannot mark the
recorded context, places a marker and moves it, sends by keyboard; the stored marker is the
one they left, a reference episode measures them and the leaderboard counts the agent."""

from __future__ import annotations

import json

import numpy as np
import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from app.images import decode_png
from app.kinds.sts.demo import demo_lines
from app.storage import get_store
from tests.conftest import make_user

pytestmark = pytest.mark.browser


def test_an_annotator_scrubs_marks_moves_the_marker_and_sends(live_server, page):
    from app.db import get_sessionmaker
    from app.leaderboards.service import compute
    from app.studies import services
    from app.studies.models import Annotation, Item, Study

    lines = {x.get("id") or f"{x['scenario']}/{x['agent']}/{x['continuation']}": x for x in demo_lines()}
    chosen = [lines["PutNextLocal-2/expert/0"], lines["reference/PutNextLocal-11/random"]]
    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "sts",
            services.StudySettings(title="Player", bundle_size=2, gold_rate=0.5, annotations_per_item=1),
            "\n".join(json.dumps(x) for x in chosen).encode(),
            "continuations",
        )
        services.set_state(s, study, "live", owner)
        slug = study.slug
        items = {
            i.external_id: (i.payload, i.reference, i.is_gold)
            for i in s.scalars(select(Item).where(Item.study_id == study.id))
        }

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=sts1&STUDY_ID=s&SESSION_ID=x1")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")  # consent
    for k in (1, 2):
        expect(page.get_by_text(f"Episode {k} of 2", exact=True)).to_be_visible()
        player = page.locator("#sts-player")
        n, takeover = int(player.get_attribute("data-n")), int(player.get_attribute("data-takeover"))
        step_text = page.locator("#sts-step")
        expect(step_text).to_have_text(f"frame 1 of {n}")
        expect(page.locator("#sts-phase")).to_contain_text("the agent takes over in")
        # The strip loaded, and the browser reads from it the pixels it was made of (its
        # scanlines are stored Up-filtered: a second decoder, beside app.images'): the sum of
        # every colour value, and of each frame's first column, as drawn into a canvas.
        drawn = page.evaluate(
            """() => new Promise(r => { const i = new Image(); i.onload = () => {
                 const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
                 const g = c.getContext('2d'); g.drawImage(i, 0, 0);
                 const d = g.getImageData(0, 0, c.width, c.height).data;
                 let all = 0, opaque = true;
                 for (let p = 0; p < d.length; p += 4) { all += d[p] + d[p + 1] + d[p + 2]; opaque &&= d[p + 3] === 255; }
                 r([c.width, c.height, all, opaque, i.src]); };
               i.src = document.getElementById('sts-player').dataset.frames; })"""
        )
        src = drawn.pop()
        strip_key = next(p["frames_key"] for p, _, _ in items.values() if p["frames_key"] in src)
        rgb = decode_png(get_store().get(strip_key)).astype(np.int64)
        assert drawn == [rgb.shape[1], rgb.shape[0], int(rgb.sum()), True]
        # The recorded context cannot be marked.
        page.keyboard.press("s")
        expect(page.locator("#sts-marker")).to_contain_text("The agent takes over")
        expect(page.locator("#submit")).to_be_disabled()
        page.keyboard.press("Enter")  # nothing to send yet
        expect(page.get_by_text(f"Episode {k} of 2", exact=True)).to_be_visible()
        # End, then a failure marker there; then back to the takeover + 1 and success there.
        page.keyboard.press("End")
        expect(step_text).to_have_text(f"frame {n} of {n}")
        page.keyboard.press("f")
        expect(page.locator("#sts-marker")).to_contain_text(f"Failure at step {n - 1 - takeover}")
        page.keyboard.press("Home")
        for _ in range(takeover + 1):
            page.keyboard.press("ArrowRight")
        expect(step_text).to_have_text(f"frame {takeover + 2} of {n}")
        page.keyboard.press("Shift+ArrowRight")  # ten steps (or to the end)
        expect(step_text).to_have_text(f"frame {min(n, takeover + 12)} of {n}")
        page.keyboard.press("Shift+ArrowLeft")
        # Drag the scrubber to its far left: back to frame 1, then step to the marker's frame.
        box = page.locator("#sts-scrub").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + 1, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        expect(step_text).to_have_text(f"frame 1 of {n}")
        page.locator("#sts-player").focus()
        for _ in range(takeover + 1):
            page.keyboard.press("ArrowRight")
        page.keyboard.press("s")  # moves the marker: success, one step after the takeover
        expect(page.locator("#sts-marker")).to_contain_text("Success at step 1")
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()

    with Session() as s:
        study = s.scalar(select(Study).where(Study.slug == slug))
        stored = s.execute(
            select(Item.external_id, Annotation.response)
            .join(Item, Item.id == Annotation.item_id)
            .where(Annotation.study_id == study.id)
        ).all()
        assert sorted(stored) == [
            ("PutNextLocal-2/expert/0", {"marker": "success", "step": 1}),
            ("reference/PutNextLocal-11/random", {"marker": "success", "step": 1}),
        ]
        tables = {t["key"]: t for t in compute(s, study)["extra"]["tables"]}
    # The reference episode (a failure) marked success: sensitivity unknown, specificity 0.
    (annotator,) = tables["sts_annotators"]["rows"]
    assert (annotator["n_reference"], annotator["specificity"], annotator["sensitivity"]) == (1, 0.0, None)
    (agent,) = tables["sts_agents"]["rows"]
    assert (agent["agent"], agent["n"], agent["success"]["mean"], agent["simulator"]) == ("expert", 1, 1.0, 1.0)
    assert items["PutNextLocal-2/expert/0"][1]["success_step"] == 18
