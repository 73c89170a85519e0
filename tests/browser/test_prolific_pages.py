"""A researcher runs a demo-sized study on Prolific from the pages, against the local fake of
Prolific's API (tests/fakes/prolific.py): price and publish, a worker enters from Prolific and
submits, review and approve, a bonus paid once (a second click pays nothing more), a worker
blocked, a returned slot reclaimed."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import create_tom_study, make_user
from tests.fakes.prolific import FakeProlific, Served

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8
TOKEN = "prolific-token-" + "b" * 24


@pytest.fixture
def fake(monkeypatch):
    """Before live_server: the app reads PROLIFIC_API_URL when it calls Prolific."""
    from app.config import get_settings

    with Served(FakeProlific()) as served:
        served.add_token(TOKEN)
        monkeypatch.setenv("PROLIFIC_API_URL", served.url)
        get_settings.cache_clear()
        yield served
    get_settings.cache_clear()


def _enter(browser, url: str, fake: FakeProlific, prolific_id: str, who: str, phone: bool = False):
    """A participant starts the study on Prolific and follows its URL, on a 390 px phone by
    keyboard or on a desktop by mouse, and consents: their page and submission."""
    sub = fake.join(prolific_id, who)
    link = fake.studies[prolific_id]["external_study_url"]
    link = link.replace("{{%PROLIFIC_PID%}}", who).replace("{{%STUDY_ID%}}", prolific_id)
    link = link.replace("{{%SESSION_ID%}}", sub)
    size = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True} if phone else {}
    ctx = browser.new_context(**size)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    page.goto(link.replace(link.split("/s/", 1)[0], url))
    if phone:
        page.keyboard.press("Enter")  # the consent button has the focus
    else:
        page.locator("#consent").click()
    return ctx, page, sub


def _log_in(page, url: str, email: str, study_id: int) -> None:
    """The researcher logs in and opens the study's page."""
    page.goto(f"{url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{url}/studies/{study_id}")


def test_a_study_run_on_prolific_from_the_pages(fake, live_server, browser, page):
    from app.db import get_sessionmaker
    from app.studies.models import Assignment, Bundle, Item

    with get_sessionmaker(live_server.db_url)() as s:
        admin = make_user(s, "admin")
        study = create_tom_study(s, admin, bundle_size=2, gold_rate=0.0, title="Demo on Prolific")
        email, study_id, code = admin.email, study.id, study.completion_code
        s.commit()

    _log_in(page, live_server.url, email, study_id)

    # The token, a price, then the study made and published.
    page.locator("#prolific-token").fill(TOKEN)
    page.locator("#prolific-token-button").click()
    expect(page.locator("#prolific-account")).to_have_text("researcher@example.org")
    page.locator("#prolific-reward").fill("150")
    page.locator("#prolific-places").fill("4")
    page.locator("#prolific-price").click()
    expect(page.locator("#prolific-quote")).to_contain_text("800 cents")
    assert fake.studies == {}
    page.locator("#prolific-publish").click()
    expect(page.locator("#prolific-status")).to_have_text("ACTIVE")
    (prolific_id,) = fake.studies

    # A worker enters from Prolific and submits; another returns the study mid-task.
    ctx, worker, good = _enter(browser, live_server.url, fake, prolific_id, "P-good")
    try:
        for n in (1, 2):
            expect(worker.get_by_text(f"Question {n} of 2", exact=True)).to_be_visible()
            worker.get_by_label("Yes").check()
            worker.locator("#submit").click()
        expect(worker.locator("#completion-code")).to_have_text(code)
    finally:
        ctx.close()
    fake.complete(good, code)
    ctx, quitter, gone = _enter(browser, live_server.url, fake, prolific_id, "P-gone")
    try:
        expect(quitter.get_by_text("Question 1 of 2", exact=True)).to_be_visible()  # an item held
    finally:
        ctx.close()
    with get_sessionmaker(live_server.db_url)() as s:
        held = s.scalar(
            select(Assignment)
            .join(Bundle, Bundle.id == Assignment.bundle_id)
            .where(Bundle.external_assignment_id == gone)
        )
        item_id, before = held.item_id, s.get(Item, held.item_id).n_active
    fake.give_back(gone, "RETURNED")

    # Review: approve here, then on Prolific.
    review = f"{live_server.url}/admin/studies/{study_id}/review"
    page.goto(review)
    from app.studies.assignment import pseudonym

    shown = pseudonym("prolific", "P-good")  # the queue names workers by pseudonym
    page.get_by_label(f"select {shown}").check()
    page.locator("#approve").click()
    expect(page.locator(f"#review-queue tr[data-worker='{shown}'] .status")).to_contain_text("approved")
    page.locator("#prolific-carry").click()
    expect(page.get_by_text("1 submission(s) approved, 0 rejected")).to_be_visible()
    assert fake.submissions[good]["status"] == "APPROVED"

    # A bonus, once: the same page open in a second tab, still showing the form after the
    # first paid it, sends it a second time.
    stale = page.context.new_page()
    stale.goto(review)
    row = page.locator("#prolific-workers tr[data-worker='P-good']")
    row.locator("input[name=amount_cents]").fill("125")
    row.locator(".bonus-pay").click()
    expect(page.get_by_text("Bonus of 125 cents paid to P-good")).to_be_visible()
    expect(page.locator("#prolific-workers tr[data-worker='P-good']")).to_contain_text("125 cents paid")
    row = stale.locator("#prolific-workers tr[data-worker='P-good']")
    row.locator("input[name=amount_cents]").fill("125")
    row.locator(".bonus-pay").click()
    expect(stale.get_by_text("paid this bonus already")).to_be_visible()
    stale.close()
    assert fake.paid("P-good") == [125] and fake.pay_calls() == 1

    # The worker's record on this instance, and a message to them on Prolific.
    expect(page.locator("#prolific-workers tr[data-worker='P-good'] .record")).to_contain_text("paid 275 cents")
    page.locator("#prolific-workers tr[data-worker='P-good'] input[name=body]").fill("Thank you!")
    page.locator("#prolific-workers tr[data-worker='P-good'] .message-worker").click()
    expect(page.get_by_text("Message sent to P-good on Prolific.")).to_be_visible()
    assert [m["body"] for m in fake.messages] == ["Thank you!"]

    # Blocked: on the block list, and kept out of the next study made on Prolific.
    page.locator("#prolific-workers tr[data-worker='P-gone'] .block-worker").click()
    expect(page.get_by_text("P-gone is blocked")).to_be_visible()
    expect(page.locator("#prolific-workers tr[data-worker='P-gone']")).to_contain_text("Blocked")
    ((group_id, group),) = fake.groups.items()
    assert group["participants"] == ["P-gone"]

    # The returned slot: its task ends and its item goes back to the pool at once.
    page.locator("#prolific-reclaim").click()
    # The sweeper's round (every minute) may have freed it first on a slow machine.
    expect(page.locator(".flash")).to_contain_text(
        re.compile(r"1 returned or timed-out submission\(s\)|No returned or timed-out submission")
    )
    with get_sessionmaker(live_server.db_url)() as s:
        assert s.get(Item, item_id).n_active == before - 1
        assert s.scalar(select(Assignment.state).where(Assignment.id == held.id)) == "returned"

    with get_sessionmaker(live_server.db_url)() as s:
        later = create_tom_study(s, s.merge(admin), bundle_size=2, gold_rate=0.0, title="The next one")
        later_id = later.id
        s.commit()
    page.goto(f"{live_server.url}/studies/{later_id}")
    page.locator("#prolific-reward").fill("150")
    page.locator("#prolific-places").fill("4")
    page.locator("#prolific-price").click()
    page.locator("#prolific-publish").click()
    expect(page.locator("#prolific-status")).to_have_text("ACTIVE")
    (next_id,) = set(fake.studies) - {prolific_id}
    assert fake.studies[next_id]["filters"][0]["selected_values"] == [group_id]
    assert not fake.eligible(next_id, "P-gone") and fake.eligible(next_id, "P-good")


