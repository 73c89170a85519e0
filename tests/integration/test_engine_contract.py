"""What the assignment engine promises, pinned with exact values before the crowd path is
rewritten in SQL (issue 14). Each test names the one-line bug it exists to catch.

Written against the engine's public functions (enter, next_item, submit, finish_early,
sweep_expired, progress), so they hold for any implementation; both backends.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from app.auth.models import User
from app.errors import InputError
from app.studies import assignment, services
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant
from tests.conftest import create_tom_study, expire_lease, make_user


def _count(session, model, *where) -> int:
    return session.scalar(select(func.count()).select_from(model).where(*where))


def _age_lease(session, a: Assignment, seconds: float) -> None:
    """Pretend the lease was taken `seconds` ago (its expiry moves with it)."""
    session.execute(
        update(Assignment)
        .where(Assignment.id == a.id)
        .values(
            leased_at=a.leased_at - timedelta(seconds=seconds),
            lease_expires_at=a.lease_expires_at - timedelta(seconds=seconds),
        )
    )
    session.commit()


def refused(error, message: str):
    """pytest.raises for an engine refusal, with the whole message the worker reads."""
    return pytest.raises(error, match="^" + re.escape(message) + "$")


def _answer(session, study, bundle_id, answer="Yes", prefix="k"):
    a = assignment.next_item(session, study, bundle_id)
    assert a is not None
    return a, assignment.submit(session, study, bundle_id, a.id, {"answer": answer}, f"{prefix}-{a.id}")


@pytest.fixture
def owner(session):
    return make_user(session, "researcher")


# --- submit ---------------------------------------------------------------------------------


def test_a_closed_study_takes_no_answer_even_for_an_open_lease(session, owner):
    # Bug caught: dropping the study-state check in submit.
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "closing", "s", "x")
    open_lease = assignment.next_item(session, study, b.id)
    services.set_state(session, study, "closed", owner)
    with refused(assignment.NotAvailable, "This study is closed; answers are no longer taken."):
        assignment.submit(session, study, b.id, open_lease.id, {"answer": "Yes"}, "after-close")
    session.expire_all()
    assert _count(session, Annotation) == 0
    assert session.get(Assignment, open_lease.id).state == "leased"
    assert session.get(Bundle, b.id).n_done == 0


@pytest.mark.parametrize("state", ["paused", "closed"])
def test_a_study_not_live_gives_no_new_work_and_says_why(session, owner, state):
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "early-bird", "s", "x")
    services.set_state(session, study, state, owner)
    message = f"This study is {state}, not taking work right now."
    with refused(assignment.NotAvailable, message):
        assignment.next_item(session, study, b.id)
    with refused(assignment.NotAvailable, message):
        assignment.enter(session, study, "prolific", "late-comer", "s", "x")
    assert _count(session, Assignment) == 0 and _count(session, Bundle) == 1


def test_a_rejected_worker_is_told_why_on_every_call(session, owner):
    from app.quality.service import decide

    admin = make_user(session, "admin")
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "told", "s", "x")
    lease = assignment.next_item(session, study, b.id)
    decide(session, study, [b.participant_id], "rejected", admin, "copied answers")
    message = "Your work on this study has been reviewed and closed."
    with refused(assignment.NotAvailable, message):
        assignment.next_item(session, study, b.id)
    with refused(assignment.NotAvailable, message):
        assignment.submit(session, study, b.id, lease.id, {"answer": "Yes"}, "told-1")
    with refused(assignment.NotAvailable, message):
        assignment.enter(session, study, "prolific", "told", "s", "x")
    assert _count(session, Annotation) == 0


def test_a_paused_study_still_takes_the_answer_to_an_open_lease(session, owner):
    # Pausing stops new work, not the answer a worker is typing.
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "pausing", "s", "x")
    open_lease = assignment.next_item(session, study, b.id)
    services.set_state(session, study, "paused", owner)
    stored = assignment.submit(session, study, b.id, open_lease.id, {"answer": "No"}, "while-paused")
    assert stored.response == {"answer": "No"} and stored.item_id == open_lease.item_id
    assert session.get(Bundle, b.id).n_done == 1


def test_a_late_answer_never_overfills_a_complete_bundle(session, owner):
    # Bug caught: dropping the "already complete" check lets a bundle of 2 hold 3 answers.
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, annotations_per_item=3)
    b = assignment.enter(session, study, "prolific", "overfill", "s", "x")
    stale = assignment.next_item(session, study, b.id)
    expire_lease(session, stale)
    _answer(session, study, b.id)  # the reload's item fills slot 0
    _answer(session, study, b.id)  # slot 1: the bundle is complete
    assert assignment.next_item(session, study, b.id) is None
    with refused(assignment.NotAvailable, "Your task is already complete."):
        assignment.submit(session, study, b.id, stale.id, {"answer": "No"}, "too-late")
    session.expire_all()
    assert session.get(Bundle, b.id).n_done == 2
    assert _count(session, Annotation, Annotation.worker_id == b.worker_id) == 2
    assert session.get(Assignment, stale.id).state == "expired"
    assert session.get(Item, stale.item_id).n_active == 0


@pytest.mark.parametrize("key", ["", "k" * 65])
def test_the_idempotency_key_must_have_1_to_64_characters(session, owner, key):
    # Bug caught: dropping the key check (an empty key would then match other submissions).
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "keys", "s", "x")
    a = assignment.next_item(session, study, b.id)
    with refused(InputError, "field 'idempotency_key': an idempotency key of 1-64 characters is required"):
        assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, key)
    assert _count(session, Annotation) == 0
    stored = assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, "k" * 64)
    assert stored.idempotency_key == "k" * 64


def test_one_workers_key_cannot_fetch_another_workers_answer(session, owner):
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b1 = assignment.enter(session, study, "prolific", "first", "s", "x")
    b2 = assignment.enter(session, study, "prolific", "second", "s", "x")
    a1 = assignment.next_item(session, study, b1.id)
    a2 = assignment.next_item(session, study, b2.id)
    assignment.submit(session, study, b1.id, a1.id, {"answer": "Yes"}, "shared-key")
    with refused(InputError, "field 'idempotency_key': this key belongs to another submission") as err:
        assignment.submit(session, study, b2.id, a2.id, {"answer": "No"}, "shared-key")
    assert err.value.field == "idempotency_key"
    theirs = assignment.next_item(session, study, b1.id)  # open, and not in b2's bundle
    with refused(InputError, "field 'assignment_id': no such assignment in your task") as err:
        assignment.submit(session, study, b2.id, theirs.id, {"answer": "No"}, "steal")
    assert err.value.field == "assignment_id"
    assert _count(session, Annotation) == 1


def test_an_assignment_neither_leased_nor_expired_takes_no_answer(session, owner):
    # Bug caught: dropping the final state check. A lease taken back from the worker
    # (state "rejected" here, while the worker is still pending) must not be answerable.
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "taken-back", "s", "x")
    a = assignment.next_item(session, study, b.id)
    session.execute(update(Assignment).where(Assignment.id == a.id).values(state="rejected"))
    session.commit()
    with refused(assignment.NotAvailable, "This item is no longer yours to answer."):
        assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, "taken")
    assert _count(session, Annotation) == 0
    assert session.get(Bundle, b.id).n_done == 0


def test_a_page_kept_open_never_fills_a_gold_slot(session, owner):
    # Bug caught (issue 10): a worker let a lease expire, reloaded, answered the new item, and
    # then sent the old page's answer while a gold item was leased: it filled the gold slot, so
    # the worker never answered gold. A late answer fills only its own slot.
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.25, annotations_per_item=3)
    b = assignment.enter(session, study, "prolific", "gold-dodger", "s", "x")
    session.get(Bundle, b.id).gold_slots = [2]  # the third item of the task is gold
    session.commit()
    first = assignment.next_item(session, study, b.id)
    assignment.submit(session, study, b.id, first.id, {"answer": "Yes"}, "dodge-0")
    old = assignment.next_item(session, study, b.id)  # slot 1, left open in a tab
    expire_lease(session, old)
    newer = assignment.next_item(session, study, b.id)  # the reload: slot 1 again
    assert (old.slot, newer.slot) == (1, 1)
    assignment.submit(session, study, b.id, newer.id, {"answer": "Yes"}, "dodge-1")
    gold = assignment.next_item(session, study, b.id)
    assert gold.slot == 2 and gold.is_gold
    with refused(
        assignment.NotAvailable, "Time ran out on this item and your task has moved on: answer the item it shows now."
    ):
        assignment.submit(session, study, b.id, old.id, {"answer": "Yes"}, "dodge-late")
    session.expire_all()
    assert session.get(Assignment, gold.id).state == "leased"  # the gold lease stands
    assert session.get(Bundle, b.id).n_done == 2
    assert _count(session, Annotation) == 2


def test_a_late_answer_is_kept_when_its_item_has_room(session, owner):
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, annotations_per_item=2)
    b = assignment.enter(session, study, "prolific", "late-ok", "s", "x")
    a = assignment.next_item(session, study, b.id)
    expire_lease(session, a)
    assert assignment.sweep_expired(session) == 1
    assert session.get(Item, a.item_id).n_active == 0
    stored = assignment.submit(session, study, b.id, a.id, {"answer": "No"}, "late-kept")
    session.expire_all()
    assert stored.response == {"answer": "No"}
    assert session.get(Item, a.item_id).n_active == 1
    assert session.get(Assignment, a.id).state == "completed"
    assert session.get(Bundle, b.id).n_done == 1


def test_the_client_details_are_stored_with_the_answer(session, owner):
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "client", "s", "x")
    a = assignment.next_item(session, study, b.id)
    details = {"user_agent": "Mozilla/5.0 (X11)", "viewport": "1280x900"}
    assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, "client-1", client=details)
    a2 = assignment.next_item(session, study, b.id)
    assignment.submit(session, study, b.id, a2.id, {"answer": "No"}, "client-2")
    session.expire_all()
    stored = dict(session.execute(select(Annotation.idempotency_key, Annotation.client)).all())
    assert stored == {"client-1": details, "client-2": {}}


def test_duration_is_milliseconds_from_lease_to_answer(session, owner):
    # Bug caught: a changed unit of duration_ms, which feeds the "too fast" review flag.
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "timed", "s", "x")
    a = assignment.next_item(session, study, b.id)
    _age_lease(session, a, 2.5)
    stored = assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, "timed-1")
    session.expire_all()
    row = session.get(Assignment, a.id)
    expected = int((row.completed_at - row.leased_at).total_seconds() * 1000)
    assert stored.duration_ms == expected
    assert 2500 <= stored.duration_ms < 2500 + 60_000


# --- next -----------------------------------------------------------------------------------


def test_items_fill_depth_first_then_in_position_order(session, owner):
    # Bug caught: reversing either ordering of the pick (fuller first; then by position).
    study = create_tom_study(session, owner, bundle_size=1, gold_rate=0.0, annotations_per_item=3)
    by_position = session.scalars(
        select(Item.id).where(Item.study_id == study.id, Item.is_gold.is_(False)).order_by(Item.position.desc())
    ).all()
    first = []
    for w in range(4):
        b = assignment.enter(session, study, "prolific", f"depth-{w}", "s", "x")
        a, _ = _answer(session, study, b.id, prefix=f"d{w}")
        first.append(a.item_id)
    # Three workers on the same item (it fills to its redundancy), then the next position.
    assert first == [by_position[0]] * 3 + [by_position[1]]
    assert session.get(Item, by_position[0]).n_active == 3


def test_a_worker_gets_only_the_studys_own_items(session, owner):
    # Bug caught: a pick without the study filter (the other study's half-done items are
    # "fuller", so depth first would hand them out here).
    first = create_tom_study(session, owner, title="First", bundle_size=2, gold_rate=0.0)
    for w in range(2):
        b = assignment.enter(session, first, "prolific", f"first-{w}", "s", "x")
        _answer(session, first, b.id, prefix=f"first{w}")
    second = create_tom_study(session, owner, title="Second", bundle_size=3, gold_rate=0.2)
    b = assignment.enter(session, second, "prolific", "first-0", "s", "x")
    while (a := assignment.next_item(session, second, b.id)) is not None:
        assert session.get(Item, a.item_id).study_id == second.id
        assignment.submit(session, second, b.id, a.id, {"answer": "No"}, f"second-{a.id}")
    assert session.get(Bundle, b.id).n_done == 3


def test_exclusion_groups_hold_within_one_study_only(session, owner):
    # Bug caught: the group check without the study filter (a worker who did group "g0" in one
    # study would be kept from every "g0" in any other study).
    def grouped_study(title):
        study = create_tom_study(session, owner, title=title, bundle_size=2, gold_rate=0.0)
        ids = session.scalars(select(Item.id).where(Item.study_id == study.id)).all()
        for i, iid in enumerate(ids):
            session.execute(update(Item).where(Item.id == iid).values(exclusion_group=f"g{i % 2}"))
        session.commit()
        return study

    first, second = grouped_study("First"), grouped_study("Second")
    for study in (first, second):
        b = assignment.enter(session, study, "prolific", "grouped", "s", "x")
        groups = []
        while (a := assignment.next_item(session, study, b.id)) is not None:
            groups.append(session.get(Item, a.item_id).exclusion_group)
            assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, f"grp-{a.id}")
        assert sorted(groups) == ["g0", "g1"]


def test_a_half_done_item_goes_first_to_the_next_worker(session, owner):
    study = create_tom_study(session, owner, bundle_size=1, gold_rate=0.0, annotations_per_item=2)
    ids = session.scalars(
        select(Item.id).where(Item.study_id == study.id, Item.is_gold.is_(False)).order_by(Item.position)
    ).all()
    lowest = ids[0]  # last in position order: it gets picked only because it is half done
    session.execute(update(Item).where(Item.id == lowest).values(n_active=1))
    session.commit()
    b = assignment.enter(session, study, "prolific", "next-one", "s", "x")
    a = assignment.next_item(session, study, b.id)
    assert a.item_id == lowest
    assert session.get(Item, lowest).n_active == 2


def test_finish_early_closes_an_unfinished_bundle(session, owner):
    # Bug caught: finish_early doing nothing (it was only tested on finished bundles).
    study = create_tom_study(session, owner, bundle_size=5, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "early", "s", "x")
    _answer(session, study, b.id)
    assert session.get(Bundle, b.id).finished_at is None
    assignment.finish_early(session, b.id)
    session.expire_all()
    bundle = session.get(Bundle, b.id)
    assert bundle.finished_at is not None and bundle.n_done == 1
    assert assignment.next_item(session, study, b.id) is None
    stamp = bundle.finished_at
    assignment.finish_early(session, b.id)  # a second call keeps the first close time
    session.expire_all()
    assert session.get(Bundle, b.id).finished_at == stamp


def test_gold_slots_get_gold_items_and_gold_takes_no_capacity(session, owner):
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.3, annotations_per_item=1)
    b = assignment.enter(session, study, "prolific", "gold", "s", "x")
    assert len(b.gold_slots) == 3 and b.gold_slots == sorted(b.gold_slots)
    gold_before = dict(
        session.execute(select(Item.id, Item.n_active).where(Item.study_id == study.id, Item.is_gold.is_(True))).all()
    )
    slots = {}
    while (a := assignment.next_item(session, study, b.id)) is not None:
        slots[a.slot] = a.is_gold
        assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, f"g-{a.id}")
    assert sorted(s for s, g in slots.items() if g) == b.gold_slots
    assert len(slots) == 10
    gold_after = dict(
        session.execute(select(Item.id, Item.n_active).where(Item.study_id == study.id, Item.is_gold.is_(True))).all()
    )
    assert gold_after == gold_before  # gold is shared: no count taken or given back


def test_gold_is_spread_by_a_per_worker_start_and_wraps_around(session, owner):
    # Gold items are shared by everyone; each worker starts at their own point of the gold
    # list (in position order) and goes round it, so gold answers spread over all gold items.
    # The start is the first 20 bits of md5 of the worker id over 2^20, the hot path's too.
    import hashlib

    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5)
    gold = session.execute(
        select(Item.id, Item.position).where(Item.study_id == study.id, Item.is_gold.is_(True)).order_by(Item.position)
    ).all()
    assert len(gold) == 5
    firsts = set()
    for w in range(6):
        b = assignment.enter(session, study, "prolific", f"spread-{w}", "s", "x")
        start = int(hashlib.md5(str(b.worker_id).encode()).hexdigest()[:5], 16) / 2**20
        after = [i for i, pos in gold if pos >= start]
        expected = (after + [i for i, pos in gold if pos < start])[:2]
        served = []
        while (a := assignment.next_item(session, study, b.id)) is not None:
            if a.is_gold:
                served.append(a.item_id)
            assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, f"s{w}-{a.id}")
        assert served == expected
        firsts.add(served[0])
    assert len(firsts) > 1


def test_gold_slots_take_regular_items_once_a_worker_has_seen_all_gold(session, owner):
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.9)  # 9 slots, 5 gold
    b = assignment.enter(session, study, "prolific", "all-gold", "s", "x")
    assert len(b.gold_slots) == 9
    kinds = []
    while (a := assignment.next_item(session, study, b.id)) is not None:
        kinds.append(a.is_gold)
        assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, f"ag-{a.id}")
    assert len(kinds) == 10 and sum(kinds) == 5
    assert session.get(Bundle, b.id).finished_at is not None


def test_an_expired_gold_lease_gives_nothing_back(session, owner):
    study = create_tom_study(session, owner, bundle_size=1, gold_rate=0.9)  # round(0.9): slot 0 is gold
    b = assignment.enter(session, study, "prolific", "gold-late", "s", "x")
    a = assignment.next_item(session, study, b.id)
    assert a.is_gold
    expire_lease(session, a)
    assert assignment.sweep_expired(session) == 1
    assert session.get(Item, a.item_id).n_active == 0
    # A late answer to gold is kept (gold has no cap).
    stored = assignment.submit(session, study, b.id, a.id, {"answer": "Yes"}, "gold-late")
    assert stored.is_gold and session.get(Item, a.item_id).n_active == 0


def test_reload_after_expiry_gives_a_new_lease_for_the_same_slot(session, owner):
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0, annotations_per_item=1)
    b = assignment.enter(session, study, "prolific", "reload", "s", "x")
    old = assignment.next_item(session, study, b.id)
    expire_lease(session, old)
    new = assignment.next_item(session, study, b.id)
    session.expire_all()
    assert new.id != old.id and new.slot == old.slot == 0
    assert session.get(Assignment, old.id).state == "expired"
    assert session.get(Item, old.item_id).n_active == 0
    assert session.get(Item, new.item_id).n_active == 1
    assert new.lease_expires_at - new.leased_at == timedelta(seconds=study.lease_seconds)


def test_sweep_returns_only_expired_leases_up_to_its_limit(session, owner):
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, annotations_per_item=1)
    leases = []
    for w in range(3):
        b = assignment.enter(session, study, "prolific", f"sweep-{w}", "s", "x")
        leases.append(assignment.next_item(session, study, b.id))
    expire_lease(session, leases[0])
    expire_lease(session, leases[1])
    assert assignment.sweep_expired(session, limit=1) == 1
    # The next batch of one skips the lease already returned and takes the other.
    assert assignment.sweep_expired(session, limit=1) == 1
    assert assignment.sweep_expired(session) == 0
    session.expire_all()
    assert [session.get(Assignment, a.id).state for a in leases] == ["expired", "expired", "leased"]


def test_enter_is_idempotent_and_refuses_rejected_workers(session, owner):
    admin = make_user(session, "admin")
    # Two HITs of one worker: two bundles (the study allows them; one is the default).
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5, max_bundles_per_worker=2)
    b1 = assignment.enter(session, study, "mturk", "W-enter", "ASG-1", "HIT")
    again = assignment.enter(session, study, "mturk", "W-enter", "ASG-1", "HIT")
    other = assignment.enter(session, study, "mturk", "W-enter", "ASG-2", "HIT")
    assert again.id == b1.id and other.id != b1.id
    assert b1.size == 4 and len(b1.gold_slots) == 2 and again.gold_slots == b1.gold_slots
    assert _count(session, Participant) == 1
    worker = session.get(User, b1.worker_id)
    import hashlib
    import hmac

    from app.config import get_settings

    digest = hmac.new(get_settings().secret_key.encode(), b"mturk:W-enter", hashlib.sha256).hexdigest()
    assert worker.pseudonym == assignment.pseudonym("mturk", "W-enter") == "w-" + digest[:16]
    assert worker.role == "worker" and worker.platform == "mturk" and worker.external_id == "W-enter"
    from app.quality.service import decide

    decide(session, study, [b1.participant_id], "rejected", admin, "spam")
    with refused(assignment.NotAvailable, "Your work on this study has been reviewed and closed."):
        assignment.enter(session, study, "mturk", "W-enter", "ASG-3", "HIT")


# --- progress -------------------------------------------------------------------------------


def test_progress_counts_what_the_researcher_watches(session, owner):
    # Bugs caught: counting gold or excluded answers, counting expired leases as in flight,
    # counting another study's leases or answers, a wrong target or fraction, a wrong
    # per-worker count or order.
    admin = make_user(session, "admin")
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.34, annotations_per_item=2)
    n_items = _count(session, Item, Item.study_id == study.id, Item.is_gold.is_(False))
    empty = assignment.progress(session, study)
    assert empty == {
        "items": n_items,
        "target": 2 * n_items,
        "completed": 0,
        "in_flight": 0,
        "fraction": 0.0,
        "people_sample": None,
        "workers": [],
    }

    # Name the workers so that their pseudonyms sort the opposite way to their answer counts:
    # the per-worker list must then be ordered by the count, not by whatever the database
    # happens to return first.
    ids = sorted((f"p-{i}" for i in range(4)), key=lambda e: assignment.pseudonym("prolific", e))
    gone, some, bad, busy = ids  # 0, 1, 2 and 3 answers

    counted = 0  # answers on non-gold items by workers still in the study
    b_busy = assignment.enter(session, study, "prolific", busy, "s", "x")
    for _ in range(3):
        a, _ = _answer(session, study, b_busy.id, prefix="busy")
        counted += not a.is_gold
    assert counted == 2  # one of the three slots is gold
    b_some = assignment.enter(session, study, "prolific", some, "s", "x")
    a, _ = _answer(session, study, b_some.id, prefix="some")
    counted += not a.is_gold
    assignment.next_item(session, study, b_some.id)  # in flight
    b_gone = assignment.enter(session, study, "prolific", gone, "s", "x")
    expire_lease(session, assignment.next_item(session, study, b_gone.id))  # expired, not in flight
    b_bad = assignment.enter(session, study, "prolific", bad, "s", "x")
    _answer(session, study, b_bad.id, prefix="bad")
    _answer(session, study, b_bad.id, prefix="bad")
    from app.quality.service import decide

    decide(session, study, [b_bad.participant_id], "rejected", admin, "random")

    # Work in another study counts nowhere here: two more leases in flight there, and the
    # busiest worker's answers there too.
    other = create_tom_study(session, owner, title="Other", bundle_size=2, gold_rate=0.0)
    for who in (busy, "elsewhere"):
        elsewhere = assignment.enter(session, other, "prolific", who, "s", "x")
        _answer(session, other, elsewhere.id, prefix=f"else-{who}")
        assignment.next_item(session, other, elsewhere.id)

    p = assignment.progress(session, study)
    assert p["items"] == n_items and p["target"] == 2 * n_items
    assert p["completed"] == counted  # gold answers and the rejected worker's are left out
    assert p["in_flight"] == 1
    assert p["fraction"] == pytest.approx(counted / (2 * n_items))
    name = {e: assignment.pseudonym("prolific", e) for e in ids}
    assert p["workers"] == [
        {"worker": name[busy], "status": "pending", "annotations": 3},
        {"worker": name[bad], "status": "rejected", "annotations": 2},
        {"worker": name[some], "status": "pending", "annotations": 1},
        {"worker": name[gone], "status": "pending", "annotations": 0},
    ]


def test_progress_of_a_study_with_only_gold_items_is_zero_of_zero(session, owner):
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    session.execute(update(Item).where(Item.study_id == study.id).values(is_gold=True))
    session.commit()
    p = assignment.progress(session, study)
    assert (p["items"], p["target"], p["completed"], p["fraction"]) == (0, 0, 0, 0.0)


# --- retries --------------------------------------------------------------------------------


def test_races_are_retried_a_bounded_number_of_times_and_other_errors_are_not(session):
    # Lost races (a unique key taken, a deadlock) surface as IntegrityError/OperationalError:
    # the engine rolls back and runs the whole step again, at most five times in all.
    from sqlalchemy.exc import IntegrityError, OperationalError

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("SELECT 1", {}, Exception("deadlock detected"))
        return "stored"

    assert assignment._retrying(flaky, session) == "stored" and len(calls) == 3

    calls.clear()

    def always_taken():
        calls.append(1)
        raise IntegrityError("INSERT", {}, Exception("duplicate key"))

    with pytest.raises(IntegrityError):
        assignment._retrying(always_taken, session)
    assert len(calls) == 5

    calls.clear()

    def refused():
        calls.append(1)
        raise assignment.NotAvailable("no")

    with pytest.raises(assignment.NotAvailable):
        assignment._retrying(refused, session)
    assert len(calls) == 1


# --- PostgreSQL row locks -------------------------------------------------------------------


@pytest.fixture
def held_row(db_url):
    """Another transaction holding a row lock (a request in the middle of its work), on its own
    connection; the engine's session gives up waiting after 3 s instead of hanging."""
    from sqlalchemy import create_engine, text

    other = create_engine(db_url).connect()
    txn = other.begin()

    def hold(table, row_id):
        other.execute(text(f"SELECT id FROM {table} WHERE id = :id FOR UPDATE"), {"id": row_id})

    yield hold
    txn.rollback()
    other.close()


