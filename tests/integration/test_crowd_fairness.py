"""A worker who does the work gets the code, and a worker id is theirs alone (issue 24, items 5
and 6), through the pages and the API as workers and researchers use them, on SQLite (the
engine) and PostgreSQL (the hot path, which leaves the rare cases to the engine)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.studies.models import Assignment, Bundle, Item
from tests.conftest import expire_lease, make_user
from tests.integration.test_crowd_integrity import answer, api_start, start, tiny_study

# --- 5. a task never ends while work is left for it -------------------------------------------


def _live_lease(session, study) -> Assignment:
    session.expire_all()
    return session.scalar(select(Assignment).where(Assignment.study_id == study.id, Assignment.state == "leased"))


def test_an_item_whose_lease_ran_out_comes_back_so_the_task_can_be_completed(app, session):
    """Three items for tasks of three: a worker who let one lease run out (walked away, or
    their answer was refused and they came back later) used to end after 2 of 3 with no code,
    since an item they once held was never theirs again."""
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 3, bundle_size=3, annotations_per_item=1, completion_code="ALLTHREE")
    with TestClient(app) as w:
        page = start(w, study.slug, "walked-away")
        first = _live_lease(session, study)
        expire_lease(session, first)
        page = w.get(f"/task/{study.slug}").text  # back after the lease ran out: another item
        assert "1 of 3" in page and f'value="{first.id}"' not in page
        page = answer(w, study.slug, answer(w, study.slug, page))
        # The only item left is the one that ran out: it comes back, and the task completes.
        assert "3 of 3" in page and 'id="no-code"' not in page, page[:600]
        assert _live_lease(session, study).item_id == first.item_id
        page = answer(w, study.slug, page)
    assert 'id="completion-code">ALLTHREE<' in page

    # By the API the same (a second study: the first one's items are all answered).
    study = tiny_study(session, owner, 3, bundle_size=3, annotations_per_item=1, title="API")
    with TestClient(app) as w:
        api_start(w, study.slug, {"PROLIFIC_PID": "api-away"})
        first = w.get(f"/api/v1/crowd/{study.slug}/next").json()
        expire_lease(session, session.get(Assignment, first["assignment_id"]))
        seen = []
        for _ in range(3):
            nxt = w.get(f"/api/v1/crowd/{study.slug}/next").json()
            assert nxt["state"] == "item", nxt
            seen.append(nxt["item"]["question"])
            r = w.post(
                f"/api/v1/crowd/{study.slug}/submit",
                json={
                    "assignment_id": nxt["assignment_id"],
                    "idempotency_key": f"k{len(seen)}",
                    "response": {"answer": "No"},
                },
            )
            assert r.status_code == 200, r.text
        assert seen[-1] == first["item"]["question"] and len(set(seen)) == 3
        done = r.json()["next"]
    assert done["state"] == "done" and done["complete"] is True and done["code"] == study.completion_code


def test_an_item_swept_back_by_another_process_is_leased_again_for_real(session, db_url):
    """The worker's own session still holds its run-out lease as leased when the sweeper (another
    process) has ended it; nothing else is left, so the item comes back to them. The lease it
    gets must be live in the database and counted once: it stayed expired while the item
    counted it, and a 16-worker study never filled."""
    from app.db import get_sessionmaker
    from app.studies import assignment

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 3, bundle_size=3, annotations_per_item=1)
    bundle = assignment.enter(session, study, "prolific", "slow", "hit", "asg")
    for i in range(2):
        a = assignment.next_item(session, study, bundle.id)
        assignment.submit(session, study, bundle.id, a.id, {"answer": "Yes"}, f"k{i}")
    last = assignment.next_item(session, study, bundle.id)
    expire_lease(session, last)
    with get_sessionmaker(db_url)() as sweeper:
        assert assignment.sweep_expired(sweeper) == 1
    again = assignment.next_item(session, study, bundle.id)
    assert again.id == last.id
    session.expire_all()
    assert session.get(Assignment, last.id).state == "leased"
    assert session.get(Item, last.item_id).n_active == 1
    assignment.submit(session, study, bundle.id, again.id, {"answer": "No"}, "k2")
    session.expire_all()
    assert session.get(Bundle, bundle.id).n_done == 3
    assert session.get(Item, last.item_id).n_active == 1


def test_a_task_waits_for_an_item_another_worker_walked_away_from(app, session):
    """Three items for tasks of three, one annotation each: another worker's abandoned lease
    makes the task wait (the page retries), then the item comes back and the task completes."""
    owner = make_user(session, "researcher")
    study = tiny_study(
        session, owner, 3, bundle_size=3, annotations_per_item=1, lease_seconds=60, completion_code="WAITED3"
    )
    gone, worker = TestClient(app), TestClient(app)
    api_start(gone, study.slug, {"PROLIFIC_PID": "gone"})
    held = gone.get(f"/api/v1/crowd/{study.slug}/next").json()
    page = answer(worker, study.slug, answer(worker, study.slug, start(worker, study.slug, "stays")))
    assert 'id="wait"' in page and "2 of 3 done" in page and 'id="no-code"' not in page
    expire_lease(session, session.get(Assignment, held["assignment_id"]))
    page = answer(worker, study.slug, worker.get(f"/task/{study.slug}").text)
    assert 'id="completion-code">WAITED3<' in page
    gone.close()
    worker.close()


def _three_questions() -> bytes:
    import csv
    import io

    from tests.conftest import ROOT

    rows = list(
        csv.reader(io.StringIO((ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_text("utf-8"), newline=""))
    )
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows[:4])
    return out.getvalue().encode()


def test_the_new_study_form_warns_when_tasks_cannot_be_completed(client, session):
    from tests.conftest import login

    csrf = login(client, make_user(session, "researcher"))
    data = _three_questions()
    form = {
        "csrf_token": csrf,
        "title": "Three",
        "kind": "tom",
        "format": "csv",
        "tom.gold_count": "0",
        "gold_rate": "0",
        "bundle_size": "4",
        "annotations_per_item": "3",
    }

    def preview(**changed) -> str | None:
        r = client.post("/studies/new", data={**form, **changed, "action": "preview"}, files={"file": ("q.csv", data)})
        assert r.status_code == 200, r.text[-500:]
        found = re.search(r'<p class="error" role="alert" id="fill-warning">([^<]+)</p>', r.text)
        return found and found.group(1)

    # Three questions for tasks of four: nobody can finish.
    assert preview() == (
        "No task can be completed: a task of 4 needs 4 different plain items (a worker answers "
        "each item once, and 0 slots are gold), and there are 3. Every worker&#39;s task would end "
        "short, with no completion code: make tasks of at most 3 or add items."
    )
    # 3 x 3 = 9 answers in tasks of 2: four complete tasks, and one answer for a fifth.
    assert preview(bundle_size="2") == (
        "3 plain items x 3 annotations per item = 9 answers make 4 complete tasks of 2 plain "
        "answers; the last answer goes to a task that cannot be completed (it ends short, with no "
        "completion code). Tasks of a size whose plain answers divide 9 avoid it."
    )
    # One annotation per item is one annotation, not "1 annotations".
    assert preview(bundle_size="2", annotations_per_item="1") == (
        "3 plain items x 1 annotation per item = 3 answers make 1 complete task of 2 plain "
        "answers; the last answer goes to a task that cannot be completed (it ends short, with no "
        "completion code). Tasks of a size whose plain answers divide 3 avoid it."
    )
    assert preview(bundle_size="3") is None  # 9 answers, three whole tasks
    # Creating it says so too, on the study page.
    r = client.post("/studies/new", data={**form, "action": "create"}, files={"file": ("q.csv", data)})
    assert r.status_code == 200 and 'class="flash warn"' in r.text
    assert "Before launching: No task can be completed: a task of 4 needs 4" in r.text


# --- 6. a worker id is bound at consent, and the researcher can release it --------------------


def test_a_worker_id_is_bound_to_the_browser_that_consented_not_the_first_that_opened(app, session):
    from app.audit import AuditEntry
    from tests.conftest import login
    from tests.integration.test_crowd_integrity import csrf, enter

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 6, bundle_size=3, contact="lab@example.org")
    phone, laptop, stranger = TestClient(app), TestClient(app), TestClient(app)
    # Someone who knows the id, and the worker's own phone, open the link and never agree.
    assert 'id="consent"' in enter(stranger, study.slug, "owner-id", "s1").text
    assert 'id="consent"' in enter(phone, study.slug, "owner-id", "s1").text
    # The laptop is not locked out: it reads the consent and agrees; the task is its own.
    page = start(laptop, study.slug, "owner-id", "s1")
    assert 'name="assignment_id"' in page
    page = answer(laptop, study.slug, page)
    assert "2 of 3" in page
    # Now the other browsers are refused, and told what to do: the study's contact.
    for other in (phone, stranger):
        for r in (
            other.get(f"/task/{study.slug}"),
            enter(other, study.slug, "owner-id", "s1"),
            enter(other, study.slug, "owner-id", "s2"),
        ):
            assert r.status_code == 403, r.text[:300]
            assert "You agreed to this study in another browser" in r.text
            assert "write to the researcher (lab@example.org) with your worker id" in r.text
    r = phone.post(
        f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "owner-id", "SESSION_ID": "s1"}}
    )
    assert r.status_code == 403 and "lab@example.org" in r.json()["detail"]
    session.expire_all()
    assert session.scalar(select(Bundle).where(Bundle.study_id == study.id)).n_done == 1

    # The laptop is lost: the researcher releases the task from the study page.
    researcher = TestClient(app)
    login(researcher, owner)
    form = researcher.get(f"/studies/{study.id}").text
    r = researcher.post(f"/studies/{study.id}/release", data={"csrf_token": csrf(form), "worker_id": "nobody"})
    assert (
        r.status_code == 404 and 'id="release-error"' in r.text and "a worker &#39;nobody&#39; in this study" in r.text
    )
    r = researcher.post(f"/studies/{study.id}/release", data={"csrf_token": csrf(form), "worker_id": "owner-id"})
    assert r.status_code == 200 and "Released: the next browser that opens the link as owner-id" in r.text
    entry = session.scalar(select(AuditEntry).where(AuditEntry.action == "worker.browser_released"))
    assert entry.actor_id == owner.id and entry.target_id == str(study.id)
    # Released, the task is no browser's until its link is opened again: the browser that held
    # it is refused meanwhile (before, a release let it go on answering).
    r = laptop.get(f"/task/{study.slug}")
    assert r.status_code == 403 and "You agreed to this study in another browser" in r.text
    # The phone opens the link again and goes on where the task was; the laptop is now refused.
    page = enter(phone, study.slug, "owner-id", "s1").text
    assert "2 of 3" in page and 'name="assignment_id"' in page
    assert answer(phone, study.slug, page).count("3 of 3") >= 1
    assert laptop.get(f"/task/{study.slug}").status_code == 403
    for c in (phone, laptop, stranger, researcher):
        c.close()


def test_entries_never_agreed_to_hold_no_task_of_the_cap(app, session):
    """One task per worker: an entry never consented to does not use it up; consent checks it."""
    from tests.integration.test_crowd_integrity import enter

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 6, bundle_size=2)
    with TestClient(app) as w:
        assert enter(w, study.slug, "twice", "sess-1").status_code == 200  # opened, not agreed
        start(w, study.slug, "twice", "sess-2")  # another session: agreed, the worker's one task
        r = enter(w, study.slug, "twice", "sess-1")  # the first, never agreed to: it opens, agreeing is refused
        assert r.status_code == 200 and 'id="consent"' in r.text
        r = w.post(
            f"/task/{study.slug}/consent",
            data={
                "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1),
                "consent_version": re.search(r'name="consent_version" value="([^"]+)"', r.text).group(1),
            },
        )
        assert r.status_code == 403 and "it allows one task per person" in r.text


def test_entering_first_and_agreeing_later_does_not_pass_the_cap_per_address(app, session):
    """Entries hold nothing until agreed to, so the cap on tasks open at once from one address
    is checked at consent too: five people in one lab who all open the link first, then all
    agree, get two tasks and three refusals (before, all five got one)."""
    from tests.conftest import create_tom_study
    from tests.integration.test_crowd_integrity import consent_version_of, csrf, enter

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, max_open_bundles_per_ip=2)
    lab = [TestClient(app, client=("10.1.2.3", 40000 + i)) for i in range(5)]
    pages = [enter(c, study.slug, f"lab-{i}") for i, c in enumerate(lab)]
    assert [p.status_code for p in pages] == [200] * 5
    agreed = [
        c.post(
            f"/task/{study.slug}/consent",
            data={"csrf_token": csrf(p.text), "consent_version": consent_version_of(p.text)},
        )
        for c, p in zip(lab, pages)
    ]
    assert [r.status_code for r in agreed] == [200, 200, 429, 429, 429]
    assert "Too many tasks of this study are open from your network right now (2)" in agreed[2].text
    session.expire_all()
    assert (
        session.scalar(
            select(func.count())
            .select_from(Bundle)
            .where(Bundle.study_id == study.id, Bundle.consented_at.is_not(None))
        )
        == 2
    )
    for c in lab:
        c.close()
