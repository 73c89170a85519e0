"""Crowd integrity (issue 10.6), as a worker, a hostile worker and a researcher meet it through
the pages and the API: the code only for a complete task; caps per worker, per address and on
leases; a bundle that waits while the pool is only momentarily empty; a bundle bound to the
browser that opened it; consent recorded with the version of the text shown."""

from __future__ import annotations

import csv
import hashlib
import io
import re

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app import jobs
from app.storage import get_store
from app.studies import assignment, services
from app.studies.models import Assignment, Bundle, Item, Study
from app.studies.consent import consent_version
from tests.conftest import ROOT, consent_version_of, create_tom_study, expire_lease, login, make_user

PROLIFIC_RETURN = "https://app.prolific.com/submissions/complete?cc=WHOLE1"


def tiny_study(session, owner, n_plain: int, **settings) -> Study:
    """A live ToM study of the fixture's first `n_plain` questions, none of them gold."""
    text = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_text("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows[: n_plain + 1])
    s = services.StudySettings(title=settings.pop("title", "Tiny"), **{"gold_rate": 0.0, **settings})
    study = services.create_study(session, owner, "tom", s, out.getvalue().encode(), "csv", {"gold_count": 0})
    services.set_state(session, study, "live", owner)
    return study


def csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def enter(client, slug: str, pid: str, session_id: str = "", **kw):
    return client.get(
        f"/s/{slug}", params={"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": session_id or pid}, **kw
    )


def start(client, slug: str, pid: str, session_id: str = "") -> str:
    """Enter and agree: the first item's page (or whatever the task shows next)."""
    page = enter(client, slug, pid, session_id)
    assert page.status_code == 200 and 'id="consent"' in page.text, page.text[:300]
    r = client.post(
        f"/task/{slug}/consent", data={"csrf_token": csrf(page.text), "consent_version": consent_version_of(page.text)}
    )
    assert r.status_code == 200, r.text[:300]
    return r.text


def answer(client, slug: str, page: str) -> str:
    aid = re.search(r'name="assignment_id" value="(\d+)"', page).group(1)
    key = re.search(r'name="idempotency_key" value="(\w+)"', page).group(1)
    r = client.post(
        f"/task/{slug}/answer",
        data={"csrf_token": csrf(page), "assignment_id": aid, "idempotency_key": key, "answer": "Yes"},
    )
    assert r.status_code == 200, r.text[:300]
    return r.text


def api_start(client, slug: str, params: dict) -> dict:
    """Enter and agree by the API, as a script or another front end does."""
    r = client.post(f"/api/v1/crowd/{slug}/enter", json={"params": params})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["consented"] is False
    r = client.post(f"/api/v1/crowd/{slug}/consent", json={"consent_version": body["consent_version"]})
    assert r.status_code == 200, r.text
    return body


def api_answer_all(client, slug: str) -> dict:
    """Answer until the API says something else than an item; returns that answer."""
    for _ in range(50):
        nxt = client.get(f"/api/v1/crowd/{slug}/next").json()
        if nxt["state"] != "item":
            return nxt
        r = client.post(
            f"/api/v1/crowd/{slug}/submit",
            json={
                "assignment_id": nxt["assignment_id"],
                "idempotency_key": f"k{nxt['assignment_id']}",
                "response": {"answer": "No"},
            },
        )
        assert r.status_code == 200, r.text
    raise AssertionError("the bundle never ended")


def browser_cookie(response) -> str:
    """The Set-Cookie line of the browser's secret."""
    return next(c for c in response.headers.get_list("set-cookie") if c.startswith("proctor_crowd="))


# --- 1. the code only for a complete task ----------------------------------------------------


def test_a_task_that_ended_short_of_its_items_shows_no_code_and_says_why(app, session):
    owner = make_user(session, "researcher")
    # Two items for tasks of three: every task ends early, after two answers.
    study = tiny_study(session, owner, 2, bundle_size=3, completion_code="WHOLE1", redirect_url=PROLIFIC_RETURN)
    with TestClient(app) as w:
        page = answer(w, study.slug, answer(w, study.slug, start(w, study.slug, "short-1")))
    assert "WHOLE1" not in page and 'id="completion-code"' not in page
    assert 'id="prolific-return"' not in page and "Your task has ended" in page
    said = re.search(r'<p id="no-code">([^<]+)</p>', page).group(1)
    assert "no more questions for you" in said and "after 2 of 3" in said
    assert "completion code is given only for a complete task" in said
    assert "return the task on Prolific" in said

    with TestClient(app) as w:  # the API says the same, and shows no code either
        api_start(
            w,
            study.slug,
            {"workerId": "T1", "assignmentId": "ASG-T1", "hitId": "H", "turkSubmitTo": "https://www.mturk.com"},
        )
        done = api_answer_all(w, study.slug)
    assert done["state"] == "done" and done["done"] is True and done["completed"] == 2
    assert done["complete"] is False and done["code"] is None
    assert done["redirect"] == "" and done["mturk_submit"] == ""
    assert "return the task on MTurk" in done["message"]
    bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == "ASG-T1"))
    assert services.completion_code(study, bundle, "mturk") not in str(done)

    # The export's approval list shows no code for them either.
    job = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    session.commit()
    assert jobs.run_job(job.id) == "done"
    session.refresh(job)
    rows = list(csv.DictReader(io.StringIO(get_store().get(job.result["files"]["completions.csv"]).decode())))
    assert [(r["done"], r["size"], r["completion_code"]) for r in rows] == [("2", "3", "")] * 2


