"""The example kind (tests/example_kind) in a real browser: a worker counts the words of every
sentence on the kind's own item template, styled by its own static file, and the researcher
reads the tally on the kind's own page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import make_user
from tests.integration.test_example_kind import SENTENCES, make_study

pytestmark = pytest.mark.browser


def test_a_worker_does_the_example_kinds_task_and_the_researcher_reads_its_page(live_server, page):
    from app.db import get_sessionmaker
    from app.jobs import create_job, run_job
    from app.studies.models import Annotation

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher", email="counter@example.org")
        study = make_study(s, owner)
        slug, study_id = study.slug, study.id

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=wc1&STUDY_ID=s&SESSION_ID=x1")
    page.locator("#consent").click()
    for k in range(1, 4):
        expect(page.get_by_text(f"Sentence {k} of 3", exact=True)).to_be_visible()
        sentence = page.locator("#sentence")
        # The kind's stylesheet is served from /static/kinds/wordcount/ and applied.
        assert sentence.evaluate("e => getComputedStyle(e).letterSpacing") != "normal"
        words = len(sentence.inner_text().split())
        page.locator("#words").fill(str(words))
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()

    with Session() as s:
        answers = s.scalars(select(Annotation).where(Annotation.study_id == study_id)).all()
        assert sorted(a.response["words"] for a in answers) == sorted(len(v.split()) for v in SENTENCES.values())
        assert all(a.score == 1.0 for a in answers)
        job_id = create_job(s, "wordcount.tally", study_id=study_id).id
        s.commit()
    assert run_job(job_id) == "done"

    page.goto(f"{live_server.url}/login")
    page.locator("input[name=email]").fill("counter@example.org")
    page.locator("input[name=password]").fill("pw-" + "x" * 8)
    page.locator("button[type=submit]").click()
    page.goto(f"{live_server.url}/wordcount/studies/{study_id}/tally")
    rows = page.locator("#tally tbody tr")
    expect(rows).to_have_count(3)
    assert [r.split("\t") for r in rows.all_inner_texts()] == [[k, "1", "1"] for k in sorted(SENTENCES)]
