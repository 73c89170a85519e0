"""A Hexagons description and its verification in a real browser: an instructor sees the target,
writes two steps and paints each on their own board (the alignment) and sends; the researcher
sends the procedure to verification and launches it; two verifiers, who never see the image,
execute it (the second paints step 2 in the wrong colour); the agreement page tags step 1 A
and step 2 V1."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import make_user

pytestmark = pytest.mark.browser
PASSWORD = "pw-" + "x" * 8
TARGET = [4, 5, 3] + [0] * 177


def _enter(page, url: str, pid: str) -> None:
    page.goto(f"{url}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")


def _tile(page, t: int):
    return page.locator(f"#hex-board polygon.hexboard-tile[data-tile='{t}']")


def _paint(page, colour: int, t: int) -> None:
    page.locator(f"#hex-board .hexboard-swatch[data-colour='{colour}']").click()
    _tile(page, t).click()
    expect(_tile(page, t)).to_have_attribute("data-colour", str(colour))


def _verify(browser, url: str, pid: str, second_colour: int) -> None:
    ctx = browser.new_context()
    page = ctx.new_page()
    page.set_default_timeout(10000)
    _enter(page, url, pid)
    expect(page.locator(".hex-instruction[data-step='0']")).to_have_text("Paint the top-left tile red.")
    expect(page.locator("#hex-target")).to_have_count(0)  # the image is never shown
    _paint(page, 4, 0)
    page.locator("#hex-next").click()
    expect(page.locator(".hex-instruction[data-step='1']")).to_have_text("Paint the tile right of it blue.")
    _paint(page, second_colour, 1)
    page.locator("#submit").click()
    expect(page.locator("body")).not_to_contain_text("Step 2 of 2")
    ctx.close()


def _describing_on_a_phone(live_server, browser, slug: str, pid: str):
    """(context, page) of an instructor on a 390x844 touch phone who agreed and has the board."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    page = ctx.new_page()
    page.set_default_timeout(10000)
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID={pid}")
    page.locator("#consent").tap()
    page.wait_for_function("() => document.querySelectorAll('#hex-board .hexboard-tile').length === 180")
    return ctx, page


def test_an_instructor_describes_two_verifiers_execute_and_the_tags_come_out(live_server, browser, page):
    from app.db import get_sessionmaker
    from app.studies import services
    from app.studies.models import Annotation, Study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        email = owner.email
        study = services.create_study(
            s,
            owner,
            "hexagons",
            services.StudySettings(title="Describe", bundle_size=1),
            json.dumps({"id": "flower", "board": TARGET}).encode(),
            "targets",
        )
        services.set_state(s, study, "live", owner)
        slug, study_id = study.slug, study.id

    # The instructor: the target beside their board; write, paint, add; write, paint, send.
    page.set_viewport_size({"width": 1280, "height": 900})
    _enter(page, f"{live_server.url}/s/{slug}", "instructor1")
    expect(page.locator("#hex-target polygon.hexboard-tile[data-tile='1']")).to_have_attribute("data-colour", "5")
    expect(page.locator("#hex-diff")).to_have_text("3 tiles differ from the target.")
    page.locator("#hex-add-step").click()  # no instruction yet: refused on the page
    expect(page.locator("#hex-message")).to_have_text("Write the step's instruction first.")
    page.locator("#hex-instruction").fill("Paint the top-left tile red.")
    _paint(page, 4, 0)
    page.locator("#hex-add-step").click()
    expect(page.locator("#hex-written li")).to_have_text(["Paint the top-left tile red."])
    expect(page.locator("#hex-pos")).to_have_text("2")
    page.locator("#hex-instruction").fill("Paint the tile right of it blue.")
    _paint(page, 3, 1)  # a slip, then the right colour
    _paint(page, 5, 1)
    expect(page.locator("#hex-diff")).to_have_text("1 tiles differ from the target.")
    page.locator("#submit").click()
    expect(page.locator("#hex-instruction")).to_have_count(0)

    with Session() as s:
        ann = s.scalar(select(Annotation).where(Annotation.study_id == study_id))
        steps = ann.response["steps"]
        assert [st["instruction"] for st in steps] == [
            "Paint the top-left tile red.",
            "Paint the tile right of it blue.",
        ]
        assert steps[0]["board"] == [4] + [0] * 179 and steps[1]["board"] == [4, 5] + [0] * 178
        assert [a[:2] for a in steps[1]["actions"]] == [[1, 3], [1, 5]]
        assert ann.score == pytest.approx(0.8)  # two of the target's three tiles

    # The researcher sends it to verification and launches the new study.
    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/studies/{study_id}")
    expect(page.locator("#hex-description")).to_contain_text("1 procedures written; 1 not yet sent")
    page.locator("#hex-verify").click()
    expect(page.locator("#hex-verification")).to_be_visible()
    page.locator("#state-live").click()
    expect(page.locator("#study-state")).to_have_text("live")
    with Session() as s:
        ver = s.scalar(select(Study).where(Study.title == "Verification: Describe"))
        ver_id, ver_slug = ver.id, ver.slug
        assert ver.annotations_per_item == 2

    _verify(browser, f"{live_server.url}/s/{ver_slug}", "verifier1", 5)
    _verify(browser, f"{live_server.url}/s/{ver_slug}", "verifier2", 3)

    page.goto(f"{live_server.url}/hexagons/studies/{ver_id}/verification")
    rows = page.locator("tr[data-step]")
    expect(rows.nth(0).locator(".hex-tag")).to_have_text("A")
    expect(rows.nth(1).locator(".hex-tag")).to_have_text("V1")
    expect(rows.nth(1)).to_contain_text("0.50")
    expect(page.locator("#hex-tag-counts td[data-tag='A']")).to_have_text("1")


