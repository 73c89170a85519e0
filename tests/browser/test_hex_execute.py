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


def _procedure(n_steps: int) -> dict:
    if not DEV.exists():
        pytest.skip(f"the released Hexagons data is not at {DEV}")
    return next(
        p
        for p in map(json.loads, DEV.read_text().splitlines())
        if p["number_of_drawing_steps"] == n_steps and isinstance(p["agreement_tags"], list)
    )


def _study(live_server, n_steps: int):
    """A live execution study of one released procedure of n_steps steps, bundles of 1:
    (Session, owner id, study id, slug, procedure)."""
    from app.db import get_sessionmaker
    from app.studies import services

    procedure = _procedure(n_steps)
    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "hexagons",
            services.StudySettings(title="Execute", bundle_size=1, gold_rate=0.0, annotations_per_item=1),
            json.dumps(procedure).encode(),
            "procedures",
        )
        services.set_state(s, study, "live", owner)
        return Session, owner.id, study.id, study.slug, procedure


def test_an_executor_paints_two_steps_by_mouse_and_keyboard_and_sends(live_server, page):
    from app.studies.models import Annotation, Study

    Session, _, study_id, slug, procedure = _study(live_server, 2)

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


# -- Issue 24: nothing a worker paints is lost ------------------------------------------------


def _annotations(Session, study_id):
    from app.studies.models import Annotation

    with Session() as s:
        return [a.response for a in s.scalars(select(Annotation).where(Annotation.study_id == study_id))]


def _enter(page, live_server, slug, pid):
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#hex-pos")).to_have_text("1")
    page.wait_for_function("() => document.querySelectorAll('#hex-board .hexboard-tile').length === 180")


def _tile(page, t):
    return page.locator(f"#hex-board polygon.hexboard-tile[data-tile='{t}']")


def _paint_by_keyboard(page, tile: int, colour: int) -> None:
    page.locator("#hex-board .hexboard-surface").focus()
    page.evaluate(f"() => document.getElementById('hex-board').hexBoard.setCursor({tile})")
    page.keyboard.press(str(colour))
    page.keyboard.press("Space")
    expect(_tile(page, tile)).to_have_attribute("data-colour", str(colour))
    page.locator("#hex-pos").click()  # off the board again: there Space paints


def test_enter_is_next_step_only_and_s_sends_only_once_every_step_was_shown(live_server, page):
    """Enter right after "I agree, start" goes to step 2 (it used to send one step of three and
    show a refusal page); Enter never sends, and S sends only from the last step."""
    Session, _, study_id, slug, procedure = _study(live_server, 3)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, live_server, slug, "keys1")
    page.keyboard.press("s")  # step 1 of 3: S sends nothing (on the board, where the page opens)
    page.locator("#hex-pos").click()  # off the board (Enter is Next step there too)
    page.keyboard.press("s")
    page.keyboard.press("Enter")
    expect(page.locator("#hex-pos")).to_have_text("2")
    expect(page.locator(".hex-instruction[data-step='1']")).to_be_visible()
    expect(page.locator("#submit")).to_be_hidden()
    page.keyboard.press("Enter")
    expect(page.locator("#hex-pos")).to_have_text("3")
    expect(page.locator("#hex-next")).to_be_hidden()
    expect(page.locator("#submit")).to_be_visible()
    # On the last step Enter does nothing: the page, its step and its board stay.
    _paint_by_keyboard(page, 40, 2)
    page.keyboard.press("Enter")
    expect(page.locator("#hex-pos")).to_have_text("3")
    expect(page.locator("#hex-error")).to_be_hidden()
    assert _annotations(Session, study_id) == []
    page.keyboard.press("s")
    expect(page.locator("#hex-pos")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("refused")
    [response] = _annotations(Session, study_id)
    assert len(response["steps"]) == 3 == procedure["number_of_drawing_steps"]
    assert response["steps"][2]["board"][40] == 2 and [a[:2] for a in response["steps"][2]["actions"]] == [[40, 2]]


def test_a_refused_answer_shows_beside_the_board_which_stays_and_can_be_sent_again(live_server, page):
    """The study is closed while the worker paints: Send is refused with the reason beside the
    board, the page keeps step and board, and once the study is open again the same page sends."""
    from app.studies import services
    from app.studies.models import Study
    from app.auth.models import User

    Session, owner_id, study_id, slug, _ = _study(live_server, 2)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, live_server, slug, "refused1")
    _paint_by_keyboard(page, 0, 4)
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("2")
    _paint_by_keyboard(page, 19, 5)
    with Session() as s:
        services.set_state(s, s.get(Study, study_id), "closed", s.get(User, owner_id))
    page.locator("#submit").click()
    error = page.locator(".hex-bar [role=alert]:visible")
    expect(error).to_contain_text("Not sent: This study is closed; answers are no longer taken.")
    assert page.url.endswith(f"/task/{slug}")
    expect(page.locator("#hex-pos")).to_have_text("2")
    expect(_tile(page, 0)).to_have_attribute("data-colour", "4")
    expect(_tile(page, 19)).to_have_attribute("data-colour", "5")
    expect(page.locator("#submit")).to_be_enabled()
    # The message sits by the board, both in view.
    board = page.locator("#hex-board .hexboard-svg").bounding_box()
    box = error.bounding_box()
    assert box["y"] + box["height"] <= 800 and board["y"] < box["y"], (board, box)
    assert _annotations(Session, study_id) == []
    with Session() as s:
        services.set_state(s, s.get(Study, study_id), "live", s.get(User, owner_id))
    page.keyboard.press("s")
    expect(page.locator("#hex-pos")).to_have_count(0)
    [response] = _annotations(Session, study_id)
    first = [0] * 180
    first[0] = 4
    second = list(first)
    second[19] = 5
    assert [st["board"] for st in response["steps"]] == [first, second]


