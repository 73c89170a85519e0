"""The Content-Security-Policy (script-src 'self', issue 26.6) in a real browser: a worker walks
the first item of every kind, a researcher the pages with scripts of their own (a study page
that polls, the upload preview's sandboxed iframe, the hexagons target drawing and a
consolidation step, an error page's back link); Chromium reports no violation, no script fails,
and what the scripts do is seen to happen (they are files now, no longer inline)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.nav_keys import skip_practice
from tests.conftest import make_user
from tests.browser.a3ds_pictures import pictures_loaded

pytestmark = pytest.mark.browser
PASSWORD = "pw-" + "x" * 8


def watch(page) -> list[str]:
    """Console lines about the policy (Chromium: "Refused to execute inline script because it
    violates the following Content Security Policy directive ..."), in any frame, and uncaught
    script errors (a file that broke where its inline script worked)."""
    seen: list[str] = []
    page.on(
        "console",
        lambda m: seen.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None,
    )
    page.on("pageerror", lambda e: seen.append(f"uncaught: {e}"))
    return seen


def _tom(page):
    expect(page.locator(".dialogue")).to_be_visible()
    page.keyboard.press("y")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Question 2 of", exact=False)).to_be_visible()


def _navigation(page):
    skip_practice(page)  # practice.js: its button starts the real walk
    page.wait_for_function("() => window.proctorViewer !== undefined")  # item.js mounted the viewer
    page.locator("#nav-view canvas").focus()
    page.keyboard.press("s")
    expect(page.locator("#nav-rating")).to_be_visible()


def _sts(page):
    page.locator("#sts-player").focus()
    page.keyboard.press("End")
    page.keyboard.press("f")
    expect(page.locator("#sts-marker")).to_contain_text("Failure at step")


def _sts_play(page):
    page.wait_for_function("() => document.getElementById('sts-grid').naturalWidth > 0")


def _hexagons(page):
    expect(page.locator("#hex-pos")).to_have_text("1")
    page.locator(".hexboard-swatch[data-colour='4']").click()
    page.locator("polygon.hexboard-tile[data-tile='0']").click()
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("2")  # execute.js pages through the steps


def _hexagons_describe(page):
    page.locator("#hex-instruction").fill("Paint the top-left tile red.")
    page.locator("#hex-board .hexboard-swatch[data-colour='4']").click()
    page.locator("#hex-board polygon.hexboard-tile[data-tile='0']").click()
    page.locator("#hex-add-step").click()
    expect(page.locator("#hex-written li")).to_have_text(["Paint the top-left tile red."])  # describe.js


def _a3ds(page):
    page.wait_for_function(pictures_loaded())
    page.keyboard.press("ArrowRight")  # item.js: the arrow keys pick like 1 and 2
    expect(page.locator(".a3ds-pick input[value='2']")).to_be_checked()


WALKS = {
    "tom": _tom,
    "navigation": _navigation,
    "sts": _sts,
    "sts-play": _sts_play,
    "hexagons": _hexagons,
    "hexagons-describe": _hexagons_describe,
    "a3ds": _a3ds,
}


def test_a_worker_walks_the_first_item_of_every_kind_with_no_violation(live_server, page):
    from app.db import get_sessionmaker
    from app.studies.models import Study
    from tests.preview_fixtures import every_kind

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        studies = every_kind(s, make_user(s, "researcher"))
        slugs = {name: s.get(Study, sid).slug for name, sid in studies.items()}
    assert set(slugs) == set(WALKS)
    page.set_viewport_size({"width": 1280, "height": 900})
    seen = watch(page)
    for name, slug in slugs.items():
        page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=csp-{name}&STUDY_ID=s&SESSION_ID=csp-{name}")
        expect(page.locator("#consent")).to_be_focused()  # app.js, data-focus
        page.keyboard.press("Enter")
        WALKS[name](page)
        assert seen == [], (name, seen)


def test_a_researchers_pages_run_their_scripts_with_no_violation(live_server, page, tmp_path):
    from app.db import get_sessionmaker
    from tests.integration.test_hex_consolidation import disagreement_study
    from tests.preview_fixtures import TWO, _procedure

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        admin = make_user(s, "admin")
        email = admin.email
        disputed = disagreement_study(s, admin).id
        from app.studies import services

        targets = services.create_study(
            s,
            admin,
            "hexagons",
            services.StudySettings(title="Targets"),
            json.dumps({"id": "dot", "board": TWO}).encode(),
            "targets",
        ).id
        s.commit()
    page.set_viewport_size({"width": 1280, "height": 900})
    seen = watch(page)
    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Studies")).to_be_visible()

    # A study page polls its progress with htmx.
    page.goto(f"{live_server.url}/studies/{disputed}")
    with page.expect_response(re.compile(rf"/studies/{disputed}/progress"), timeout=10000):
        pass

    # The upload preview: a procedure's executor page in a sandboxed srcdoc iframe (an opaque
    # origin, the form's policy inherited): board.js and execute.js still load and run.
    file = tmp_path / "procedure.jsonl"
    file.write_text(_procedure(1))
    page.goto(f"{live_server.url}/studies/new")
    page.get_by_label("Title").fill("Sandboxed")
    page.locator("#kind").select_option("hexagons")
    page.locator("#format").select_option("procedures")
    page.locator("input[type=file][name=file]").set_input_files(str(file))
    page.get_by_role("button", name="Preview items").click()
    worker = page.locator("#preview iframe.worker-view").first.element_handle().content_frame()
    worker.wait_for_function(
        "() => document.querySelectorAll('#hex-board polygon.hexboard-tile').length === 180"
        " && document.getElementById('hex-steps').value.startsWith('[')"
    )

    # The target drawing: the board fills the form's field (targets.js).
    page.goto(f"{live_server.url}/hexagons/studies/{targets}/targets")
    field = page.locator("#hex-target-board")
    expect(field).to_have_value(re.compile(r"^\[0,0,"))
    page.locator(".hexboard-swatch[data-colour='4']").click()
    page.locator("polygon.hexboard-tile[data-tile='0']").click()
    expect(field).to_have_value(re.compile(r"^\[4,0,"))

    # A consolidation step: the gold board and its diff (consolidation.js).
    page.goto(f"{live_server.url}/hexagons/studies/{disputed}/consolidation")
    page.locator("#consolidation tbody tr").first.get_by_role("link").click()
    expect(page.locator("#hex-gold-diff")).to_have_text("Same as the instructor's board.")

    # An error page's "Go back" goes back (it was a javascript: link).
    page.goto(f"{live_server.url}/studies")
    page.goto(f"{live_server.url}/studies/2147483647")
    expect(page.locator("h1")).to_have_text("Not found")
    page.get_by_role("link", name="Go back").click()
    expect(page).to_have_url(f"{live_server.url}/studies")
    assert seen == []


def test_an_inline_script_would_be_refused(live_server, page):
    """The watch itself: a script put in a page (as an injection would) is refused and seen."""
    seen = watch(page)
    page.goto(f"{live_server.url}/login")
    page.evaluate("""() => { const s = document.createElement('script');
                            s.textContent = 'window.ran = true'; document.body.append(s); }""")
    assert page.evaluate("window.ran === undefined")
    page.wait_for_timeout(200)
    assert any("Content Security Policy" in line for line in seen), seen