# --- 2. caps ---------------------------------------------------------------------------------


def test_one_task_per_worker_unless_the_researcher_allows_more(app, client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0)
    assert study.max_bundles_per_worker == 1
    start(client, study.slug, "once", "sess-1")  # agreed: the worker's one task
    again = enter(client, study.slug, "once", "sess-2")  # a new Prolific session: a second task
    assert again.status_code == 403
    assert "already taken part in this study: it allows one task per person" in again.text
    assert enter(client, study.slug, "once", "sess-1").status_code == 200  # the first resumes
    r = client.post(
        f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "once", "SESSION_ID": "sess-3"}}
    )
    assert r.status_code == 403 and "one task per person" in r.json()["detail"]

    # The researcher raises the cap for repeat work (also at creation: StudySettings).
    researcher = TestClient(app)
    token = login(researcher, owner)
    r = researcher.patch(
        f"/api/v1/studies/{study.id}", headers={"X-CSRF-Token": token}, json={"max_bundles_per_worker": 2}
    )
    assert r.status_code == 200 and r.json()["max_bundles_per_worker"] == 2
    start(client, study.slug, "once", "sess-2")
    third = enter(client, study.slug, "once", "sess-4")
    assert third.status_code == 403 and "the 2 tasks this study allows per person" in third.text
    assert session.scalar(select(func.count()).select_from(Bundle)) == 2


def test_tasks_open_at_once_from_one_address_are_capped_and_the_address_is_never_stored(app, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=1, gold_rate=0.0, max_open_bundles_per_ip=2)
    lab = [TestClient(app, client=("10.1.2.3", 40000 + i)) for i in range(4)]
    first = start(lab[0], study.slug, "lab-0")
    start(lab[1], study.slug, "lab-1")
    refused = enter(lab[2], study.slug, "lab-2")
    assert refused.status_code == 429 and refused.headers["retry-after"] == "120"
    assert "Too many tasks of this study are open from your network right now (2)" in refused.text
    r = lab[3].post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "lab-3"}})
    assert r.status_code == 429 and "from your network" in r.json()["detail"]
    with TestClient(app, client=("10.9.9.9", 40000)) as elsewhere:  # another address is not held up
        start(elsewhere, study.slug, "home-0")
    # A finished task is no longer open: the next person in the lab gets in.
    assert "completion-code" in answer(lab[0], study.slug, first)
    start(lab[2], study.slug, "lab-2")
    # Only an HMAC of the address is kept, never the address.
    rows = session.execute(select(Bundle)).scalars().all()
    for b in rows:
        assert "10.1.2.3" not in repr({c.name: getattr(b, c.name) for c in Bundle.__table__.columns})
        assert "10.9.9.9" not in repr({c.name: getattr(b, c.name) for c in Bundle.__table__.columns})
    assert {b.ip_hash for b in rows} == {
        assignment.address_pseudonym("10.1.2.3"),
        assignment.address_pseudonym("10.9.9.9"),
    }
    for c in lab:
        c.close()


