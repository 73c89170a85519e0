"""One completion code per worker's view (issue 10.6): the code on the done page, the code in
the "Return to Prolific" link and the code the study keeps are one; on MTurk each bundle has
its own; the export lists who completed what, to approve or reject on the platform."""

from __future__ import annotations

import csv
import io
import json
import re

from app import jobs
from app.storage import get_store
from tests.conftest import ROOT, consent_version_of, login, make_user

CSV = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()


def _create(client, csrf, **settings):
    return client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": csrf},
        data={
            "kind": "tom",
            "settings": json.dumps({"title": "Codes", "bundle_size": 2, "gold_rate": 0.0, **settings}),
        },
        files={"file": ("q.csv", CSV, "text/csv")},
    )


def _finish(client, slug: str, query: str) -> str:
    r = client.get(f"/s/{slug}?{query}")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
    page = client.post(
        f"/task/{slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(r.text)}
    ).text
    while "assignment_id" in page:
        aid = re.search(r'name="assignment_id" value="(\d+)"', page).group(1)
        key = re.search(r'name="idempotency_key" value="(\w+)"', page).group(1)
        page = client.post(
            f"/task/{slug}/answer",
            data={"csrf_token": csrf, "assignment_id": aid, "idempotency_key": key, "answer": "No"},
        ).text
    return page


def test_the_prolific_code_on_the_page_in_the_link_and_in_the_study_is_one(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    # The link's cc becomes the study's code when none is given (the demo's cc=DEMO case).
    r = _create(client, csrf, redirect_url="https://app.prolific.com/submissions/complete?cc=C0DE77")
    assert r.status_code == 201 and r.json()["completion_code"] == "C0DE77"
    # A code given and a link without cc: the link gets the code.
    r2 = _create(client, csrf, completion_code="ABC123", redirect_url="https://app.prolific.com/submissions/complete")
    assert r2.json()["completion_code"] == "ABC123"
    # Both, and different: refused, nothing stored.
    bad = _create(
        client, csrf, completion_code="ABC123", redirect_url="https://app.prolific.com/submissions/complete?cc=XYZ999"
    )
    assert bad.status_code == 422 and bad.json()["field"] == "redirect_url"
    assert "cc=XYZ999" in bad.json()["detail"] and "ABC123" in bad.json()["detail"]

    for study, code in ((r.json(), "C0DE77"), (r2.json(), "ABC123")):
        client.post(f"/api/v1/studies/{study['id']}/state", headers={"X-CSRF-Token": csrf}, json={"state": "live"})
        worker = type(client)(client.app)
        page = _finish(worker, study["slug"], "PROLIFIC_PID=P1&STUDY_ID=S&SESSION_ID=X")
        shown = re.search(r'id="completion-code">(\w+)<', page).group(1)
        link = re.search(r'id="prolific-return" href="([^"]+)"', page).group(1).replace("&amp;", "&")
        assert shown == code and link.endswith(f"cc={code}") and link.count("cc=") == 1


def test_mturk_bundles_have_codes_of_their_own_and_the_export_lists_them(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    study = _create(client, csrf, completion_code="SHARED1").json()
    client.post(f"/api/v1/studies/{study['id']}/state", headers={"X-CSRF-Token": csrf}, json={"state": "live"})
    shown = {}
    for w in ("A1", "A2"):
        worker = type(client)(client.app)
        page = _finish(
            worker, study["slug"], f"workerId={w}&assignmentId=ASG-{w}&hitId=H1&turkSubmitTo=https://www.mturk.com"
        )
        shown[w] = re.search(r'id="completion-code">(\w+)<', page).group(1)
    assert len(set(shown.values())) == 2 and "SHARED1" not in shown.values()

    job = jobs.create_job(session, "export", study_id=study["id"], owner_id=owner.id)
    session.commit()
    assert jobs.run_job(job.id) == "done"
    session.refresh(job)
    rows = list(csv.DictReader(io.StringIO(get_store().get(job.result["files"]["completions.csv"]).decode())))
    listed = {r["platform_worker_id"]: r for r in rows}
    assert set(listed) == {"A1", "A2"}
    for w, code in shown.items():
        row = listed[w]
        assert (row["platform"], row["completion_code"], row["platform_assignment_id"], row["hit"]) == (
            "mturk",
            code,
            f"ASG-{w}",
            "H1",
        )
        assert (row["done"], row["size"], row["gold_answered"], row["gold_right"]) == ("2", "2", "0", "0")
        assert row["worker_status"] == "pending" and row["finished_at"]
