"""A researcher creates a study from an upload, launches it and watches progress live."""

from __future__ import annotations

import csv
import re

import pytest
from playwright.sync_api import expect

from tests.conftest import ROOT, make_user

pytestmark = pytest.mark.browser

QUESTIONS = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"
PASSWORD = "pw-" + "x" * 8


def test_researcher_creates_launches_and_watches_a_study(live_server, browser, page):
    from app.db import get_sessionmaker

    with get_sessionmaker(live_server.db_url)() as s:
        email = make_user(s, "researcher").email
    with QUESTIONS.open(newline="", encoding="utf-8") as f:
        n_questions = sum(1 for _ in csv.DictReader(f))

    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live_server.url}/studies")
    expect(page.get_by_role("heading", name="Studies")).to_be_visible()

    page.goto(f"{live_server.url}/studies/new")
    page.get_by_label("Title").fill("Browser study")
    page.get_by_label("Upload format").select_option("csv")
    page.get_by_label("Gold rate").fill("0")  # every answer counts toward progress
    page.locator("input[name=file]").set_input_files(QUESTIONS)
    page.get_by_role("button", name="Preview items").click()

    preview = page.locator("#preview")
    expect(preview).to_be_visible()
    expect(preview).to_contain_text(f"{n_questions} questions")
    n_gold = int(re.search(r"(\d+) will serve as gold", preview.inner_text()).group(1))
    assert 0 < n_gold < n_questions
    # The page came back with the form filled and the file kept for the next step.
    expect(page.get_by_label("Title")).to_have_value("Browser study")
    expect(page.get_by_text("kept from the preview")).to_be_visible()

    page.get_by_role("button", name="Create study").click()
    expect(page).to_have_url(re.compile(r"/studies/\d+$"))
    expect(page.get_by_role("heading", name=re.compile("Browser study"))).to_be_visible()
    expect(page.locator("#study-state")).to_have_text("draft")
    expect(page.get_by_text("Study created with its items")).to_be_visible()
    expect(page.locator("#completed")).to_have_text("0")
    expect(page.locator("#live")).to_contain_text(f"({n_questions - n_gold} items)")

    page.locator("#state-live").click()
    expect(page.locator("#study-state")).to_have_text("live")
    expect(page.get_by_text("The study is now live.")).to_be_visible()
    expect(page.locator("#state-live")).to_have_count(0)
    expect(page.locator("#state-paused")).to_be_visible()

    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))

    # A worker, in a browser of their own, answers one item.
    entry = page.locator("#entry-prolific").inner_text()
    slug = entry.split("/s/", 1)[1].split("?", 1)[0]
    worker_ctx = browser.new_context()
    try:
        worker = worker_ctx.new_page()
        worker.set_default_timeout(10000)
        worker.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=pw1&STUDY_ID=s&SESSION_ID=x")
        worker.locator("#consent").click()
        expect(worker.get_by_text("Question 1 of 10", exact=True)).to_be_visible()
        worker.get_by_label("Yes").check()
        worker.locator("#submit").click()
        expect(worker.get_by_text("Question 2 of 10", exact=True)).to_be_visible()
    finally:
        worker_ctx.close()

    # The researcher's page picks it up by itself (htmx polls every 2 s): no reload.
    expect(page.locator("#completed")).to_have_text("1", timeout=8000)
    expect(page.locator("#in-flight")).to_have_text("1")  # the worker's next question
    expect(page.locator("#live")).to_contain_text("pending")
    assert navigations == []
    expect(page.locator("#study-state")).to_have_text("live")
