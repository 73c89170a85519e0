"""An admin spots a worker who fails gold, rejects them, and the results follow."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import create_tom_study, make_user

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8
REASON = "Failed every gold question (browser test)"


def _majority(page) -> tuple[int, str]:
    """(answered, accuracy text) of the leaderboard's human-majority row."""
    row = page.locator("#leaderboard tr.majority")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(0)).to_contain_text("Human majority")
    return int(row.locator("td").nth(2).inner_text()), row.locator("td").nth(3).inner_text()


def _annotator_names(page) -> list[str]:
    return page.locator("#leaderboard tr.annotator td:first-child").all_inner_texts()


def test_admin_rejects_a_worker_who_fails_gold(live_server, page):
    from app.auth.models import User
    from app.db import get_sessionmaker
    from app.kinds.tom.demo import simulate_worker
    from app.studies.models import Annotation

    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        admin_email = make_user(s, "admin").email
        # One annotation per item: each worker answers items of their own, so the majority
        # row changes visibly when one of them is rejected.
        study = create_tom_study(s, owner, title="Review study", bundle_size=10, gold_rate=0.3, annotations_per_item=1)
        for i, name in enumerate(("good-1", "good-2")):
            assert simulate_worker(s, study, name, accuracy=1.0, seed=i) == 10
        assert simulate_worker(s, study, "bad-1", accuracy=0.0, seed=7) == 10
        study_id = study.id
        pseud = {
            u.external_id: u.pseudonym
            for u in s.scalars(select(User).where(User.external_id.in_(("good-1", "good-2", "bad-1"))))
        }
        bad_non_gold = len(
            s.scalars(
                select(Annotation)
                .join(User, User.id == Annotation.worker_id)
                .where(User.external_id == "bad-1", Annotation.is_gold.is_(False))
            ).all()
        )
    assert bad_non_gold == 7
    bad = pseud["bad-1"]

    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(admin_email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Audit log")).to_be_visible()

    # The leaderboard before any review: all three annotators and their majority.
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    assert sorted(_annotator_names(page)) == sorted(pseud.values())
    answered_before, accuracy_before = _majority(page)
    assert answered_before == 3 * 7
    assert accuracy_before.startswith("0.667")  # the bad worker's 7 items are all wrong

    page.goto(f"{live_server.url}/admin/studies/{study_id}/review")
    rows = page.locator("#review-queue tbody tr")
    expect(rows).to_have_count(3)
    bad_row = page.locator(f'#review-queue tr[data-worker="{bad}"]')
    expect(bad_row.locator(".flag", has_text="gold accuracy 0%")).to_be_visible()
    expect(bad_row).to_contain_text("0/3 (0%)")
    for name in ("good-1", "good-2"):
        good_row = page.locator(f'#review-queue tr[data-worker="{pseud[name]}"]')
        expect(good_row).to_contain_text("3/3 (100%)")
        expect(good_row.locator(".flag", has_text="gold accuracy")).to_have_count(0)

    bad_row.get_by_role("checkbox").check()
    page.locator("#reason").fill(REASON)
    page.locator("#reject").click()

    expect(page.get_by_text("1 worker(s) rejected.")).to_be_visible()
    bad_row = page.locator(f'#review-queue tr[data-worker="{bad}"]')
    expect(bad_row).to_have_class(re.compile(r"\brejected\b"))
    expect(bad_row).to_contain_text(f"rejected: {REASON}")
    expect(bad_row.get_by_role("checkbox")).to_have_count(0)  # a rejection is final
    for name in ("good-1", "good-2"):
        expect(page.locator(f'#review-queue tr[data-worker="{pseud[name]}"]')).to_contain_text("pending")

    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    names = _annotator_names(page)
    assert bad not in names
    assert sorted(names) == sorted([pseud["good-1"], pseud["good-2"]])
    expect(page.locator("#leaderboard")).not_to_contain_text(bad)
    answered_after, accuracy_after = _majority(page)
    assert answered_after == answered_before - bad_non_gold
    assert accuracy_after != accuracy_before
    assert accuracy_after.startswith("1.000")

    page.get_by_role("link", name="Audit log").click()
    entry = page.locator("tbody tr", has_text="worker.rejected")
    expect(entry).to_have_count(1)
    expect(entry).to_contain_text(REASON)
    expect(entry).to_contain_text(admin_email)
