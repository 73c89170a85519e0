"""An accessibility check of every kind of page: axe-core (from npm, copied by
scripts/vendor.sh into tests/browser/vendor, never under static/) is injected into each page by
the test and must find no serious or critical violation. No page of the site loads it."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.conftest import ROOT, create_tom_study, make_user

pytestmark = pytest.mark.browser

AXE = ROOT / "tests" / "browser" / "vendor" / "axe.min.js"
PASSWORD = "pw-" + "x" * 8
SERIOUS = ("serious", "critical")


def axe_violations(page) -> list[dict]:
    """axe's serious and critical violations on the page as it is now."""
    assert page.evaluate("document.querySelector('script[src*=\"axe\"]')") is None, "a page of the site loads axe"
    if page.evaluate("typeof window.axe") == "undefined":  # a page that changed in place keeps it
        page.evaluate(AXE.read_text())  # not a <script>: the pages' CSP runs none inline
    found = page.evaluate("""async () => {
      const r = await axe.run(document, {resultTypes: ["violations"]});
      return r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 4).map((n) => n.target.join(" "))}));
    }""")
    return [v for v in found if v["impact"] in SERIOUS]


def _studies(s):
    """One study of each built-in kind, with work done, and an admin to see it all."""
    from app.demo import simulate_task
    from app.kinds import all_kinds, register_kind
    from app.kinds.hexagons import KIND as HEX
    from app.kinds.navigation.demo import simulate as follow
    from app.kinds.sts.demo import demo_lines
    from app.kinds.tom.demo import simulate_worker
    from app.studies import services
    from tests.integration.test_navigation import create_nav_study

    if "hexagons" not in all_kinds():
        register_kind(HEX)
    owner = make_user(s, "researcher")
    admin = make_user(s, "admin")

    def live(kind, data, fmt, **settings):
        st = services.StudySettings(
            title=f"A11y {kind}", **{"bundle_size": 2, "gold_rate": 0.0, "annotations_per_item": 2, **settings}
        )
        study = services.create_study(s, owner, kind, st, data, fmt)
        services.set_state(s, study, "live", owner)
        return study

    tom = create_tom_study(s, owner, title="A11y tom", bundle_size=5, gold_rate=0.2)
    simulate_worker(s, tom, "careful", 0.9, seed=1)
    simulate_worker(s, tom, "clicker", 0.0, seed=2, always="Yes")
    _, nav = create_nav_study(s, owner, n=12, bundle_size=6, annotations_per_item=4)
    follow(s, nav, owner)
    a3ds = live(
        "a3ds",
        json.dumps({"pairs": {"z": {"1": 2, "2": 2}}, "speakers": ["literal"], "seed": 1, "gold": 1}).encode(),
        "design",
        gold_rate=0.2,
    )
    simulate_task(s, a3ds, "picker", lambda item, rng: {"choice": "1"}, 3.0, seed=3)
    blank, one, two = [0] * 180, [4] + [0] * 179, [4, 5] + [0] * 178
    hexagons = live(
        "hexagons",
        "\n".join(
            json.dumps(
                {
                    "index": k,
                    "annotation_round": 1,
                    "category": "simple",
                    "image_id": f"P{k}",
                    "instructor_id": 3,
                    "number_of_drawing_steps": 2,
                    "agreement_tags": ["A", "A"],
                    "agreement_scores": [[1, 1, 1]] * 2,
                    "drawing_procedure": [[0, "NONE", blank], [1, "tile 0 red", one], [2, "tile 1 blue", two]],
                }
            )
            for k in (1, 2, 3)
        ).encode(),
        "procedures",
        bundle_size=1,
    )
    steps = json.dumps([{"board": one, "actions": [[0, 4, 900]]}, {"board": two, "actions": [[1, 5, 700]]}])
    simulate_task(s, hexagons, "painter", lambda item, rng: {"steps": steps}, 30.0, seed=4)
    every = demo_lines()
    sts = live(
        "sts",
        "\n".join(
            json.dumps(x)
            for x in [x for x in every if x.get("reference")][:2] + [x for x in every if not x.get("reference")][:4]
        ).encode(),
        "continuations",
        bundle_size=3,
        gold_rate=0.3,
    )
    simulate_task(s, sts, "marker", lambda item, rng: {"marker": "success", "step": 1}, 20.0, seed=5)
    return admin, {"tom": tom, "navigation": nav, "a3ds": a3ds, "hexagons": hexagons, "sts": sts}


