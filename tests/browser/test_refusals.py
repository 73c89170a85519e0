"""A refused request keeps its page (issue 24, item 4): the message shows beside the button
that sent it, what was entered stays, and sending again once the cause is gone works. A
worker's answer refused while the researcher had closed the study, or with a value no
question takes; an admin's rejection without a reason."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import create_tom_study, make_user

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8


def _beside(page, button: str):
    """The refusal box placed right after the button that sent the form."""
    return page.locator(f"{button} + .inline-error")


def test_a_refused_answer_shows_beside_send_and_the_worker_answers_again(live_server, page):
    from app.auth.models import User
    from app.db import get_sessionmaker
    from app.studies import services
    from app.studies.models import Annotation, Study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = create_tom_study(s, owner, title="Refusals", bundle_size=3, gold_rate=0.0)
        slug, study_id, owner_id = study.slug, study.id, owner.id

    def stored() -> list[Annotation]:
        with Session() as s:
            return s.scalars(select(Annotation).where(Annotation.study_id == study_id)).all()

    def set_state(state: str) -> None:
        with Session() as s:
            services.set_state(s, s.get(Study, study_id), state, s.get(User, owner_id))

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=r1&STUDY_ID=s&SESSION_ID=x")
    page.get_by_role("button", name="I agree, start").click()
    counter = page.get_by_text("Question 1 of 3", exact=True)
    expect(counter).to_be_visible()
    legend = page.locator("fieldset.question legend").inner_text()

    # The researcher closes the study while the worker has picked an answer.
    page.keyboard.press("y")
    set_state("closed")
    page.keyboard.press("Enter")
    refusal = _beside(page, "#answer-form button[type=submit]")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("Not sent: This study is closed; answers are no longer taken.")
    # Not the answer's fault, so the message says where to go on (the page stays meanwhile).
    expect(refusal.get_by_role("link", name="See where your task is now")).to_have_attribute("href", f"/task/{slug}")
    # The same page, question and choice: nothing to redo, and nothing stored.
    assert page.url.endswith(f"/task/{slug}")
    expect(counter).to_be_visible()
    assert page.locator("fieldset.question legend").inner_text() == legend
    expect(page.locator("input[value=Yes]")).to_be_checked()
    expect(page.locator("#answer-form button[type=submit]")).to_be_enabled()
    assert stored() == []

    # Reopened, a value no question takes (a tampered page) is refused the same way, with the
    # reason.
    set_state("live")
    page.locator("input[value=Yes]").evaluate("el => { el.value = 'Maybe'; }")
    page.keyboard.press("Enter")
    expect(refusal).to_have_text("Not sent: field 'answer': Input should be 'Yes' or 'No'")
    expect(counter).to_be_visible()
    assert stored() == []

    # Put right, the same lease takes the answer and the next question comes.
    page.locator("input[value=Maybe]").evaluate("el => { el.value = 'Yes'; }")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Question 2 of 3", exact=True)).to_be_visible()
    expect(page.locator(".inline-error")).to_have_count(0)
    assert [a.response["answer"] for a in stored()] == ["Yes"]

    # Paused while the worker answers: the answer is taken, and the task waits, saying so and
    # asking again by itself (before: "Not available ... Go back", which still said paused).
    set_state("paused")
    page.keyboard.press("n")
    page.keyboard.press("Enter")
    expect(page.locator("#wait")).to_have_text(
        "The researcher has paused this study for now. Everything you sent is saved. This page checks "
        "again by itself and goes on when the study does; you can also come back later."
    )
    expect(page.get_by_text("2 of 3 done")).to_be_visible()
    assert [a.response["answer"] for a in stored()] == ["Yes", "No"]
    set_state("live")
    page.get_by_role("link", name="Check now").click()
    expect(page.get_by_text("Question 3 of 3", exact=True)).to_be_visible()


def test_a_rejection_without_a_reason_is_refused_beside_its_button(live_server, page):
    from app.db import get_sessionmaker
    from app.kinds.tom.demo import simulate_worker
    from app.studies.models import Participant

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        admin_email = make_user(s, "admin").email
        study = create_tom_study(s, owner, title="Review refusals", bundle_size=5, gold_rate=0.2)
        assert simulate_worker(s, study, "w-1", accuracy=0.0, seed=1) == 5
        study_id = study.id

    def statuses() -> list[str]:
        with Session() as s:
            return s.scalars(select(Participant.status).where(Participant.study_id == study_id)).all()

    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(admin_email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Audit log")).to_be_visible()
    page.goto(f"{live_server.url}/admin/studies/{study_id}/review")
    box = page.locator("#review-form input[name=participant_id]")
    box.check()
    page.locator("#reject").click()
    refusal = _beside(page, "#reject")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("a rejection needs a reason")
    expect(box).to_be_checked()  # the selection stays
    assert statuses() == ["pending"]

    page.get_by_label("Reason (required to reject)").fill("Answered gold wrong throughout")
    page.locator("#reject").click()
    expect(page.get_by_text("1 worker(s) rejected.")).to_be_visible()
    assert statuses() == ["rejected"]
