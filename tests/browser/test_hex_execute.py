"""A Hexagons executor in a real browser, on a released procedure: the instructions come one
step at a time; they paint by mouse on the first step and by keyboard on the second (on the
board as they left it), go back and redo a step, and send; the stored answer holds each step's
board and the paints that made it, and it is scored against the instructor's boards."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import ROOT, make_user

pytestmark = pytest.mark.browser
DEV = ROOT.parent / "shared" / "data" / "hexagons" / "dev.jsonl"


def test_an_executor_paints_two_steps_by_mouse_and_keyboard_and_sends(live_server, page):
    if not DEV.exists():
        pytest.skip(f"the released Hexagons data is not at {DEV}")
    from app.db import get_sessionmaker
    from app.studies import services
    from app.studies.models import Annotation, Study

    procedure = next(p for p in map(json.loads, DEV.read_text().splitlines())
                     if p["number_of_drawing_steps"] == 2 and isinstance(p["agreement_tags"], list))
    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s, owner, "hexagons", services.StudySettings(title="Execute", bundle_size=1, gold_rate=0.0,
                                                         annotations_per_item=1),
            json.dumps(procedure).encode(), "procedures")
        services.set_state(s, study, "live", owner)
        slug, study_id = study.slug, study.id

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=hex1&STUDY_ID=s&SESSION_ID=x1")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#hex-pos")).to_have_text("1")
    expect(page.locator(".hex-instruction[data-step='0']")).to_have_text(procedure["drawing_procedure"][1][1])
    tile = lambda t: page.locator(f"polygon.hexboard-tile[data-tile='{t}']")  # noqa: E731
    # Step 1, by mouse: red (4) on tiles 0 and 37, then a misclick on 38 undone.
    page.locator(".hexboard-swatch[data-colour='4']").click()
    for t in (0, 37, 38):
        tile(t).click()
        expect(tile(t)).to_have_attribute("data-colour", "4")
    page.keyboard.press("z")
    expect(tile(38)).to_have_attribute("data-colour", "0")
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("2")
    # Step 2 starts from the board as it was left.
    expect(tile(37)).to_have_attribute("data-colour", "4")
    # By keyboard: focus the board, blue, the cursor to tile 19 (one row down, one column
    # right of 0: Down, Right), paint.
    page.locator(".hexboard-surface").focus()
    page.evaluate("() => document.getElementById('hex-board').hexBoard.setCursor(0)")
    for key in ("5", "ArrowDown", "ArrowRight", "Space"):
        page.keyboard.press(key)
    expect(tile(19)).to_have_attribute("data-colour", "5")
    page.locator("#submit").click()
    expect(page.locator("body")).not_to_contain_text("Step 2 of 2")

    with Session() as s:
        ann = s.scalar(select(Annotation).where(Annotation.study_id == study_id))
        steps = ann.response["steps"]
        assert len(steps) == 2
        first = [0] * 180
        first[0] = first[37] = 4
        assert steps[0]["board"] == first
        assert [a[:2] for a in steps[0]["actions"]] == [[0, 4], [37, 4], [38, 4], [38, 0]]
        second = list(first)
        second[19] = 5
        assert steps[1]["board"] == second and [a[:2] for a in steps[1]["actions"]] == [[19, 5]]
        assert ann.score is not None and 0 <= ann.score < 1
        assert s.get(Study, study_id).kind == "hexagons"