def test_comprehension_check_by_keyboard_on_a_phone(fake, live_server, browser, page):
    """The researcher picks the kind's default check and sees it in the study's preview; a
    worker on a 390 px phone answers it by keyboard, wrong once, then right, and reaches the
    first item; another fails twice and is asked to return the study, their task ended."""
    from app.db import get_sessionmaker
    from app.studies.models import Bundle

    with get_sessionmaker(live_server.db_url)() as s:
        admin = make_user(s, "admin")
        study = create_tom_study(s, admin, bundle_size=2, gold_rate=0.0, title="Checked on Prolific")
        email, study_id = admin.email, study.id
        s.commit()
    _log_in(page, live_server.url, email, study_id)
    page.locator("#comprehension-default").check()
    page.locator("#comprehension-button").click()
    expect(page.locator("body")).to_contain_text("Comprehension check on: 2 question(s)")
    # The preview shows it before the first item, the right answers marked for the researcher.
    page.goto(f"{live_server.url}/studies/{study_id}/preview")
    check = page.locator("#preview-check")
    expect(check.locator("fieldset.check-question")).to_have_count(2)
    expect(check.locator(".preview-answer").first).to_contain_text("Right (never in the worker's page)")
    page.goto(f"{live_server.url}/studies/{study_id}")
    page.locator("#prolific-token").fill(TOKEN)
    page.locator("#prolific-token-button").click()
    page.locator("#prolific-reward").fill("150")
    page.locator("#prolific-places").fill("4")
    page.locator("#prolific-price").click()
    page.locator("#prolific-publish").click()
    expect(page.locator("#prolific-status")).to_have_text("ACTIVE")
    (prolific_id,) = fake.studies

    def enter(who: str):
        ctx, phone, sub = _enter(browser, live_server.url, fake, prolific_id, who, phone=True)
        expect(phone.locator("#check")).to_be_visible()
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390  # no sideways scroll
        return ctx, phone, sub

    def answer(phone, first: int, second: int) -> None:
        """By keyboard only: the first question's first option has the focus; Space picks it,
        arrows move the choice, Tab goes on to the next question."""
        phone.keyboard.press("Space")
        for _ in range(first):
            phone.keyboard.press("ArrowDown")
        phone.keyboard.press("Tab")  # to the second question's options
        phone.keyboard.press("Space")
        for _ in range(second):
            phone.keyboard.press("ArrowDown")
        phone.keyboard.press("Enter")  # submits the form

    ctx, phone, _ = enter("P-careful")
    answer(phone, 0, 0)  # wrong: the end of the dialogue; a summary
    expect(phone.locator("#check-again")).to_be_visible()
    answer(phone, 1, 1)  # the utterance marked with 🛑; Yes or No
    expect(phone.locator("input[name=assignment_id]")).to_be_attached()
    ctx.close()

    ctx, phone, sub = enter("P-hasty")
    answer(phone, 0, 0)
    expect(phone.locator("#check-again")).to_be_visible()
    answer(phone, 2, 2)
    expect(phone.locator("#check-failed")).to_contain_text("Please return the study on Prolific")
    ctx.close()
    with get_sessionmaker(live_server.db_url)() as s:
        bundle = s.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
        assert bundle.finished_at is not None and bundle.check_failures == 2
