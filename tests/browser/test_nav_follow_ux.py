"""The follower's page as a crowd worker meets it: a reload mid-instruction resumes the walk
where it was; the rating fits the screen at 1280x900 and nothing overlaps at 390 px, where
the hints name taps, not keys."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.nav_keys import follow_to, skip_practice
from tests.conftest import make_user
from tests.integration.test_navigation import create_nav_study

pytestmark = pytest.mark.browser


def start_study(live_server, page, pid: str, **settings):
    """A live navigation study, entered and agreed to; returns (Session, graph, slug)."""
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import get_graph

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        house, study = create_nav_study(s, owner, **settings)
        slug = study.slug
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
    page.locator("#consent").click()
    skip_practice(page)
    page.wait_for_function("() => window.proctorViewer !== undefined")
    return Session, get_graph(house.scan), slug


def leased(Session, pid: str):
    from app.auth.models import User
    from app.studies.models import Assignment, Item

    with Session() as s:
        worker = s.scalar(select(User).where(User.platform == "prolific", User.external_id == pid))
        a = s.scalar(select(Assignment).where(Assignment.worker_id == worker.id, Assignment.state == "leased"))
        return a.id, s.get(Item, a.item_id).reference["path"]


def path_field(page) -> list[str]:
    return page.evaluate("JSON.parse(document.getElementById('nav-path').value)")


def test_a_reload_resumes_the_walk(live_server, page):
    from app.studies.models import Annotation

    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    Session, graph, slug = start_study(live_server, page, "resume1", bundle_size=2)
    a_id, reference = leased(Session, "resume1")
    assert len(reference) >= 3
    page.locator("#nav-view canvas").focus()
    for here, there in zip(reference[:2], reference[1:3]):
        follow_to(page, graph, here, there)
    page.keyboard.press("ArrowLeft")  # a turn after the last step is kept too
    heading = page.evaluate("proctorViewer.state().heading")

    page.reload()
    page.wait_for_function("() => window.proctorViewer !== undefined")
    assert page.evaluate("proctorViewer.state().viewpoint") == reference[2]
    assert page.evaluate("proctorViewer.state().heading") == pytest.approx(heading)
    assert path_field(page) == reference[:3]
    expect(page.locator("#nav-steps")).to_contain_text("Resumed where you were. Steps taken: 2.")
    expect(page.locator("#nav-rating")).to_be_hidden()

    page.locator("#nav-view canvas").focus()
    for here, there in zip(reference[2:], reference[3:]):
        follow_to(page, graph, here, there)
    page.keyboard.press("s")
    page.reload()  # a reload after Stop still asks for the rating, and the stop is not doubled
    page.wait_for_function("() => window.proctorViewer !== undefined")
    expect(page.locator("#nav-rating")).to_be_visible()
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    with Session() as s:
        ann = s.scalar(select(Annotation).where(Annotation.assignment_id == a_id))
        assert ann.response["path"] == reference  # the whole walk, before and after the reloads
        assert [e["type"] for e in ann.response["events"]] == ["stop"]
        times = [p[3] for p in ann.response["trace"]]
        assert times == sorted(times)  # one clock across the reloads
        assert ann.response["trace"][0][0] == reference[0] and ann.response["trace"][-1][0] == reference[-1]
    # The next instruction starts from its own start, not from the last walk.
    next_id, next_reference = leased(Session, "resume1")
    assert next_id != a_id
    page.wait_for_function("() => window.proctorViewer !== undefined")
    assert path_field(page) == [next_reference[0]]
    assert errors == []


LIKERT = (
    "clarity | How clear was the wording? | Unclear; Somewhat; Very clear\n"
    "confidence | How sure are you that you arrived? | Not at all; A little; Fairly; Very sure"
)
# What a follower must see and reach on the page; none of these may overlap another.
PARTS = [
    "#nav-instruction",
    "#nav-view canvas",
    "#nav-view .proctor-viewer-hint",
    "#nav-stop",
    "#nav-steps",
    "#nav-rating > legend",
    "#nav-rating label.choice",
    "#nav-likert-clarity legend",
    "#nav-likert-clarity label",
    "#nav-likert-confidence legend",
    "#nav-likert-confidence label",
    "#nav-resume",
    "#submit",
]

BOXES = """(selectors) => selectors.flatMap((sel) => [...document.querySelectorAll(sel)].map((el, k) => {
  const r = el.getBoundingClientRect();
  return {name: `${sel}[${k}]`, x: r.left, y: r.top, w: r.width, h: r.height,
          visible: r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden"};
}))"""


def likert_study(live_server, page, pid: str):
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import import_house
    from app.studies import services
    from tests.integration.test_navigation import house_r2r

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        house, data = house_r2r()
        import_house(s, house)
        settings = services.StudySettings(title="Layout", bundle_size=1, gold_rate=0.0)
        study = services.create_study(s, owner, "navigation", settings, data, "r2r", {"likert": LIKERT})
        services.set_state(s, study, "live", owner)
        slug = study.slug
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
    page.locator("#consent").click()
    skip_practice(page)
    page.wait_for_function("() => window.proctorViewer !== undefined")


def overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    def inter(a, b):
        return (
            min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"]) > 0.5
            and min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"]) > 0.5
        )

    return [(a["name"], b["name"]) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if inter(a, b)]


def test_the_rating_fits_1280x900_without_scrolling(live_server, browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    try:
        likert_study(live_server, page, "wide1")
        page.locator("#nav-stop").click()
        expect(page.locator("#nav-rating")).to_be_visible()
        assert page.evaluate("window.scrollY") == 0
        boxes = [b for b in page.evaluate(BOXES, PARTS) if b["visible"]]
        assert {b["name"].split("[")[0] for b in boxes} == set(PARTS)
        for b in boxes:  # every question, answer and Next is on screen as it is
            assert 0 <= b["x"] and b["x"] + b["w"] <= 1280 and 0 <= b["y"] and b["y"] + b["h"] <= 900, b
        assert overlaps(boxes) == []
        # The view is still there beside the questions, and grows back on "Keep walking".
        small = page.locator("#nav-view canvas").bounding_box()["width"]
        page.locator("#nav-resume").click()
        expect(page.locator("#nav-rating")).to_be_hidden()
        assert page.locator("#nav-view canvas").bounding_box()["width"] > small >= 400
    finally:
        ctx.close()


def test_at_390px_nothing_overlaps_and_hints_say_tap(live_server, browser):
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = ctx.new_page()
    try:
        likert_study(live_server, page, "narrow1")
        hint = page.locator("#nav-view .proctor-viewer-hint")
        expect(hint).to_have_text("Swipe to look around; tap a marker to walk there.")
        expect(page.locator("#nav-stop kbd")).to_be_hidden()
        # A tap on a marker walks there.
        marker = page.evaluate("proctorViewer.markers()[0]")
        box = page.locator("#nav-view canvas").bounding_box()
        page.touchscreen.tap(box["x"] + marker["x"], box["y"] + marker["y"])
        page.wait_for_function("(v) => proctorViewer.state().viewpoint === v", arg=marker["id"])
        page.locator("#nav-stop").tap()
        expect(page.locator("#nav-rating")).to_be_visible()
        steps = page.locator("#nav-steps").inner_text()
        assert "Tap an answer" in steps and "Keys" not in steps and "Escape" not in steps
        for sel in ("#nav-rating kbd", "#nav-resume kbd", "#submit kbd"):
            for k in range(page.locator(sel).count()):
                expect(page.locator(sel).nth(k)).to_be_hidden()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scrolling
        boxes = [b for b in page.evaluate(BOXES, PARTS) if b["visible"]]
        assert {b["name"].split("[")[0] for b in boxes} == set(PARTS)
        for b in boxes:
            assert 0 <= b["x"] and b["x"] + b["w"] <= 390, b
        assert overlaps(boxes) == []
        page.locator("#nav-rating label.choice").nth(2).tap()
        page.locator("#nav-likert-clarity label").nth(1).tap()
        page.locator("#nav-likert-confidence label").nth(3).tap()
        with page.expect_navigation():
            page.locator("#submit").tap()
        expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    finally:
        ctx.close()


def test_a_practice_episode_comes_first_and_is_not_stored(live_server, page):
    from app.db import get_sessionmaker
    from app.studies.models import Annotation, Assignment

    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        _, study = create_nav_study(s, owner, bundle_size=2)
        slug = study.slug
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=prac1&STUDY_ID=s&SESSION_ID=prac1")
    page.locator("#consent").click()
    expect(page.get_by_role("heading", name="Practice first (not scored)")).to_be_visible()
    expect(page.locator("#nav-practice")).to_contain_text("Look around")
    expect(page.locator("#nav-instruction")).to_be_hidden()  # the real one waits
    page.wait_for_function("() => window.proctorPractice !== undefined")
    assert page.evaluate("window.proctorViewer") is None
    # Stopping at the start says it is not the kitchen; walking there by clicks says well done.
    page.locator("#nav-practice-stop").click()
    expect(page.locator("#nav-practice-feedback")).to_contain_text("not in the kitchen")
    page.locator("#nav-practice-again").click()
    canvas = page.locator("#nav-practice-view canvas")
    for there in ("v_lr3", "v_k1"):
        page.evaluate("(h) => proctorPractice.turn(h - proctorPractice.state().heading)", _heading_to(page, there))
        m = next(m for m in page.evaluate("proctorPractice.markers()") if m["id"] == there)
        box = canvas.bounding_box()
        page.mouse.click(box["x"] + m["x"], box["y"] + m["y"])
        page.wait_for_function("(v) => proctorPractice.state().viewpoint === v", arg=there)
    page.keyboard.press("s")
    expect(page.locator("#nav-practice-feedback")).to_contain_text("Well done: you stopped in the kitchen")
    page.locator("#nav-practice-done").click()
    expect(page.locator("#nav-practice")).to_be_hidden()
    expect(page.locator("#nav-instruction")).to_be_visible()
    page.wait_for_function("() => window.proctorViewer !== undefined")
    expect(page.locator("#nav-view canvas")).to_be_focused()
    from app.auth.models import User

    with Session() as s:  # nothing of the practice was sent: no answer, the first item still leased
        worker = s.scalar(select(User).where(User.external_id == "prac1"))
        mine = s.scalars(select(Assignment).where(Assignment.worker_id == worker.id)).all()
        assert [a.state for a in mine] == ["leased"] and mine[0].slot == 0
        assert s.scalar(select(Annotation).where(Annotation.assignment_id == mine[0].id)) is None
    page.reload()  # once per bundle: a reload goes straight to the real instruction
    page.wait_for_function("() => window.proctorViewer !== undefined")
    expect(page.locator("#nav-practice")).to_be_hidden()
    assert errors == []


def _heading_to(page, there: str) -> float:
    """The heading of the marker of `there` from where the practice follower stands."""
    return page.evaluate(
        """(id) => fetch('/static/kinds/navigation/practice-house.json').then((r) => r.json())
      .then((h) => h.neighbours[proctorPractice.state().viewpoint].find((n) => n.id === id).heading)""",
        there,
    )
