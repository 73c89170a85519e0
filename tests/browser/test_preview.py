"""A researcher previews a study of every kind in a real browser: the study page's "Preview as a
worker" opens the worker's own pages, they answer each item as a worker would (keys, clicks, a
walk, a play, a painted board), a refused answer shows the kind's message on the same item, and
afterwards every table has exactly the rows it had: no worker, participant, bundle,
assignment, annotation or anything else was stored."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.nav_keys import skip_practice
from tests.conftest import make_user
from tests.preview_fixtures import every_kind, row_counts
from tests.browser.a3ds_pictures import pictures_loaded

pytestmark = pytest.mark.browser
PASSWORD = "pw-" + "x" * 8


def _sent(page, n: int) -> None:
    expect(page.locator(".flash")).to_contain_text(f"Item {n}: the answer was accepted")
    expect(page.locator(".flash")).to_contain_text("Nothing was stored.")


def _tom(page, total):
    expect(page.get_by_text(f"Question 1 of {total}")).to_be_visible()
    # A worker's browser would not send an empty answer; without the check, the server refuses
    # it as it would a worker's, on the same question.
    page.evaluate("document.querySelectorAll('input[name=answer]').forEach(i => i.required = false)")
    page.locator("#submit").click()
    expect(page.locator("#preview-error")).to_be_visible()
    expect(page.get_by_text(f"Question 1 of {total}")).to_be_visible()
    for n in (1, 2):
        page.keyboard.press("y")
        page.keyboard.press("Enter")
        _sent(page, n)
    expect(page.get_by_text(f"Question 3 of {total}")).to_be_visible()
    page.locator("#preview-skip").click()
    expect(page.get_by_text(f"Question 4 of {total}")).to_be_visible()


def _navigation(page, total):
    for n in range(1, total + 1):
        if n == 1:
            skip_practice(page)  # the worker's first item comes after the practice episode
        page.wait_for_function("() => window.proctorViewer !== undefined")
        page.locator("#nav-view canvas").focus()
        page.keyboard.press("s")
        expect(page.locator("#nav-rating")).to_be_visible()
        page.keyboard.press("4")
        page.keyboard.press("Enter")
        _sent(page, n)


def _sts(page, total):
    for n in range(1, total + 1):
        expect(page.get_by_text(f"Episode {n} of {total}", exact=True)).to_be_visible()
        page.locator("#sts-player").focus()
        page.keyboard.press("End")
        page.keyboard.press("f")
        expect(page.locator("#sts-marker")).to_contain_text("Failure at step")
        page.keyboard.press("Enter")
        _sent(page, n)


def _sts_play(page, total):
    step = page.locator("#sts-play-step")
    expect(step).to_contain_text("step 0 of at most")  # the grid came from the owner's route
    page.wait_for_function("() => document.getElementById('sts-grid').naturalWidth > 0")
    page.locator("#sts-play").focus()
    page.keyboard.press("ArrowUp")
    expect(step).to_contain_text("step 1 of at most")
    page.keyboard.press("Enter")
    expect(page.locator("#sts-play-status")).to_contain_text("not done yet")
    page.keyboard.press("Enter")  # sends the unfinished play
    _sent(page, 1)


def _hexagons(page, total):
    expect(page.locator("#hex-pos")).to_have_text("1")
    page.locator(".hexboard-swatch[data-colour='4']").click()
    page.locator("polygon.hexboard-tile[data-tile='0']").click()
    page.locator("#hex-next").click()
    expect(page.locator("#hex-pos")).to_have_text("2")
    page.locator("#submit").click()
    _sent(page, 1)


def _hexagons_describe(page, total):
    page.locator("#hex-instruction").fill("Paint the top-left tile red.")
    page.locator("#hex-board .hexboard-swatch[data-colour='4']").click()
    page.locator("#hex-board polygon.hexboard-tile[data-tile='0']").click()
    page.locator("#submit").click()
    _sent(page, 1)


def _a3ds(page, total):
    for n in range(1, total + 1):
        page.wait_for_function(pictures_loaded())
        page.keyboard.press("1")
        page.keyboard.press("Enter")
        _sent(page, n)


WALKS = {
    "tom": _tom,
    "navigation": _navigation,
    "sts": _sts,
    "sts-play": _sts_play,
    "hexagons": _hexagons,
    "hexagons-describe": _hexagons_describe,
    "a3ds": _a3ds,
}


def test_a_preview_of_every_kind_walks_the_worker_pages_and_stores_nothing(live_server, page):
    from app.db import get_sessionmaker
    from app.studies.models import Item
    from sqlalchemy import func, select

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        email = owner.email
        studies = every_kind(s, owner)
        totals = {
            name: s.scalar(select(func.count()).select_from(Item).where(Item.study_id == sid))
            for name, sid in studies.items()
        }
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Studies")).to_be_visible()
    with Session() as s:
        before = row_counts(s)
    assert before["items"] > 0 and before["users"] > 0

    for name, study_id in studies.items():
        page.goto(f"{live_server.url}/studies/{study_id}")
        page.locator("#preview-link").click()
        expect(page.locator("#preview-banner")).to_contain_text("Nothing is stored")
        expect(page.locator("#consent-details")).to_be_attached()
        page.locator("#preview-start").click()
        expect(page).to_have_url(re.compile(rf"/studies/{study_id}/preview\?n=1$"))
        WALKS[name](page, totals[name])
        if name != "tom":
            expect(page.locator("#preview-end")).to_contain_text(f"You saw all {totals[name]} items")

    with Session() as s:
        assert row_counts(s) == before


def test_the_upload_preview_works_in_its_sandbox(live_server, page, tmp_path):
    """The new-study form's preview of an upload, kind by kind, in its sandboxed iframe: pages
    that need nothing of the researcher's session run in an opaque origin ("allow-scripts"),
    the building viewer and the scene pictures get the session ("allow-same-origin" too) and
    load; a missions file shows a note in place of the grid (nothing is stored to play)."""
    import json

    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import import_house
    from app.kinds.sts.demo import demo_lines
    from tests.conftest import ROOT
    from tests.integration.test_nav_quality import house, r2r_file
    from tests.preview_fixtures import _procedure

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        email = make_user(s, "researcher").email
        import_house(s, house())
        s.commit()
    lines = {x.get("id") or f"{x['scenario']}/{x['agent']}/{x['continuation']}": x for x in demo_lines()}
    cases = [
        (
            "tom",
            "csv",
            (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes(),
            False,
            "() => document.querySelector('.dialogue') !== null",
        ),
        (
            "navigation",
            "r2r",
            r2r_file(2),
            True,
            "() => document.querySelector('#nav-view canvas') !== null && !/Loading/.test("
            "document.querySelector('#nav-view [role=status]').textContent)",
        ),
        (
            "a3ds",
            "design",
            json.dumps({"pairs": {"z": {"1": 2}}, "speakers": ["literal"], "seed": 2}).encode(),
            True,
            pictures_loaded(),
        ),
        (
            "hexagons",
            "procedures",
            _procedure(1).encode(),
            False,
            "() => document.querySelectorAll('#hex-board polygon.hexboard-tile').length === 180",
        ),
        (
            "sts",
            "continuations",
            json.dumps(lines["PutNextLocal-2/expert/0"]).encode(),
            False,
            # the screen may not be there yet (a loaded machine): not yet, rather than a TypeError
            "() => { const s = document.getElementById('sts-screen'); if (!s || !s.style.backgroundImage) return false;"
            " return new Promise(done => { const i = new Image(); i.onload = () => done(i.naturalWidth > 0);"
            " i.onerror = () => done(false); i.src = s.style.backgroundImage.slice(5, -2); }); }",
        ),
        (
            "sts",
            "missions",
            json.dumps({"level": "BabyAI-GoToLocal-v0", "seed": 2, "id": "m2"}).encode(),
            False,
            "() => document.getElementById('sts-play-note') !== null && !document.getElementById('sts-play')",
        ),
    ]
    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Studies")).to_be_visible()
    refused: list[str] = []
    asked = ("/env/", "/a3ds/scenes/", "/api/v1/sts/", "/blobs/")  # what the pages ask the server for
    # (a request still going when the next upload's page opens is aborted: not a refusal)
    page.on(
        "requestfailed",
        lambda r: (
            refused.append(f"{r.failure} {r.url}")
            if any(a in r.url for a in asked) and "ERR_ABORTED" not in (r.failure or "")
            else None
        ),
    )
    page.on("response", lambda r: refused.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    for kind, fmt, data, session, works in cases:
        file = tmp_path / f"{kind}-{fmt}"
        file.write_bytes(data)
        page.goto(f"{live_server.url}/studies/new")
        page.get_by_label("Title").fill("Sandboxed")
        page.locator("#kind").select_option(kind)
        page.locator("#format").select_option(fmt)
        page.locator("input[type=file][name=file]").set_input_files(str(file))
        page.get_by_role("button", name="Preview items").click()
        frame = page.locator("#preview iframe.worker-view").first
        expect(frame).to_have_attribute("sandbox", "allow-scripts allow-same-origin" if session else "allow-scripts")
        worker = frame.element_handle().content_frame()
        worker.wait_for_function(works, timeout=10000)
        # Without the session's flag the page runs in an opaque origin: no cookie reaches it.
        assert worker.evaluate("() => self.origin") == ("null" if not session else live_server.url), kind
    assert refused == []  # no picture, building or grid was refused
