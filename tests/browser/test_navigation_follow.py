"""A crowd worker follows a navigation instruction in a real browser, by keyboard alone: turn
with the arrows until the next viewpoint of the reference path is highlighted, Enter to walk,
s to stop, 4 to rate, Enter to go on. The stored path's metrics are exactly the offline ones."""

from __future__ import annotations


import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.nav_keys import follow_to, skip_practice
from tests.conftest import make_user
from tests.integration.test_navigation import create_nav_study

pytestmark = pytest.mark.browser


def follow(page, Session, graph, slug: str) -> tuple[int, list[str]]:
    """Follow the served item's reference path by keyboard, stop, rate 4, go on."""
    from app.auth.models import User
    from app.studies.models import Assignment, Item

    expect(page.locator("#nav-instruction")).to_be_visible()
    page.wait_for_function("() => window.proctorViewer !== undefined")
    expect(page.locator("#nav-view canvas")).to_be_focused()
    assert page.locator("#nav-rating").is_hidden()
    with Session() as s:
        worker = s.scalar(select(User).where(User.platform == "prolific", User.external_id == "nav1"))
        a = s.scalar(select(Assignment).where(Assignment.worker_id == worker.id, Assignment.state == "leased"))
        item = s.get(Item, a.item_id)
        reference, instruction = item.reference["path"], item.payload["instruction"]
    assert page.locator("#nav-instruction").inner_text().strip() == instruction
    # Enter outside the view before Stop neither submits nor walks. The page records any
    # attempt to submit (a submit event, or the "invalid" events of the unanswered rating that
    # a submit attempt raises) and when the key comes up: once Enter is up, its keydown has
    # been handled in full (a walk or a submit would have started by then).
    page.evaluate("""() => {
      window.seen = [];
      for (const type of ["submit", "invalid"]) document.addEventListener(type, () => seen.push(type), true);
      window.addEventListener("keyup", (e) => seen.push("up " + e.key));
    }""")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Enter")
    page.wait_for_function("() => window.seen.includes('up Enter')")
    assert page.evaluate("window.seen") == ["up Enter"]  # no submit was even attempted
    assert page.evaluate("proctorViewer.state().viewpoint") == reference[0]
    assert page.evaluate("JSON.parse(document.getElementById('nav-path').value)") == [reference[0]]
    expect(page.locator("#nav-rating")).to_be_hidden()
    page.locator("#nav-view canvas").focus()
    for here, there in zip(reference, reference[1:]):
        follow_to(page, graph, here, there)
    assert page.url.endswith(f"/task/{slug}")  # Enter in the view never submitted the form
    page.keyboard.press("s")
    expect(page.locator("#nav-rating")).to_be_visible()
    expect(page.locator("#nav-rating legend")).to_have_text("How easy was it to follow the instructions?")
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    return a.id, reference


def test_follow_an_instruction_by_keyboard(live_server, page):
    from app.db import get_sessionmaker
    from app.kinds.navigation import metrics
    from app.kinds.navigation.environments import get_graph
    from app.studies.models import Annotation

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        house, study = create_nav_study(s, owner, bundle_size=2)
        slug = study.slug
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=nav1&STUDY_ID=s&SESSION_ID=x1")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")
    skip_practice(page)
    graph = get_graph(house.scan)
    for k in (1, 2):
        expect(page.get_by_text(f"Instruction {k} of 2", exact=True)).to_be_visible()
        a_id, reference = follow(page, Session, graph, slug)
        with Session() as s:
            ann = s.scalar(select(Annotation).where(Annotation.assignment_id == a_id))
            assert ann is not None
            assert ann.response["path"] == reference and ann.response["rating"] == 4
            assert ann.response["trace"][0][0] == reference[0]
            assert ann.response["trace"][-1][0] == reference[-1]
            assert ann.scores == metrics.score_trajectory(graph, reference, ann.response["path"])
            assert ann.scores["ndtw"] == 1 and ann.score == 1.0
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    assert errors == []