def test_every_kind_of_page_passes_axe(live_server, page):
    from sqlalchemy import select

    from app.db import get_sessionmaker
    from app.studies.models import Participant

    with get_sessionmaker(live_server.db_url)() as s:
        admin, studies = _studies(s)
        admin_email = admin.email
        ids = {k: (st.id, st.slug) for k, st in studies.items()}
        replays = {
            k: s.scalar(select(Participant.id).where(Participant.study_id == st.id).order_by(Participant.id))
            for k, st in studies.items()
        }
    url = live_server.url
    found: dict[str, list[dict]] = {}

    def check(name: str) -> None:
        page.wait_for_load_state("load")
        found[name] = axe_violations(page)

    page.goto(f"{url}/")
    check("home")
    page.goto(f"{url}/login")
    check("login")
    page.get_by_label("Email").fill(admin_email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Review queue")).to_be_visible()
    for path, name in (
        ("/studies", "study list"),
        ("/studies/new", "upload (new study)"),
        ("/agents", "agents"),
        ("/admin/review", "review queue, every study"),
        ("/admin/audit", "audit log"),
        ("/account", "account"),
    ):
        page.goto(url + path)
        check(name)
    for kind, (sid, _) in ids.items():
        page.goto(f"{url}/studies/{sid}")
        check(f"study page ({kind})")
        page.goto(f"{url}/studies/{sid}/leaderboard")
        check(f"leaderboard ({kind})")
        page.goto(f"{url}/admin/studies/{sid}/review")
        check(f"review queue ({kind})")
        page.goto(f"{url}/admin/studies/{sid}/participants/{replays[kind]}")
        check(f"replay ({kind})")
    # The Jobs card, with a job in it.
    page.goto(f"{url}/studies/{ids['tom'][0]}")
    page.locator("form[action$='/exports'] button").first.click()
    expect(page.locator("tr.job").first).to_contain_text("annotations")
    check("jobs (study page after an export)")
    # Kinds' own pages (generation runs are cards of the study page, checked above).
    for path, name in (("/sts/suites", "STS suites"), (f"/sts/studies/{ids['sts'][0]}/failures", "STS failures")):
        page.goto(url + path)
        check(name)

    # Each kind's worker pages, in a fresh session: consent, then the first item.
    for kind, (_, slug) in ids.items():
        worker = page.context.browser.new_context()
        wp = worker.new_page()
        wp.set_default_timeout(10000)
        wp.goto(f"{url}/s/{slug}?PROLIFIC_PID=a11y-{kind}&STUDY_ID=s&SESSION_ID=x")
        expect(wp.locator("#consent")).to_be_visible()
        found[f"consent ({kind})"] = axe_violations(wp)
        wp.locator("#consent").click()
        wp.wait_for_load_state("load")
        if kind == "navigation":
            expect(wp.locator("#nav-practice-done")).to_be_visible()
            found["practice (navigation)"] = axe_violations(wp)
            wp.locator("#nav-practice-done").click()
            wp.wait_for_load_state("load")
        expect(wp.locator("#submit")).to_be_attached()
        found[f"worker page ({kind})"] = axe_violations(wp)
        worker.close()

    bad = {name: v for name, v in found.items() if v}
    report = "\n".join(
        f"{name}: {x['impact']} {x['id']} ({x['help']}) at {x['nodes']}" for name, v in bad.items() for x in v
    )
    print(f"axe checked {len(found)} pages; serious or critical violations on {len(bad)}")
    assert not bad, report


def test_no_page_of_the_site_loads_axe():
    """axe is the tests' alone: no template or static file names it."""
    assert AXE.is_file(), "run scripts/vendor.sh (it copies axe-core from node_modules)"
    for folder in (ROOT / "templates", ROOT / "static", ROOT / "app"):
        for f in folder.rglob("*"):
            if f.is_file() and f.suffix in (".html", ".js", ".py", ".css") and "vendor" not in f.parts:
                assert "axe.min" not in f.read_text("utf-8", errors="replace"), f
    assert not list((ROOT / "static").rglob("axe*"))
