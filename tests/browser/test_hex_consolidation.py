"""An admin consolidates a Hexagons execution study in a real browser: the queue leads with
the disputed step (both verifiers agree with each other, not with the instructor), the step
page shows the three boards side by side with the differing tile outlined, the admin paints
the missing tile on the gold board and saves, and the leaderboard's scores go up."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.conftest import make_user

pytestmark = pytest.mark.browser
PASSWORD = "pw-" + "x" * 8


def _all_steps_rows(page) -> list[str]:
    # Each annotator's row (not the pooled one) in the human executors' section.
    rows = page.locator("#hexagons_metrics tbody tr").filter(has_text="Human executors")
    return [t for t in rows.all_inner_texts() if "All human executors" not in t]


def test_the_admins_fix_of_a_disputed_step_changes_the_leaderboard(live_server, page):
    from app.db import get_sessionmaker
    from tests.integration.test_hex_consolidation import disagreement_study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        admin = make_user(s, "admin")
        study = disagreement_study(s, owner)
        study_id, admin_email = study.id, admin.email

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(admin_email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    before = _all_steps_rows(page)
    assert len(before) == 2, before

    page.goto(f"{live_server.url}/hexagons/studies/{study_id}/consolidation")
    first = page.locator("#consolidation tbody tr").first
    expect(first).to_contain_text("paint tiles 0 and 18 red")
    expect(first).to_contain_text("disputed")
    first.get_by_role("link").click()

    expect(page.locator("h1")).to_have_text("Procedure 2, step 1 of 2")
    expect(page.locator("#hex-tag")).to_have_text("VV")
    after = page.locator("#hex-after")
    expect(after.locator("figure")).to_have_count(3)  # instructor, verifier 1, verifier 2
    expect(after.locator(".hex-differs").first).to_have_text("1 tiles differ: 18")
    expect(after.locator(".hex-executor polygon[data-tile='18'][data-diff='true']")).to_have_count(2)
    expect(after.locator("[data-hexboard]").first).to_have_attribute("data-readonly", "true")

    page.locator("input[name=error_class][value='under-execution']").check()
    page.get_by_role("textbox", name="Note").fill("tile 18 was left white")
    gold = page.locator("#hex-gold")
    expect(page.locator("#hex-gold-diff")).to_have_text("Same as the instructor's board.")
    gold.locator(".hexboard-swatch[data-colour='4']").click()
    gold.locator("polygon.hexboard-tile[data-tile='18']").click()
    expect(page.locator("#hex-gold-diff")).to_contain_text("1 tiles differ")
    page.get_by_role("button", name="Save the decision").click()
    expect(page.locator(".flash")).to_contain_text("gold board changed, 2 executions re-scored")
    expect(page.locator("#hex-decision")).to_contain_text("gold board fixed")

    page.goto(f"{live_server.url}/hexagons/studies/{study_id}/consolidation")
    expect(page.locator("#consolidation tbody tr").last).to_contain_text("under-execution")
    page.goto(f"{live_server.url}/studies/{study_id}/leaderboard")
    now = _all_steps_rows(page)
    assert len(now) == 2 and now != before

    header = page.locator("#hexagons_metrics thead th").all_inner_texts()
    col = header.index("Board F1")

    def board_f1(row: str) -> float:  # the Board F1 column, wherever the table puts it
        return float(row.split("\t")[col].split()[0])

    assert all(board_f1(n) > board_f1(b) for n, b in zip(now, before)), (before, now)


def test_an_executor_labels_each_steps_abstraction(live_server, page):
    """With label_abstraction, each instruction has its level and mechanisms; they survive
    going back a step, and the stored execution carries one label per step."""
    from sqlalchemy import select

    from app.db import get_sessionmaker
    from app.studies import services
    from app.studies.models import Annotation
    from tests.integration.test_hex_consolidation import procedures_jsonl

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "hexagons",
            services.StudySettings(title="Label", bundle_size=1, gold_rate=0.0, annotations_per_item=1),
            procedures_jsonl(),
            "procedures",
            {"label_abstraction": 1},
        )
        services.set_state(s, study, "live", owner)
        slug, study_id = study.slug, study.id

    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=hexlabel&STUDY_ID=s&SESSION_ID=x1")
    page.keyboard.press("Enter")  # consent
    labels = page.locator("#hex-labels")
    expect(labels.locator(".hex-abstraction-help")).to_contain_text("High-level abstraction")
    labels.get_by_label("2 Mid-level abstraction").check()
    labels.get_by_label("object", exact=True).check()
    page.locator("#hex-next").click()
    expect(labels.get_by_label("2 Mid-level abstraction")).not_to_be_checked()
    labels.get_by_label("0 No abstraction").check()
    page.locator("#hex-back").click()
    expect(labels.get_by_label("2 Mid-level abstraction")).to_be_checked()
    expect(labels.get_by_label("object", exact=True)).to_be_checked()
    page.locator("#hex-next").click()
    expect(labels.get_by_label("0 No abstraction")).to_be_checked()
    page.locator("#submit").click()
    expect(page.locator("body")).not_to_contain_text("Step 2 of 2")

    with Session() as s:
        response = s.scalar(select(Annotation.response).where(Annotation.study_id == study_id))
        assert response["labels"] == [{"level": 2, "mechanisms": ["object"]}, {"level": 0, "mechanisms": []}]