def test_on_a_phone_the_instructors_board_has_finger_sized_tiles_and_the_page_fits(live_server, browser):
    """Issue 24 item 8: at 390x844 with touch, the board the instructor paints has tiles of at
    least 32 px and scrolls in its own box; the target (read-only) fits the width; nothing
    reaches past the screen and a tap paints."""
    from app.db import get_sessionmaker
    from app.studies import services
    from tests.browser.layout import assert_fits

    with get_sessionmaker(live_server.db_url)() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "hexagons",
            services.StudySettings(title="Describe", bundle_size=1),
            json.dumps({"id": "flower", "board": TARGET}).encode(),
            "targets",
        )
        services.set_state(s, study, "live", owner)
        slug = study.slug
    ctx, page = _describing_on_a_phone(live_server, browser, slug, "phone")
    try:
        box = _tile(page, 0).bounding_box()
        assert box["width"] >= 32 and box["height"] >= 32, box
        target = page.locator("#hex-target .hexboard-svg").bounding_box()
        assert target["x"] >= 0 and target["x"] + target["width"] <= 390, target
        assert page.locator(".hexboard-digit:visible").count() == 0
        assert_fits(page, "hexagons description on a phone")
        page.locator("#hex-board .hexboard-swatch[data-colour='4']").tap()
        _tile(page, 0).scroll_into_view_if_needed()
        box = _tile(page, 0).bounding_box()
        page.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(_tile(page, 0)).to_have_attribute("data-colour", "4")
    finally:
        ctx.close()


# -- After issue 24: the description page as a new user walks it ------------------------------


def _describe_study(live_server) -> tuple:
    """A live description study of the one target TARGET, bundles of 1: (Session, study id, slug)."""
    from app.db import get_sessionmaker
    from app.studies import services

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        study = services.create_study(
            s,
            owner,
            "hexagons",
            services.StudySettings(title="Describe", bundle_size=1),
            json.dumps({"id": "flower", "board": TARGET}).encode(),
            "targets",
        )
        services.set_state(s, study, "live", owner)
        return Session, study.id, study.slug


def test_the_consent_page_gives_the_description_keys_not_the_execution_keys(live_server, page):
    """Enter and S type into the instruction box of a description: the consent page's keyboard
    line names the keys of that page, not the execution's Enter / S."""
    _, _, slug = _describe_study(live_server)
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=keys&STUDY_ID=s&SESSION_ID=keys")
    hint = page.locator("p", has_text="Keyboard:")
    expect(hint).to_contain_text(
        "Keyboard: type each step's instruction in the box; Tab to your board: "
        "arrow keys move, 0-7 choose a colour, Space paints, Z undoes."
    )
    expect(hint).not_to_contain_text("Enter: next step")
    expect(hint).not_to_contain_text("S: send")


def test_a_reload_resumes_the_written_steps_the_board_and_the_step_being_written(live_server, page):
    """A reload in the middle of a description (it went back to step 1, an empty list and a
    blank board) keeps the steps added, the board, the instruction being written, its paints
    and the colour; sending then stores every step."""
    from app.studies.models import Annotation

    Session, study_id, slug = _describe_study(live_server)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, f"{live_server.url}/s/{slug}", "reload")
    page.locator("#hex-instruction").fill("Paint the top left tile blue.")
    _paint(page, 5, 0)
    page.locator("#hex-add-step").click()
    expect(page.locator("#hex-pos")).to_have_text("2")
    page.locator("#hex-instruction").fill("Then the one right of it green.")
    _paint(page, 3, 1)
    page.reload()
    expect(page.locator("#hex-written li")).to_have_text(["Paint the top left tile blue."])
    expect(page.locator("#hex-pos")).to_have_text("2")
    expect(page.locator("#hex-instruction")).to_have_value("Then the one right of it green.")
    expect(_tile(page, 0)).to_have_attribute("data-colour", "5")
    expect(_tile(page, 1)).to_have_attribute("data-colour", "3")
    expect(page.locator("#hex-board")).to_have_attribute("data-colour", "3")
    expect(page.locator("#hex-diff")).to_have_text("3 tiles differ from the target.")
    expect(page.locator("#hex-remove-step")).to_be_enabled()
    _tile(page, 2).click()  # in the kept colour
    expect(_tile(page, 2)).to_have_attribute("data-colour", "3")
    page.locator("#submit").click()
    expect(page.locator("#hex-instruction")).to_have_count(0)
    with Session() as s:
        [ann] = s.scalars(select(Annotation).where(Annotation.study_id == study_id)).all()
        steps = ann.response["steps"]
    assert [st["instruction"] for st in steps] == ["Paint the top left tile blue.", "Then the one right of it green."]
    assert [[a[:2] for a in st["actions"]] for st in steps] == [[[0, 5]], [[1, 3], [2, 3]]]
    assert steps[1]["board"] == [5, 3, 3] + [0] * 177