def test_a_reload_in_the_middle_resumes_the_painted_steps(live_server, page):
    Session, _, study_id, slug, _ = _study(live_server, 3)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, live_server, slug, "reload1")
    _paint_by_keyboard(page, 0, 4)
    _paint_by_keyboard(page, 1, 4)
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("2")
    _paint_by_keyboard(page, 19, 5)
    page.reload()
    expect(page.locator("#hex-pos")).to_have_text("2")
    expect(page.locator(".hex-instruction[data-step='1']")).to_be_visible()
    for t, colour in ((0, "4"), (1, "4"), (19, "5"), (20, "0")):
        expect(_tile(page, t)).to_have_attribute("data-colour", colour)
    expect(page.locator("#hex-back")).to_be_enabled()
    _paint_by_keyboard(page, 20, 5)
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("3")
    page.keyboard.press("s")
    expect(page.locator("#hex-pos")).to_have_count(0)
    [response] = _annotations(Session, study_id)
    steps = response["steps"]
    assert [[a[:2] for a in st["actions"]] for st in steps] == [[[0, 4], [1, 4]], [[19, 5], [20, 5]], []]
    assert [sorted(t for t, c in enumerate(st["board"]) if c) for st in steps] == [
        [0, 1],
        [0, 1, 19, 20],
        [0, 1, 19, 20],
    ]


def test_at_1280x800_the_board_and_its_buttons_show_without_scrolling(live_server, page):
    _, _, _, slug, _ = _study(live_server, 2)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, live_server, slug, "desk1")
    board = page.locator("#hex-board .hexboard-svg").bounding_box()
    for button in ("#hex-back", "#hex-next"):
        box = page.locator(button).bounding_box()
        assert 0 <= box["y"] and box["y"] + box["height"] <= 800, (button, box)
        assert box["y"] >= board["y"] + board["height"], (button, box, board)  # under the board, not on it
    assert board["y"] + board["height"] <= 800, board
    page.locator("#hex-next").click()
    box = page.locator("#submit").bounding_box()
    assert box["y"] + box["height"] <= 800 and box["y"] >= board["y"] + board["height"], box
    assert page.evaluate("() => window.scrollY") == 0


