"""The follower's page as a crowd worker meets it: a reload mid-instruction resumes the walk
where it was; the rating fits the screen at 1280x900 and nothing overlaps at 390 px, where
the hints name taps, not keys."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.nav_keys import follow_to
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
    page.wait_for_function("window.proctorViewer !== undefined")
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
    page.wait_for_function("window.proctorViewer !== undefined")
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
    page.wait_for_function("window.proctorViewer !== undefined")
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
    page.wait_for_function("window.proctorViewer !== undefined")
    assert path_field(page) == [next_reference[0]]
    assert errors == []