def test_a_worker_holds_one_live_lease_at_a_time(app, client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0, max_bundles_per_worker=2)

    def live_leases() -> list:
        session.expire_all()
        return session.scalars(
            select(Assignment).where(Assignment.study_id == study.id, Assignment.state == "leased")
        ).all()

    # One task: asking again gives the same lease, never a second one.
    start(client, study.slug, "two-tabs", "hit-1")
    client.get(f"/task/{study.slug}")
    first = live_leases()
    assert len(first) == 1
    # A second task of the same worker (a second HIT): its lease ends the first one's.
    start(client, study.slug, "two-tabs", "hit-2")
    now = live_leases()
    assert len(now) == 1 and now[0].bundle_id != first[0].bundle_id
    assert session.get(Assignment, first[0].id).state == "expired"
    assert session.get(Item, first[0].item_id).n_active == 0  # its item went back to the pool
    assert session.get(Item, now[0].item_id).n_active == 1


# --- 3. a momentarily empty pool -------------------------------------------------------------


def test_a_bundle_waits_while_the_pool_is_only_momentarily_empty_and_resumes(app, session):
    owner = make_user(session, "researcher")
    study = tiny_study(
        session, owner, 2, bundle_size=2, annotations_per_item=1, lease_seconds=60, completion_code="WAITED"
    )
    holder, waiter, other = TestClient(app), TestClient(app), TestClient(app)
    api_start(holder, study.slug, {"PROLIFIC_PID": "holder"})
    held = holder.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert held["state"] == "item"

    page = answer(waiter, study.slug, start(waiter, study.slug, "waiter"))
    # The one item left is leased to someone else, who may never answer it: wait, not done.
    assert 'id="wait"' in page and "No question is free for you right now" in page
    assert "WAITED" not in page
    retry = re.search(r'<meta http-equiv="refresh" content="(\d+)(?:; url=/task/[^"]+)?">', page).group(1)
    assert 5 <= int(retry) <= 30
    r = waiter.get(f"/task/{study.slug}")
    assert r.status_code == 200 and r.headers["retry-after"] == retry and 'id="wait"' in r.text
    assert session.scalar(select(Bundle).where(Bundle.n_done == 1)).finished_at is None  # not closed

    api_start(other, study.slug, {"PROLIFIC_PID": "other"})
    r = other.get(f"/api/v1/crowd/{study.slug}/next")
    body = r.json()
    assert body["state"] == "wait" and body["done"] is False and 5 <= body["retry_after"] <= 30
    assert r.headers["retry-after"] == str(body["retry_after"]) and "code" not in body

    # The holder's lease runs out: the waiting task goes on with that item and completes.
    expire_lease(session, session.get(Assignment, held["assignment_id"]))
    page = waiter.get(f"/task/{study.slug}").text
    assert 'name="assignment_id"' in page
    assert 'id="completion-code">WAITED<' in answer(waiter, study.slug, page)
    # Now nothing can come back for the others: the study has no more work for them.
    done = other.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert done["state"] == "done" and done["complete"] is False and done["code"] is None
    done = holder.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert done["state"] == "done" and done["code"] is None
    for c in (holder, waiter, other):
        c.close()


# --- 4. bound to the browser that opened it --------------------------------------------------


