"""The assignment engine as a worker and a researcher see it, on SQLite and PostgreSQL."""

from __future__ import annotations


import pytest
from sqlalchemy import func, select, update

from app.studies import assignment
from app.studies.models import Annotation, Assignment, Bundle, Item
from tests.conftest import consent_version_of, create_tom_study, expire_lease, make_user, statements_run


def answer_all(session, study, bundle_id, answer="Yes"):
    n = 0
    while (a := assignment.next_item(session, study, bundle_id)) is not None:
        assert n < 500, "the engine kept leasing past any bundle size"
        assignment.submit(session, study, bundle_id, a.id, {"answer": answer}, f"k-{a.id}")
        n += 1
    return n


def test_bundle_has_its_size_and_gold_rate(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.2)
    bundle = assignment.enter(session, study, "prolific", "p1", "sess-1", "study-1")
    assert answer_all(session, study, bundle.id) == 10
    golds = session.scalar(
        select(func.count())
        .select_from(Annotation)
        .where(Annotation.worker_id == bundle.worker_id, Annotation.is_gold.is_(True))
    )
    assert golds == 2
    session.refresh(bundle)
    assert bundle.finished_at is not None


def test_reload_returns_the_same_item_and_resubmit_stores_once(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    bundle = assignment.enter(session, study, "mturk", "W1", "A1", "H1")
    first = assignment.next_item(session, study, bundle.id)
    again = assignment.next_item(session, study, bundle.id)
    assert again.id == first.id
    a1 = assignment.submit(session, study, bundle.id, first.id, {"answer": "No"}, "key-1")
    a2 = assignment.submit(session, study, bundle.id, first.id, {"answer": "No"}, "key-1")
    a3 = assignment.submit(session, study, bundle.id, first.id, {"answer": "Yes"}, "key-2")
    assert a1.id == a2.id == a3.id
    assert a3.response == {"answer": "No"}
    assert session.scalar(select(func.count()).select_from(Annotation)) == 1
    # Coming back with the same entry parameters resumes the same bundle.
    back = assignment.enter(session, study, "mturk", "W1", "A1", "H1")
    assert back.id == bundle.id
    nxt = assignment.next_item(session, study, back.id)
    assert nxt.slot == 1 and nxt.item_id != first.item_id


def test_redundancy_and_never_twice(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=500, gold_rate=0.0, annotations_per_item=2)
    n_items = session.scalar(
        select(func.count()).select_from(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))
    )
    done = 0
    for w in range(3):
        b = assignment.enter(session, study, "prolific", f"w{w}", "s", "x")
        done += answer_all(session, study, b.id)
    assert done == 2 * n_items  # capacity filled exactly, the third worker got the leftovers
    per_item = session.execute(select(Annotation.item_id, func.count()).group_by(Annotation.item_id)).all()
    assert max(n for _, n in per_item) == 2
    dupes = session.execute(
        select(Annotation.worker_id, Annotation.item_id, func.count())
        .group_by(Annotation.worker_id, Annotation.item_id)
        .having(func.count() > 1)
    ).all()
    assert dupes == []


def test_expired_lease_returns_item_to_pool(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=5, gold_rate=0.0, annotations_per_item=1)
    b1 = assignment.enter(session, study, "prolific", "slow", "s", "x")
    a = assignment.next_item(session, study, b1.id)
    expire_lease(session, a)
    assert assignment.sweep_expired(session) == 1
    assert session.get(Item, a.item_id).n_active == 0
    b2 = assignment.enter(session, study, "prolific", "fast", "s", "x")
    seen = []
    while (x := assignment.next_item(session, study, b2.id)) is not None:
        seen.append(x.item_id)
        assignment.submit(session, study, b2.id, x.id, {"answer": "Yes"}, f"f-{x.id}")
    # Every item is empty again, so the freed one (first in position order) is leased first.
    assert len(seen) == 5 and seen[0] == a.item_id
    # The item is full now: the slow worker's late answer is refused and nothing is stored.
    with pytest.raises(assignment.NotAvailable, match="^Time ran out on this item and it went to someone else.$"):
        assignment.submit(session, study, b1.id, a.id, {"answer": "No"}, "late")
    assert session.get(Item, a.item_id).n_active == 1
    assert session.scalar(select(func.count()).select_from(Annotation).where(Annotation.item_id == a.item_id)) == 1


def test_exclusion_groups(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=50, gold_rate=0.0)
    # Put the items into 5 groups: a worker can then do at most 5 items.
    ids = session.scalars(select(Item.id).where(Item.study_id == study.id).order_by(Item.id)).all()
    for i, iid in enumerate(ids):
        session.execute(update(Item).where(Item.id == iid).values(exclusion_group=f"g{i % 5}"))
    session.commit()
    b = assignment.enter(session, study, "prolific", "g-worker", "s", "x")
    assert answer_all(session, study, b.id) == 5
    groups = session.scalars(select(Item.exclusion_group).join(Annotation, Annotation.item_id == Item.id)).all()
    assert sorted(groups) == ["g0", "g1", "g2", "g3", "g4"]
    # The bundle ended early (no group left for this worker), with the five answers it has.
    assert assignment.next_item(session, study, b.id) is None


def test_paused_study_takes_no_new_work(session):
    from app.studies import services

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=3)
    b = assignment.enter(session, study, "prolific", "p", "s", "x")
    services.set_state(session, study, "paused", owner)
    with pytest.raises(assignment.NotAvailable):
        assignment.next_item(session, study, b.id)
    with pytest.raises(assignment.NotAvailable):
        assignment.enter(session, study, "prolific", "q", "s", "x")