def _inside(box: dict, width: int, height: int) -> bool:
    return box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= width and box["y"] + box["height"] <= height


def _apart(a: dict, b: dict) -> bool:
    return (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_at_1280x800_the_step_label_is_one_line_and_the_box_add_step_and_send_show_unscrolled(live_server, page):
    """The label read "Step / 1 / :" on three lines (core CSS makes a label a flex column), and
    the text box, Add step and Send were below the fold; now they show beside both boards without
    scrolling, also once the list of steps added has grown."""
    from tests.browser.layout import check_layout

    _, _, slug = _describe_study(live_server)
    page.set_viewport_size({"width": 1280, "height": 800})
    _enter(page, f"{live_server.url}/s/{slug}", "desk")
    page.wait_for_function("() => document.querySelectorAll('#hex-board .hexboard-tile').length === 180")
    label = page.locator("label[for='hex-instruction']").bounding_box()
    pos = page.locator("#hex-pos").bounding_box()
    assert label["height"] < 2 * pos["height"], (label, pos)  # one line
    for round_ in range(2):
        boxes = {
            sel: page.locator(sel).bounding_box()
            for sel in (
                "#hex-target .hexboard-svg",
                "#hex-board .hexboard-svg",
                "#hex-instruction",
                "#hex-add-step",
                "#hex-remove-step",
                "#submit",
            )
        }
        for sel, box in boxes.items():
            assert _inside(box, 1280, 800), (round_, sel, box)
        names = list(boxes)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                assert _apart(boxes[a], boxes[b]), (round_, a, b, boxes[a], boxes[b])
        assert page.evaluate("() => window.scrollY") == 0
        assert check_layout(page)["overlapping"] == [], round_
        # Six steps added: the list grows in its own box, the rest stays where it was.
        for i in range(6 if round_ == 0 else 0):
            page.locator("#hex-instruction").fill(f"Step {i + 1}: paint nothing at all, then stop and wait.")
            page.locator("#hex-add-step").click()
            expect(page.locator("#hex-pos")).to_have_text(str(i + 2))
        page.evaluate("() => window.scrollTo(0, 0)")
    expect(page.locator("#hex-written li")).to_have_count(6)
    expect(page.locator("#hex-written li").last).to_be_in_viewport()


def test_on_a_phone_the_target_stays_in_view_while_painting_the_bottom_of_the_board(live_server, browser):
    """At 390x844 the target scrolled away as the instructor went down their (finger-sized)
    board; now it stays at the top of the screen, apart from the tile being painted."""
    _, _, slug = _describe_study(live_server)
    ctx, page = _describing_on_a_phone(live_server, browser, slug, "phone2")
    try:
        page.locator("#hex-board .hexboard-swatch[data-colour='4']").tap()
        for t in (171, 0):  # the bottom row, then back up to the top row
            _tile(page, t).scroll_into_view_if_needed()
            tile = _tile(page, t).bounding_box()
            target = page.locator("#hex-target .hexboard-svg").bounding_box()
            assert _inside(target, 390, 844), (t, target)
            assert _inside(tile, 390, 844) and _apart(tile, target), (t, tile, target)
            if t == 171:
                assert page.evaluate("() => window.scrollY") > 0
            page.touchscreen.tap(tile["x"] + tile["width"] / 2, tile["y"] + tile["height"] / 2)
            expect(_tile(page, t)).to_have_attribute("data-colour", "4")
        # The box and its buttons follow the board, reached by scrolling on.
        page.locator("#hex-add-step").scroll_into_view_if_needed()
        expect(page.locator("#hex-add-step")).to_be_in_viewport()
        expect(page.locator("#hex-instruction")).to_be_in_viewport()
    finally:
        ctx.close()


def test_on_a_phone_the_held_target_never_covers_what_gets_focus(live_server, browser):
    """With the target held at the top, focusing the text box or a button from further up or
    down the page scrolls it clear of the target, not under it."""
    _, _, slug = _describe_study(live_server)
    ctx, page = _describing_on_a_phone(live_server, browser, slug, "phone3")
    try:
        page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
        page.wait_for_function("() => window.scrollY > 0")
        for sel in (
            "#hex-board .hexboard-swatch[data-colour='0']",
            "#hex-instruction",
            "#hex-board .hexboard-surface",
            "#hex-add-step",
        ):
            page.locator(sel).focus()
            expect(page.locator(sel)).to_be_focused()
            box = page.locator(sel).bounding_box()
            target = page.locator(".hex-target-box").bounding_box()  # the held part: heading and board
            assert box["y"] >= target["y"] + target["height"] and box["y"] < 844, (sel, box, target)
    finally:
        ctx.close()
