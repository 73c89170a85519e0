"""An admin reviews a navigation study's workers in a real browser: the worker who reached the
QC goal was approved automatically, the one who stopped far away waits at the top of the queue
with the distance as a flag; the admin opens that worker's replay, sees the schematic map (the
intended path, the worker's path, the goal's 3 m circle, where they stopped), and approves."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from tests.conftest import make_user
from tests.integration.test_nav_quality import participant_of, qc_reference, qc_study, run_task

pytestmark = pytest.mark.browser

PASSWORD = "pw-" + "x" * 8


def test_admin_replays_a_flagged_worker_on_the_map_and_approves(live_server, page):
    from app.auth.models import User
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import get_graph
    from app.studies.models import Study

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        admin_email = make_user(s, "admin").email
        study = qc_study(s, owner)
        study_id = study.id
        ref = qc_reference(s, study)
        graph = get_graph(_scan(s, study))
        run_task(s, study, "near", lambda r: r[:-1])
        run_task(s, study, "far", lambda r: r[:2])  # one step, then stops
        near, far = participant_of(s, study, "near"), participant_of(s, study, "far")
        pseud = {
            u.external_id: u.pseudonym for u in s.scalars(select(User).where(User.external_id.in_(("near", "far"))))
        }
        far_id, far_ne = far.id, graph.distance(ref[1], ref[-1])
        near_ne = graph.distance(ref[-2], ref[-1])
        assert near.status == "approved" and far.status == "pending" and far_ne > 3.0
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(admin_email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Audit log")).to_be_visible()

    page.goto(f"{live_server.url}/admin/studies/{study_id}/review")
    rows = page.locator("#review-queue tbody tr")
    expect(rows).to_have_count(2)
    flag = f"QC episode: stopped {far_ne:.1f} m from the goal"
    expect(rows.nth(0)).to_have_attribute("data-worker", pseud["far"])  # needs a look: first
    expect(rows.nth(0).locator(".flag").first).to_have_text(flag)
    near_row = page.locator(f'#review-queue tr[data-worker="{pseud["near"]}"]')
    expect(near_row.locator("td.status")).to_have_text(
        f"approved (automatic): auto: reached the QC goal ({near_ne:.1f} m)"
    )

    rows.nth(0).get_by_role("link", name="replay").click()
    expect(page).to_have_url(f"{live_server.url}/admin/studies/{study_id}/participants/{far_id}")
    expect(page.locator("#replay-flag")).to_have_text(flag)
    qc = page.locator("section.nav-replay[data-gold=true]")
    expect(qc).to_have_count(1)
    expect(qc.get_by_role("heading")).to_contain_text(f"stopped {far_ne:.1f} m from the goal")
    svg = qc.locator("svg.nav-map")
    expect(svg).to_have_count(1)
    expect(svg).to_be_visible()
    assert svg.bounding_box()["width"] > 200
    assert qc.locator("polyline.intended").get_attribute("data-viewpoints").split() == ref
    assert qc.locator("polyline.walked").get_attribute("data-viewpoints").split() == ref[:2]
    assert float(qc.locator("circle.goal-radius").get_attribute("r")) == 3.0
    expect(svg.locator("g.stop text")).to_have_text(f"stopped {far_ne:.1f} m from the goal")
    # The other five sessions are there too, folded.
    expect(page.locator("details.nav-other")).to_have_count(5)
    page.locator("details.nav-other summary").first.click()
    expect(page.locator("details.nav-other").first.locator("svg.nav-map").first).to_be_visible()

    page.locator("#approve").click()
    expect(page).to_have_url(f"{live_server.url}/admin/studies/{study_id}/review")
    expect(page.get_by_text("1 worker(s) approved.")).to_be_visible()
    far_row = page.locator(f'#review-queue tr[data-worker="{pseud["far"]}"]')
    expect(far_row.locator("td.status")).to_have_text("approved")
    with Session() as s:
        p = participant_of(s, s.get(Study, study_id), "far")
        assert p.status == "approved" and p.reviewed_by is not None

    page.get_by_role("link", name="Audit log").click()
    entries = page.locator("tbody tr", has_text="worker.approved")
    expect(entries).to_have_count(2)
    expect(entries.filter(has_text=admin_email)).to_have_count(1)
    expect(entries.filter(has_text="system")).to_contain_text("auto: reached the QC goal")
    assert errors == []


def _scan(session, study) -> str:
    from app.studies.models import Item

    return session.scalar(select(Item).where(Item.study_id == study.id)).payload["scan"]