def test_mturk_worker_gets_the_submit_form_and_prolific_the_redirect(client, session):
    import re

    owner = make_user(session, "researcher")
    study = create_tom_study(
        session,
        owner,
        bundle_size=1,
        gold_rate=0.0,
        completion_code="DONE42",
        redirect_url="https://app.prolific.com/submissions/complete?cc=DONE42",
    )

    def finish(query):
        r = client.get(f"/s/{study.slug}?{query}")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
        r = client.post(
            f"/task/{study.slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(r.text)}
        )
        aid = re.search(r'name="assignment_id" value="(\d+)"', r.text).group(1)
        key = re.search(r'name="idempotency_key" value="(\w+)"', r.text).group(1)
        return client.post(
            f"/task/{study.slug}/answer",
            data={"csrf_token": csrf, "assignment_id": aid, "idempotency_key": key, "answer": "No"},
        ).text

    page = finish("workerId=W9&assignmentId=ASG9&hitId=H9&turkSubmitTo=https://workersandbox.mturk.com")
    # On MTurk the code is the bundle's own (issue 10), shown and sent with the HIT alike.
    code = re.search(r'id="completion-code">(\w+)<', page).group(1)
    assert code != "DONE42" and f'name="completion_code" value="{code}"' in page
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in page
    assert 'name="assignmentId" value="ASG9"' in page
    assert "Return to Prolific" not in page
    client.cookies.clear()
    page = finish("PROLIFIC_PID=P9&STUDY_ID=S9&SESSION_ID=X9")
    assert "DONE42" in page and "Return to Prolific" in page and "externalSubmit" not in page
    client.cookies.clear()
    # A submit address that is not MTurk's own is ignored (no open redirect of the form).
    page = finish("workerId=W8&assignmentId=ASG8&hitId=H9&turkSubmitTo=https://evil.example")
    assert "evil.example" not in page and re.search(r'id="completion-code">\w{10}<', page)


def test_a_late_answer_after_a_reload_is_refused_and_the_new_lease_stays(session):
    """The reload gave the slot a new item: the old page's answer is dropped (its slot was
    re-leased), the new lease is kept, and the bundle goes on from it."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, annotations_per_item=3)
    b = assignment.enter(session, study, "prolific", "late", "s", "x")
    old = assignment.next_item(session, study, b.id)
    expire_lease(session, old)
    newer = assignment.next_item(session, study, b.id)  # the reload: a new item for slot 0
    assert newer.id != old.id and newer.slot == 0
    with pytest.raises(assignment.NotAvailable, match="your task has moved on"):
        assignment.submit(session, study, b.id, old.id, {"answer": "Yes"}, "late-key")
    session.rollback()
    session.expire_all()
    assert session.get(Assignment, newer.id).state == "leased"
    assert session.get(Item, newer.item_id).n_active == 1
    assert session.get(Bundle, b.id).n_done == 0
    assignment.submit(session, study, b.id, newer.id, {"answer": "Yes"}, "k1")
    nxt = assignment.next_item(session, study, b.id)
    assert nxt.slot == 1
    assignment.submit(session, study, b.id, nxt.id, {"answer": "Yes"}, "k2")
    assert assignment.next_item(session, study, b.id) is None
    assert session.scalar(select(func.count()).select_from(Annotation)) == 2


def test_a_worker_rejected_mid_task_gets_no_more_work_and_no_answer_lands(session):
    from app.quality.service import decide
    from app.studies.models import Participant

    owner = make_user(session, "researcher")
    admin = make_user(session, "admin")
    study = create_tom_study(session, owner, bundle_size=5, gold_rate=0.0)
    bundle = assignment.enter(session, study, "prolific", "p-bad", "s1", "st1")
    first = assignment.next_item(session, study, bundle.id)
    assignment.submit(session, study, bundle.id, first.id, {"answer": "Yes"}, "bad-1")
    open_lease = assignment.next_item(session, study, bundle.id)
    pid = session.scalar(select(Participant.id).where(Participant.worker_id == bundle.worker_id))
    decide(session, study, [pid], "rejected", admin, "answers at random")
    with pytest.raises(assignment.NotAvailable):
        assignment.submit(session, study, bundle.id, open_lease.id, {"answer": "No"}, "bad-2")
    with pytest.raises(assignment.NotAvailable):
        assignment.next_item(session, study, bundle.id)
    # The one answer given before the rejection is kept but excluded; nothing came after it.
    rows = session.execute(select(Annotation.excluded).where(Annotation.worker_id == bundle.worker_id)).all()
    assert rows == [(True,)]


def test_a_simulated_worker_reads_each_item_once_beside_the_engines_pick(session):
    """The demo's workers (`proctor demo`, the leaderboard tests) answer through the engine: per
    answer, the pick's SELECT and one read of the item for the answer; submit finds the item the
    worker holds in the session (it was read a third time). A lease and an answer run the same
    SQL as before, its statements built once (assignment._pick_statement)."""
    from app.kinds.tom.demo import simulate_worker

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.0, annotations_per_item=3)
    with statements_run(session.get_bind()) as statements:
        answered = simulate_worker(session, study, "reader", 0.9, seed=1)
    assert answered == 10
    item_reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM items" in s]
    assert len(item_reads) == 2 * answered, item_reads
    assert assignment._pick_statement.cache_info().currsize >= 1  # made once, reused