def test_a_bundle_opens_only_in_the_browser_that_started_it(app, client, session, monkeypatch):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0, max_bundles_per_worker=5)
    first = enter(client, study.slug, "victim", "s-1", follow_redirects=False)
    cookie = browser_cookie(first)
    secret = client.cookies.get("proctor_crowd")
    assert secret and "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
    start(client, study.slug, "victim", "s-1")  # bound when the worker agrees (issue 24)
    bundle = session.scalar(select(Bundle))
    assert bundle.browser_hash == hashlib.sha256(secret.encode()).hexdigest() != secret
    start_page = client.get(f"/task/{study.slug}").text

    with TestClient(app) as elsewhere:  # someone who knows the worker id, in another browser
        for session_id in ("s-1", "s-2"):  # resume theirs, or start another in their name
            r = enter(elsewhere, study.slug, "victim", session_id)
            assert r.status_code == 403 and "agreed to this study in another browser" in r.text
        assert elsewhere.get(f"/task/{study.slug}").status_code == 403
        r = elsewhere.post(
            f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "victim", "SESSION_ID": "s-1"}}
        )
        assert r.status_code == 403 and "another browser" in r.json()["detail"]
    with TestClient(app) as copied:  # the session cookie alone, copied without the secret
        copied.cookies.set("proctor_session", client.cookies.get("proctor_session"))
        r = copied.get(f"/task/{study.slug}")
        assert r.status_code == 403 and "another browser" in r.text
    assert session.scalar(select(func.count()).select_from(Bundle)) == 1
    # The browser that started it goes on where it was.
    lease = re.compile(r'name="assignment_id" value="\d+"')
    assert lease.findall(enter(client, study.slug, "victim", "s-1").text) == lease.findall(start_page) != []

    # API clients: the secret comes back in the answer and goes out as a header.
    with TestClient(app) as api:
        body = api_start(api, study.slug, {"PROLIFIC_PID": "scripted"})
        assert api.cookies.get("proctor_crowd") == body["browser_secret"]
    with TestClient(app, headers={"X-Proctor-Browser": body["browser_secret"]}) as same:
        r = same.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "scripted"}})
        assert r.status_code == 200 and r.json()["consented"] is True
        assert same.get(f"/api/v1/crowd/{study.slug}/next").json()["state"] == "item"
    with TestClient(app, headers={"X-Proctor-Browser": "x" * 43}) as wrong:
        r = wrong.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "scripted"}})
        assert r.status_code == 403

    # Over https the cookie is Secure.
    from app.config import get_settings

    monkeypatch.setenv("BASE_URL", "https://proctor.example.org")
    get_settings.cache_clear()
    with TestClient(app, base_url="https://testserver") as secure:
        r = enter(secure, study.slug, "over-tls", follow_redirects=False)
        assert "Secure" in browser_cookie(r)


# --- 5. consent with the version of the text shown -------------------------------------------


def test_consent_is_recorded_with_the_text_shown_and_refused_when_it_changed(app, client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(
        session, owner, bundle_size=2, gold_rate=0.0, consent_text="Version one: answers are kept for a year."
    )
    researcher = TestClient(app)
    token = login(researcher, owner)

    def change_consent(text: str) -> None:
        r = researcher.patch(
            f"/api/v1/studies/{study.id}", headers={"X-CSRF-Token": token}, json={"consent_text": text}
        )
        assert r.status_code == 200, r.text

    shown = enter(client, study.slug, "reader").text
    assert "Version one" in shown
    change_consent("Version two: answers are kept for ten years.")
    r = client.post(
        f"/task/{study.slug}/consent", data={"csrf_token": csrf(shown), "consent_version": consent_version_of(shown)}
    )
    assert r.status_code == 409
    assert "The consent text changed since it was shown to you: read it again" in r.text
    assert "Version two" in r.text and 'id="consent"' in r.text  # the new text, to agree to
    bundle = session.scalar(select(Bundle))
    assert bundle.consented_at is None
    # No version at all (an old page, a hand-made post) is no consent either.
    assert client.post(f"/task/{study.slug}/consent", data={"csrf_token": csrf(shown)}).status_code == 409
    r = client.post(
        f"/task/{study.slug}/consent", data={"csrf_token": csrf(shown), "consent_version": consent_version_of(r.text)}
    )
    assert r.status_code == 200 and 'name="assignment_id"' in r.text
    session.refresh(bundle)
    assert bundle.consented_at is not None
    assert bundle.consent_version == hashlib.sha256(b"Version two: answers are kept for ten years.").hexdigest()[:16]

    with TestClient(app) as api:
        body = api.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "api"}}).json()
        assert body["consent"].startswith("Version two") and body["consented"] is False
        r = api.get(f"/api/v1/crowd/{study.slug}/next")
        assert r.status_code == 409 and "consent first" in r.json()["detail"]
        change_consent("Version three.")
        r = api.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": body["consent_version"]})
        assert r.status_code == 409 and "read it again" in r.json()["detail"]
        assert r.json()["consent"] == "Version three."
        r = api.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": r.json()["consent_version"]})
        assert r.status_code == 200
        assert api.get(f"/api/v1/crowd/{study.slug}/next").json()["state"] == "item"
    session.expire_all()
    versions = dict(session.execute(select(Bundle.external_assignment_id, Bundle.consent_version)).all())
    assert versions == {
        "reader": consent_version(Study(consent_text="Version two: answers are kept for ten years.")),
        "": hashlib.sha256(b"Version three.").hexdigest()[:16],
    }
