"""A crowd worker does a whole bundle by keyboard alone, in a real browser."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import func, select

from tests.conftest import create_tom_study, make_user

pytestmark = pytest.mark.browser

REDIRECT = "https://app.prolific.com/submissions/complete?cc=BROWSER1"


def _answer_by_keyboard(page, key: str = "y") -> None:
    page.keyboard.press(key)
    page.keyboard.press("Enter")


def test_worker_does_a_bundle_by_keyboard(live_server, page):
    from app.auth.models import User
    from app.db import get_sessionmaker
    from app.studies.models import Annotation, Bundle

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = create_tom_study(s, owner, title="Keyboard study", bundle_size=5, gold_rate=0.2, redirect_url=REDIRECT)
        slug, code, gold_rate = study.slug, study.completion_code, study.gold_rate

    def annotations() -> list:
        with Session() as s:
            worker = s.scalar(select(User).where(User.platform == "prolific", User.external_id == "w1"))
            if worker is None:
                return []
            return s.scalars(select(Annotation).where(Annotation.worker_id == worker.id).order_by(Annotation.id)).all()

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=x1")
    expect(page.get_by_role("heading", name="Consent")).to_be_visible()
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")

    for k in range(1, 6):
        counter = page.get_by_text(f"Question {k} of 5", exact=True)
        expect(counter).to_be_visible()
        assert len(annotations()) == k - 1
        if k == 2:
            old_form_page = page.content()  # this question's page, as the browser holds it
        if k == 3:
            # Reloading mid-bundle resumes the same question, with no answer stored.
            legend = page.locator("fieldset.question legend").inner_text()
            page.reload()
            expect(counter).to_be_visible()
            assert page.locator("fieldset.question legend").inner_text() == legend
            assert len(annotations()) == 2
            # Back: every item page lives at /task/<slug>, so the browser shows the
            # current question again rather than a stale one.
            page.go_back()
            expect(counter).to_be_visible()
            assert page.locator("fieldset.question legend").inner_text() == legend
            # Resubmitting question 2's old form (its page restored as it was) by keyboard
            # stores nothing new and lands back on question 3.
            page.set_content(old_form_page)
            expect(page.get_by_text("Question 2 of 5", exact=True)).to_be_visible()
            with page.expect_response(lambda r: r.url.endswith("/answer")) as resent:
                _answer_by_keyboard(page, "y")
            # The page sends the answer in the background and is told only that it was taken
            # (204: issue 24's inline refusals), then opens the task's address.
            assert resent.value.request.method == "POST" and resent.value.status == 204
            expect(counter).to_be_visible()
            assert page.locator("fieldset.question legend").inner_text() == legend
            stored = annotations()
            assert len(stored) == 2, "a resubmitted old form stored a second answer"
            assert stored[1].response["answer"] == "No", "the first answer was overwritten"
        _answer_by_keyboard(page, "y" if k % 2 else "n")

    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    expect(page.locator("#completion-code")).to_have_text(code)
    expect(page.locator("#prolific-return")).to_have_attribute("href", REDIRECT)
    expect(page.get_by_text("You completed 5 questions.")).to_be_visible()

    stored = annotations()
    assert len(stored) == 5
    assert sum(a.is_gold for a in stored) == round(5 * gold_rate) == 1
    assert [a.response["answer"] for a in stored] == ["Yes", "No", "Yes", "No", "Yes"]
    assert len({a.item_id for a in stored}) == 5
    with Session() as s:
        bundle = s.scalar(select(Bundle).where(Bundle.worker_id == stored[0].worker_id))
        assert bundle.n_done == 5 and bundle.finished_at is not None
        assert s.scalar(select(func.count()).select_from(Annotation)) == 5


def test_a_waiting_task_resumes_by_itself_when_a_lease_runs_out(live_server, page):
    """The one item left is leased to someone else: the page says so and retries by itself;
    when that lease runs out, the task goes on with the item and completes (issue 10.6)."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.db import get_sessionmaker, utcnow
    from app.studies import assignment
    from app.studies.models import Assignment
    from tests.integration.test_crowd_integrity import tiny_study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = tiny_study(s, owner, 2, bundle_size=2, annotations_per_item=1, completion_code="RESUMED")
        holder = assignment.enter(s, study, "prolific", "holder")
        held = assignment.next_item(s, study, holder.id)
        # The holder's lease runs out a few seconds from now.
        s.execute(
            update(Assignment).where(Assignment.id == held.id).values(lease_expires_at=utcnow() + timedelta(seconds=3))
        )
        s.commit()
        slug = study.slug

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=waiter&STUDY_ID=s&SESSION_ID=w")
    page.locator("#consent").click()
    expect(page.get_by_text("Question 1 of 2", exact=True)).to_be_visible()
    _answer_by_keyboard(page, "y")
    expect(page.locator("#wait")).to_contain_text("No question is free for you right now")
    # No click: the page asks again by itself (every 5 s here) and gets the item back.
    expect(page.get_by_text("Question 2 of 2", exact=True)).to_be_visible(timeout=20000)
    _answer_by_keyboard(page, "n")
    expect(page.locator("#completion-code")).to_have_text("RESUMED")
