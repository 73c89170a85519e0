"""A crowd worker follows an instruction in a building that has only panoramas (the grid
fixture, no semantics sidecar), in a real browser: the view is cut from the uploaded images
(pixels checked against the generated panorama's colour at that heading), they stop, take the
stop back ("Keep walking"), walk on, stop again, rate and answer the study's Likert question;
the stored annotation has the whole path, the stop/resume events and the answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.browser.nav_keys import follow_to, skip_practice
from tests.conftest import make_user
from tests.integration.test_nav_panoramas import GRID, WIDTH, colour, panorama_png

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PATH = ["g00", "g10", "g20", "g21"]  # east, east, then north (left)
LIKERT = "clarity | How clear was the wording? | Unclear; Somewhat; Very clear"


def _study(Session, scan: str, with_panoramas: bool):
    from app.kinds.navigation.environments import get_graph, import_connectivity
    from app.kinds.navigation.panoramas import import_panoramas
    from app.studies import services

    with Session() as s:
        owner = make_user(s, "researcher")
        import_connectivity(s, GRID, scan=scan)
        graph = get_graph(scan)
        tags = {v: k for k, v in enumerate(graph.viewpoints)}
        if with_panoramas:  # every viewpoint but the last of the path has a picture
            import_panoramas(s, scan, [(f"{v}.png", panorama_png(tags[v])) for v in graph.viewpoints if v != PATH[-1]])
        r2r = [
            {
                "distance": 3.0,
                "scan": scan,
                "path_id": 7,
                "path": PATH,
                "heading": math.pi / 2,
                "instructions": ["Walk two steps along the row, then turn left and take one more."],
            }
        ]
        settings = services.StudySettings(title="Panoramas", bundle_size=1, gold_rate=0.0)
        study = services.create_study(
            s, owner, "navigation", settings, json.dumps(r2r).encode(), "r2r", {"likert": LIKERT}
        )
        services.set_state(s, study, "live", owner)
        return study.slug, graph, tags


def _pixel(page, fx: float, fy: float) -> tuple[dict, list[int]]:
    return page.evaluate(
        """([fx, fy]) => {
      const c = document.querySelector("#nav-view canvas");
      const x = Math.floor(c.width * fx), y = Math.floor(c.height * fy);
      const rgba = Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data);
      return [{x, y, w: c.width, h: c.height, heading: proctorViewer.state().heading,
               elevation: proctorViewer.state().elevation}, rgba];
    }""",
        [fx, fy],
    )


def check_view(page, tag: int) -> None:
    """Two canvas pixels, above and below the horizon, show the test panorama's colour of the
    column at that pixel's heading (heading 0 = +y, clockwise, at the image's left edge)."""
    checked = 0
    for fx in (0.55, 0.6, 0.42, 0.3, 0.7):
        for fy, up in ((0.2, True), (0.62, False)):
            where, rgba = _pixel(page, fx, fy)
            assert where["elevation"] == 0
            f = where["w"] / 2 / math.tan(math.pi / 4)  # the viewer's default 90-degree field of view
            heading = (where["heading"] + math.atan2(where["x"] + 0.5 - where["w"] / 2, f)) % (2 * math.pi)
            u = heading / (2 * math.pi) * WIDTH
            if not 0.15 < u % 1 < 0.85 or not 2 <= int(u) % 240 <= 237:
                continue  # too close to a column or colour-band edge to be exact
            want = colour(int(u), up, tag)
            assert rgba[3] == 255 and list(rgba[:3]) == list(want), (where, rgba, want)
            checked += 1
    assert checked >= 2


def test_follow_with_panoramas_undo_stop_and_likert(live_server, page):
    from app.db import get_sessionmaker
    from app.studies.models import Annotation

    Session = get_sessionmaker(live_server.db_url)
    slug, graph, tags = _study(Session, "grid", with_panoramas=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=pano1&STUDY_ID=s&SESSION_ID=x1")
    expect(page.locator("#consent")).to_be_focused()
    page.keyboard.press("Enter")
    skip_practice(page)

    page.wait_for_function("() => window.proctorViewer && proctorViewer.mode() === 'panorama'")
    expect(page.locator("#nav-view canvas")).to_be_focused()
    assert page.evaluate("proctorViewer.state().heading") == pytest.approx(math.pi / 2)
    check_view(page, tags["g00"])
    page.keyboard.press("ArrowLeft")  # turning shows another part of the same picture
    page.wait_for_function("() => Math.abs(proctorViewer.state().heading - Math.PI / 2 + Math.PI / 12) < 1e-9")
    check_view(page, tags["g00"])
    page.keyboard.press("ArrowRight")

    follow_to(page, graph, "g00", "g10")
    page.wait_for_function("() => proctorViewer.mode() === 'panorama'")
    check_view(page, tags["g10"])
    follow_to(page, graph, "g10", "g20")
    page.wait_for_function("() => proctorViewer.mode() === 'panorama'")
    check_view(page, tags["g20"])

    # Stop, then take it back: the rating goes away and the view is live again.
    page.keyboard.press("s")
    expect(page.locator("#nav-rating")).to_be_visible()
    expect(page.locator("#nav-likert-clarity legend")).to_have_text("How clear was the wording?")
    expect(page.locator("#nav-stop")).to_be_disabled()
    page.keyboard.press("k")
    expect(page.locator("#nav-rating")).to_be_hidden()
    expect(page.locator("#nav-view canvas")).to_be_focused()
    expect(page.locator("#nav-stop")).to_be_enabled()
    page.keyboard.press("1")  # walking again: digits do not rate
    assert page.locator("input[name=rating]:checked").count() == 0

    # Walk on to the last viewpoint, which has no picture: the view says so.
    follow_to(page, graph, "g20", "g21")
    assert page.evaluate("proctorViewer.mode()") == "none"
    assert page.evaluate("proctorViewer.describe()").startswith("no picture of this spot")
    page.locator("#nav-stop").click()
    expect(page.locator("#nav-rating")).to_be_visible()
    page.keyboard.press("Escape")  # Escape takes a stop back too
    expect(page.locator("#nav-rating")).to_be_hidden()
    page.keyboard.press("s")
    expect(page.locator("#nav-rating")).to_be_visible()
    page.keyboard.press("3")
    expect(page.locator("input[name=rating][value='3']")).to_be_checked()
    page.keyboard.press("Tab")  # into the Likert question; arrows choose within it
    page.keyboard.press("ArrowRight")
    expect(page.locator("input[name='likert.clarity'][value='2']")).to_be_checked()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()

    with Session() as s:
        ann = s.scalar(select(Annotation))
        r = ann.response
    assert r["path"] == PATH and r["rating"] == 3 and r["likert"] == {"clarity": 2}
    assert [(e["type"], e["step"]) for e in r["events"]] == [
        ("stop", 2),
        ("resume", 2),
        ("stop", 3),
        ("resume", 3),
        ("stop", 3),
    ]
    times = [e["t"] for e in r["events"]]
    assert times == sorted(times)
    assert r["trace"][0][0] == "g00" and r["trace"][-1][0] == "g21"
    assert [p[3] for p in r["trace"]] == sorted(p[3] for p in r["trace"])
    assert ann.scores["success"] and ann.scores["ndtw"] == 1
    assert errors == []


def test_a_building_without_imagery_says_so(live_server, page):
    from app.db import get_sessionmaker

    slug, _, _ = _study(get_sessionmaker(live_server.db_url), "bare-grid", with_panoramas=False)
    page.goto(f"{live_server.url}/s/{slug}?PROLIFIC_PID=pano2&STUDY_ID=s&SESSION_ID=x2")
    page.keyboard.press("Enter")
    skip_practice(page)
    expect(page.locator(".nav-no-imagery")).to_contain_text("This building has no imagery yet")
    assert page.locator("#nav-view canvas").count() == 0
    expect(page.locator("#nav-stop")).to_be_hidden()


def test_a_panorama_from_another_origin_without_cors(live_server, browser):
    """A bucket that sends no CORS headers: the canvas may not read the image, so the viewer
    draws it in column strips; the view still turns and walks."""
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import import_connectivity
    from app.kinds.navigation.models import Environment
    from app.kinds.navigation.panoramas import import_panoramas, panorama_urls

    with get_sessionmaker(live_server.db_url)() as s:
        import_connectivity(s, GRID, scan="cors-grid")
        import_panoramas(s, "cors-grid", [("g00.png", panorama_png(1))])
        links = panorama_urls(s.scalar(select(Environment).where(Environment.scan == "cors-grid")))
    same = live_server.url + links["g00"]
    other = same.replace("127.0.0.1", "localhost")
    # The "bucket" is another host name of the test server, which no CSP img-src names (in
    # production the S3 host is named): the viewer is tested here, not the policy.
    ctx = browser.new_context(bypass_csp=True)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/healthz")
    page.set_content('<div id="a" style="width: 640px"></div><div id="b" style="width: 640px"></div>')
    page.add_script_tag(path=str(ROOT / "app" / "kinds" / "navigation" / "static" / "viewer.js"))
    page.add_style_tag(path=str(ROOT / "app" / "kinds" / "navigation" / "static" / "viewer.css"))
    page.evaluate(
        """([same, other]) => {
      const nb = [{id: "g10", heading: Math.PI / 2, distance: 1, elevation: 0}];
      window.va = ProctorViewer.mount(document.getElementById("a"),
        {panoramas: {g00: same}, viewpoint: "g00", neighbours: nb, heading: 1});
      window.vb = ProctorViewer.mount(document.getElementById("b"),
        {panoramas: {g00: other}, viewpoint: "g00", neighbours: nb, heading: 1});
    }""",
        [same, other],
    )
    page.wait_for_function("() => va.mode() === 'panorama' && vb.mode() === 'panorama'")
    readable = """(id) => { const c = document.querySelector(`#${id} canvas`);
      try { c.getContext("2d").getImageData(0, 0, 1, 1); return true; } catch (e) { return false; } }"""
    assert page.evaluate(readable, "a") is True
    assert page.evaluate(readable, "b") is False  # drawn from a cross-origin image
    assert page.evaluate("vb.turn(0.3), vb.highlighted()") == "g10"
    ctx.close()