def _lock_timeout(session):
    from sqlalchemy import text

    session.execute(text("SET lock_timeout = '3s'"))
    session.commit()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_worker_is_never_held_up_by_an_item_another_request_has_locked(session, owner, held_row):
    # Bug caught: the pick without SKIP LOCKED (every worker queues behind the one item row
    # another request holds, and with LIMIT 1 may even be told there is no work).
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, annotations_per_item=3)
    first = session.scalar(
        select(Item.id)
        .where(Item.study_id == study.id, Item.is_gold.is_(False))
        .order_by(Item.position.desc())
        .limit(1)
    )
    held_row("items", first)
    _lock_timeout(session)
    b = assignment.enter(session, study, "prolific", "not-held-up", "s", "x")
    a = assignment.next_item(session, study, b.id)
    assert a is not None and a.item_id != first


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_the_sweeper_skips_a_lease_another_request_has_locked(session, owner, held_row):
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0)
    leases = []
    for w in range(2):
        b = assignment.enter(session, study, "prolific", f"locked-{w}", "s", "x")
        leases.append(assignment.next_item(session, study, b.id))
        expire_lease(session, leases[-1])
    held_row("assignments", leases[0].id)
    _lock_timeout(session)
    assert assignment.sweep_expired(session) == 1
    session.expire_all()
    assert session.get(Assignment, leases[1].id).state == "expired"