def test_on_a_phone_tiles_are_finger_sized_the_board_scrolls_and_no_key_hints_show(live_server, browser):
    from tests.browser.layout import assert_fits

    Session, _, study_id, slug, _ = _study(live_server, 2)
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=phone1&STUDY_ID=s&SESSION_ID=p")
        page.locator("#consent").tap()
        expect(page.locator("#hex-pos")).to_have_text("1")
        page.wait_for_function("() => document.querySelectorAll('#hex-board .hexboard-tile').length === 180")
        for t in (0, 19, 179):
            box = _tile(page, t).bounding_box()
            assert box["width"] >= 32 and box["height"] >= 32, (t, box)
        # Keyboard hints (the keys on the buttons, the digits on the swatches) are not shown.
        assert page.locator("kbd:visible").count() == 0
        assert page.locator(".hexboard-digit:visible").count() == 0
        expect(page.locator("#hex-next")).to_be_visible()
        assert_fits(page, "hexagons execution on a phone")
        nxt = page.locator("#hex-next").bounding_box()
        assert nxt["y"] + nxt["height"] <= 844, nxt
        page.locator(".hexboard-swatch[data-colour='4']").tap()
        box = _tile(page, 0).bounding_box()
        page.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(_tile(page, 0)).to_have_attribute("data-colour", "4")
        # The right edge is off screen; the scroll button brings it in, and a tap paints it.
        assert _tile(page, 17).bounding_box()["x"] + 10 > 390
        right = page.locator(".hexboard-pan-right")
        for _ in range(5):
            if _tile(page, 17).bounding_box()["x"] + _tile(page, 17).bounding_box()["width"] <= 390:
                break
            right.tap()
            page.wait_for_function("() => document.querySelector('#hex-board .hexboard-surface').scrollLeft > 0")
        expect(right).to_be_disabled()
        box = _tile(page, 17).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        page.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(_tile(page, 17)).to_have_attribute("data-colour", "4")
        assert_fits(page, "hexagons execution on a phone, scrolled")
        page.locator("#hex-next").tap()
        page.locator("#submit").tap()
        expect(page.locator("#hex-pos")).to_have_count(0)
        [response] = _annotations(Session, study_id)
        assert sorted(t for t, c in enumerate(response["steps"][0]["board"]) if c) == [0, 17]
    finally:
        ctx.close()


# -- After issue 24: the execution page by keyboard --------------------------------------------


def test_the_page_opens_on_the_board_whose_space_paints_and_s_sends_from_it_on_the_last_step(live_server, page):
    """After "I agree, start" the board has focus: Space paints (Enter is Next step, there
    too); on the last step S on the board sends (it did nothing)."""
    Session, _, study_id, slug, _ = _study(live_server, 2)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, live_server, slug, "focus1")
    surface = page.locator("#hex-board .hexboard-surface")
    expect(surface).to_be_focused()
    page.keyboard.press("4")
    page.keyboard.press("Space")
    expect(_tile(page, 0)).to_have_attribute("data-colour", "4")
    expect(page.locator("#hex-pos")).to_have_text("1")
    page.keyboard.press("s")  # step 1 of 2: nothing
    expect(page.locator("#hex-pos")).to_have_text("1")
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("2")
    surface.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Space")
    expect(_tile(page, 18)).to_have_attribute("data-colour", "4")
    expect(surface).to_be_focused()
    page.keyboard.press("s")
    expect(page.locator("#hex-pos")).to_have_count(0)
    [response] = _annotations(Session, study_id)
    assert [[a[:2] for a in st["actions"]] for st in response["steps"]] == [[[0, 4]], [[18, 4]]]


def test_a_reload_keeps_the_chosen_colour(live_server, page):
    """The colour chosen before a reload is the one chosen after it (it went back to 1)."""
    Session, _, study_id, slug, _ = _study(live_server, 2)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, live_server, slug, "colour1")
    _paint_by_keyboard(page, 0, 6)
    page.reload()
    expect(_tile(page, 0)).to_have_attribute("data-colour", "6")
    expect(page.locator("#hex-board")).to_have_attribute("data-colour", "6")
    expect(page.locator("#hex-board .hexboard-swatch[data-colour='6']")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#hex-board .hexboard-surface")).to_be_focused()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Space")
    expect(_tile(page, 1)).to_have_attribute("data-colour", "6")
    page.locator("#hex-next").click()
    page.locator("#submit").click()
    expect(page.locator("#hex-pos")).to_have_count(0)
    [response] = _annotations(Session, study_id)
    assert [[a[:2] for a in st["actions"]] for st in response["steps"]] == [[[0, 6], [1, 6]], []]
