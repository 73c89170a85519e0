"""The worker's pages of A3DS, Common-ToM and navigation in a kind's own words, and in view: the
end page counts the kind's items, the A3DS instructions name "Can't tell", navigation's
practice is not counted as an instruction, Back never offers an answered question again, and
what a worker reads and presses is on screen, whole, without scrolling, on a 390x844 phone and
at 1280x800."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.layout import assert_fits
from tests.browser.nav_keys import skip_practice
from tests.conftest import make_user
from tests.browser.a3ds_pictures import pictures_loaded

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
LAPTOP = {"viewport": {"width": 1280, "height": 800}}

# For each selector: its box, whether it is shown, and whether its text fits its box.
BOXES = """(sels) => sels.map((s) => { const e = document.querySelector(s);
  if (!e) return {sel: s, missing: true};
  const r = e.getBoundingClientRect(), st = getComputedStyle(e);
  return {sel: s, top: r.top, bottom: r.bottom, left: r.left, right: r.right,
          shown: st.display !== "none" && st.visibility !== "hidden" && r.width > 0 && r.height > 0,
          sw: e.scrollWidth, cw: e.clientWidth}; })"""


def in_view(page, selectors: list[str]) -> list[str]:
    """What is wrong with these elements as a worker sees the page now, without scrolling:
    missing or hidden, not wholly inside the viewport, text wider than its box, or two of them
    overlapping. [] when all is well."""
    w, h = page.evaluate("[innerWidth, innerHeight]")
    got = page.evaluate(BOXES, selectors)
    wrong = []
    for b in got:
        if b.get("missing") or not b["shown"]:
            wrong.append(f"{b['sel']} not shown")
            continue
        if b["top"] < -0.5 or b["left"] < -0.5 or b["bottom"] > h + 0.5 or b["right"] > w + 0.5:
            wrong.append(
                f"{b['sel']} outside the {w}x{h} view: "
                f"[{b['left']:.0f}, {b['top']:.0f}, {b['right']:.0f}, {b['bottom']:.0f}]"
            )
        if b["sw"] > b["cw"] and b["cw"] > 0:
            wrong.append(f"{b['sel']} text runs over its box ({b['sw']} > {b['cw']})")
    for i, a in enumerate(got):
        for b in got[i + 1 :]:
            if a.get("missing") or b.get("missing"):
                continue
            if (
                min(a["right"], b["right"]) - max(a["left"], b["left"]) > 1
                and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1
            ):
                wrong.append(f"{a['sel']} overlaps {b['sel']}")
    return wrong


def _a3ds_study(s, owner, title: str, pairs: int = 2, **settings):
    from app.studies import services

    design = {"pairs": {"z": {"1": pairs}}, "speakers": ["literal"], "seed": 2}
    study = services.create_study(
        s,
        owner,
        "a3ds",
        services.StudySettings(title=title, bundle_size=pairs, gold_rate=0.0, annotations_per_item=1, **settings),
        json.dumps(design).encode(),
        "design",
    )
    services.set_state(s, study, "live", owner)
    return study


def _tom_demo_study(s, owner, bundle_size: int):
    """A Common-ToM study of the questions generated from the demo's dialogues: windows of
    up to eleven utterances and third-order questions, as a worker of the demo meets them."""
    from app.kinds import get_kind
    from app.studies import services

    study = services.create_study(
        s,
        owner,
        "tom",
        services.StudySettings(title="Beliefs", bundle_size=bundle_size, gold_rate=0.0, annotations_per_item=1),
        get_kind("tom").demo()["items"],
        "cg",
    )
    services.set_state(s, study, "live", owner)
    return study


def _pictures_loaded(page) -> None:
    page.wait_for_function(pictures_loaded())


# -- words ------------------------------------------------------------------------------------


def test_the_end_page_counts_picture_pairs_not_questions(live_server, page):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        slug = _a3ds_study(s, make_user(s, "researcher"), "Pairs").slug
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=end1&STUDY_ID=s&SESSION_ID=x1")
    page.locator("#consent").click()
    for k in (1, 2):
        expect(page.get_by_text(f"Picture pair {k} of 2", exact=True)).to_be_visible()
        page.wait_for_load_state()  # the keys are the deferred app.js's: a press before it is lost
        page.keyboard.press("1")
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    expect(page.locator("main")).to_contain_text("You completed 2 picture pairs. Your completion code:")
    expect(page.locator("main")).not_to_contain_text("question")


def test_the_a3ds_instructions_name_cant_tell_and_its_key(live_server, page):
    from app.db import get_sessionmaker
    from app.studies.models import Annotation

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        study = _a3ds_study(s, make_user(s, "researcher"), "Pairs", pairs=1)
        slug, study_id = study.slug, study.id
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=ct1&STUDY_ID=s&SESSION_ID=x1")
    card = page.locator("section.card", has=page.get_by_role("heading", name="Instructions"))
    expect(card).to_contain_text(
        "If the caption fits both pictures or neither, press 0: “Can't tell” (when the page offers it)."
    )
    expect(card).to_contain_text(
        "This task has 1 picture pair. Keyboard: 1 or Left arrow: the left picture, 2 or Right arrow: the right one, "
        "0: can't tell (when offered), Enter: next."
    )
    page.keyboard.press("Enter")  # agree
    expect(page.get_by_text("Picture pair 1 of 1", exact=True)).to_be_visible()
    # The page says it too, and 0 does what the instructions say.
    expect(page.locator(".a3ds-pick")).to_contain_text("Can't tell")
    page.keyboard.press("0")
    expect(page.get_by_label("Can't tell")).to_be_checked()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    with Session() as s:
        assert s.scalar(select(Annotation.response).where(Annotation.study_id == study_id)) == {"choice": "none"}


def test_navigation_practice_is_not_counted_as_instruction_1(live_server, browser):
    from app.db import get_sessionmaker
    from tests.integration.test_navigation import create_nav_study

    with get_sessionmaker(live_server.db_url)() as s:
        _, study = create_nav_study(s, make_user(s, "researcher"), bundle_size=4)
        slug = study.slug
    for how in (LAPTOP, PHONE):
        ctx = browser.new_context(**how)
        page = ctx.new_page()
        page.set_default_timeout(10000)
        try:
            page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=np{how['viewport']['width']}&STUDY_ID=s&SESSION_ID=x1")
            page.locator("#consent").click()
            expect(page.get_by_role("heading", name="Practice first (not scored)")).to_be_visible()
            page.wait_for_function("() => window.proctorPractice !== undefined")
            # Nothing over the practice counts it among the task's instructions.
            expect(page.get_by_text("Instruction 1 of 4", exact=True)).to_be_hidden()
            expect(page.locator("progress")).to_be_hidden()
            assert "Instruction 1 of 4" not in page.locator("main").inner_text()
            assert in_view(page, ["#nav-practice-title"]) == []
            skip_practice(page)
            expect(page.get_by_text("Instruction 1 of 4", exact=True)).to_be_visible()
            expect(page.locator("progress")).to_be_visible()
            expect(page.locator("#nav-instruction")).to_be_visible()
        finally:
            ctx.close()


def test_back_never_offers_an_answered_question_as_if_it_could_be_changed(live_server, page):
    from app.db import get_sessionmaker
    from app.studies.models import Annotation

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        study = _tom_demo_study(s, make_user(s, "researcher"), bundle_size=3)
        slug, study_id = study.slug, study.id
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=back1&STUDY_ID=s&SESSION_ID=x1")
    page.keyboard.press("Enter")  # agree
    legend = page.locator("fieldset.question legend")
    expect(page.get_by_text("Question 1 of 3", exact=True)).to_be_visible()
    first = legend.inner_text()
    page.keyboard.press("y")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Question 2 of 3", exact=True)).to_be_visible()
    second = legend.inner_text()
    assert second != first
    # The browser's Back: the page shows the question still to answer, with nothing picked,
    # not question 1 with its "Yes" checked and a live Next.
    page.go_back()
    expect(page.get_by_text("Question 2 of 3", exact=True)).to_be_visible()
    expect(legend).to_have_text(second)
    expect(page.locator("input[name=answer]:checked")).to_have_count(0)
    page.keyboard.press("n")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Question 3 of 3", exact=True)).to_be_visible()
    with Session() as s:
        answers = s.scalars(
            select(Annotation.response).where(Annotation.study_id == study_id).order_by(Annotation.id)
        ).all()
    assert answers == [{"answer": "Yes"}, {"answer": "No"}]


# -- layout -----------------------------------------------------------------------------------


def test_a3ds_both_pictures_and_next_fit_a_phone_without_scrolling(live_server, browser):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        slug = _a3ds_study(s, make_user(s, "researcher"), "Pairs").slug
    ctx = browser.new_context(**PHONE)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=ph1&STUDY_ID=s&SESSION_ID=x1")
        page.locator("#consent").tap()
        for k in (1, 2):
            expect(page.get_by_text(f"Picture pair {k} of 2", exact=True)).to_be_visible()
            _pictures_loaded(page)
            parts = [
                ".a3ds-caption",
                ".a3ds-pick legend",
                ".a3ds-scene:nth-child(1) img",
                ".a3ds-scene:nth-child(1) input",
                ".a3ds-scene:nth-child(2) img",
                ".a3ds-scene:nth-child(2) input",
                "input[value=none]",
                "#submit",
            ]
            assert in_view(page, parts) == []
            # The pictures stay big enough to tell apart, and side by side, as "Left" and
            # "Right" say.
            one, two = (page.locator(f".a3ds-scene:nth-child({i}) img").bounding_box() for i in (1, 2))
            assert one["width"] >= 140 and two["width"] >= 140
            assert one["x"] + one["width"] <= two["x"] and abs(one["y"] - two["y"]) < 1
            assert_fits(page, f"A3DS item {k}")
            page.locator(".a3ds-scene:nth-child(2) img").tap()
            expect(page.locator(".a3ds-pick input[value='2']")).to_be_checked()
            page.locator("#submit").tap()
        expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    finally:
        ctx.close()


@pytest.mark.parametrize("how", [PHONE, LAPTOP], ids=["390x844", "1280x800"])
def test_tom_question_and_next_fit_the_screen(live_server, browser, how):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        slug = _tom_demo_study(s, make_user(s, "researcher"), bundle_size=8).slug
    parts = ["fieldset.question legend", "input[value=Yes]", "input[value=No]", "#submit", ".utt.target"]
    ctx = browser.new_context(**how)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    width = how["viewport"]["width"]
    try:
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=tf{width}&STUDY_ID=s&SESSION_ID=x1")
        page.locator("#consent").click()
        for k in range(1, 9):
            expect(page.get_by_text(f"Question {k} of 8", exact=True)).to_be_visible()
            # The page fits the dialogue to the screen when it runs and again on `load` (after
            # its styles): read it as the worker sees it once loaded (a fresh-clone CI run read
            # question 1 between the two, its Next button 2 px below the view).
            page.wait_for_load_state("load")
            where = f"{width} px, question {k}"
            assert in_view(page, parts) == [], where
            # The question's text lies inside its box (below the box's top border), not
            # across it.
            inside = page.evaluate("""() => { const f = document.querySelector('fieldset.question');
                const l = f.querySelector('legend'); const fr = f.getBoundingClientRect();
                const lr = l.getBoundingClientRect(); const b = parseFloat(getComputedStyle(f).borderTopWidth);
                return lr.top >= fr.top + b - 0.5 && lr.left >= fr.left && lr.right <= fr.right; }""")
            assert inside, where
            # Every utterance of the window can still be read: in view, or in a box that
            # scrolls on its own.
            box = page.locator(".dialogue")
            scrolls = box.evaluate("e => e.scrollHeight > e.clientHeight + 1")
            if scrolls:
                assert box.evaluate("e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowY)"), where
                assert box.get_attribute("tabindex") == "0", where  # keyboard users scroll it too
            else:
                assert in_view(page, [".dialogue"]) == [], where
            page.keyboard.press("y")
            page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    finally:
        ctx.close()
