"""PostgreSQL: bulk writers of the leaderboard totals meeting the crowd, or each other, in the
interleavings that used to go wrong, forced by holding a lock and letting go once the others
wait (pg_stat_activity): a rejection while its worker asks for more work and answers it, and
two Hexagons re-scores of the same item, or of items answered by the same executors."""

from __future__ import annotations

import json
import math
import uuid

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session as OrmSession

from app.auth.models import User
from app.quality.service import decide
from app.studies import assignment, hotpath, services
from app.studies.models import Annotation, Assignment, Item, Participant, Study
from tests.conftest import make_user
from tests.integration.test_crowd_integrity import tiny_study
from tests.integration.test_leaderboard_totals import _in_thread, _wait_until_waiting, check, item_summaries, table_rows


def _pg_only(db_url):
    if not hotpath.enabled(db_url):
        pytest.skip("row locks and the hot path are PostgreSQL's (SQLite has one writer at a time)")


def _crowd_worker(db_url, study, name: str, n: int):
    """A worker entered and consented by the hot path: (bundle id, browser hash)."""
    info = hotpath.study(db_url, study.slug)
    browser = assignment.browser_hash(name * 32)
    entered = hotpath.enter(
        db_url, info, "prolific", name, f"hit-{name}", "st", browser, assignment.address_pseudonym(f"10.0.0.{n}")
    )
    assert entered is not None
    assert hotpath.consent(db_url, info, entered.bundle_id, info.consent_version, browser)
    return entered.bundle_id, browser


@pytest.mark.parametrize("path", ["hot", "engine"])
def test_a_rejection_while_its_worker_takes_and_answers_another_item(db_url, session, path):
    """An admin rejects worker W while W's next request and answer arrive, and another worker's
    answer to one of W's items too. The rejection is held at its last statement (excluding
    W's answers) by another transaction. W used to get a new item meanwhile (the rejection
    had already looked up W's leases) and the answer to it was stored and counted: a rejected
    worker's answer in the leaderboard, and its item's capacity never given back. Now W's
    request waits for the rejection and is told their work is closed; the other answer is
    counted; the totals equal a recount. By the hot path's statements and by the engine's."""
    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 6, bundle_size=4, annotations_per_item=3)
    session.commit()
    conf = hotpath.study(db_url, study.slug)
    w_bundle, w_browser = _crowd_worker(db_url, study, "w", 1)
    answered = []
    for k in range(2):
        lease = hotpath.next_lease(db_url, conf, w_bundle, w_browser)
        assert (
            hotpath.submit(db_url, conf, w_bundle, lease.assignment_id, {"answer": "Yes"}, f"w{k}", {}, w_browser)
            is not None
        )
        answered.append(lease.item_id)
    x_bundle, x_browser = _crowd_worker(db_url, study, "x", 2)
    x_lease = hotpath.next_lease(db_url, conf, x_bundle, x_browser)
    assert x_lease.item_id in answered  # depth first: an item W answered
    w_id = session.scalar(select(User.id).where(User.external_id == "w"))
    pid = session.scalar(select(Participant.id).where(Participant.worker_id == w_id))

    holder = OrmSession(bind=session.get_bind())
    holder.execute(
        text("SELECT 1 FROM annotations WHERE worker_id = :w AND item_id = :i FOR UPDATE"),
        {"w": w_id, "i": answered[0]},
    )

    def reject():
        with OrmSession(bind=session.get_bind()) as s:
            decide(s, s.get(Study, study.id), [pid], "rejected", s.get(User, owner.id), "bot")

    told = {}

    def w_goes_on():
        if path == "hot":
            lease = hotpath.next_lease(db_url, conf, w_bundle, w_browser)
            if lease is not None:
                told["stored"] = hotpath.submit(
                    db_url, conf, w_bundle, lease.assignment_id, {"answer": "No"}, "w-late", {}, w_browser
                )
                return
        with OrmSession(bind=session.get_bind()) as s:  # the engine's path (the hot path's fallback)
            try:
                lease = assignment.next_item(s, s.get(Study, study.id), w_bundle)
                told["stored"] = assignment.submit(
                    s, s.get(Study, study.id), w_bundle, lease.id, {"answer": "No"}, "w-late"
                ).id
            except assignment.NotAvailable as exc:
                told["refused"] = str(exc)

    def x_answers():
        if path == "hot":
            told["x"] = hotpath.submit(
                db_url, conf, x_bundle, x_lease.assignment_id, {"answer": "No"}, "x0", {}, x_browser
            )
            return
        with OrmSession(bind=session.get_bind()) as s:
            told["x"] = assignment.submit(
                s, s.get(Study, study.id), x_bundle, x_lease.assignment_id, {"answer": "No"}, "x0"
            ).id

    rejection, r_out = _in_thread(reject)
    _wait_until_waiting(session, 1)  # the rejection waits for the held answer
    worker, w_out = _in_thread(w_goes_on)
    _wait_until_waiting(session, 2)
    other, x_out = _in_thread(x_answers)
    _wait_until_waiting(session, 3)  # X's answer waits for the rejection's lock of its item
    holder.rollback()
    holder.close()
    for t in (rejection, worker, other):
        t.join(30)
        assert not t.is_alive()
    assert (r_out["error"], w_out["error"], x_out["error"]) == (None, None, None)

    assert "stored" not in told, "the rejected worker's answer was stored"
    assert told["refused"] == "Your work on this study has been reviewed and closed."
    assert told["x"] is not None
    session.expire_all()
    assert session.scalars(select(Annotation.excluded).where(Annotation.worker_id == w_id)).all() == [True, True]
    assert (
        session.scalar(
            select(func.count())
            .select_from(Assignment)
            .where(Assignment.worker_id == w_id, Assignment.state.in_(("leased", "completed")))
        )
        == 0
    )
    # Every item's capacity in use is its live leases and answers that count.
    in_use = dict(
        session.execute(
            select(Assignment.item_id, func.count())
            .where(Assignment.study_id == study.id, Assignment.state.in_(("leased", "completed")))
            .group_by(Assignment.item_id)
        ).all()
    )
    for item_id, n_active in session.execute(select(Item.id, Item.n_active).where(Item.study_id == study.id)):
        assert n_active == in_use.get(item_id, 0), item_id
    board = check(session, study)
    assert [r["answered"] for r in board["rows"] if r["type"] == "annotator"] == [1]


def test_a_rejection_and_the_lease_sweeper_sharing_items_at_once(db_url, session, monkeypatch):
    """The sweeper gives back the capacity of expired leases while a rejection gives back the
    rejected worker's, on the same two items. The sweeper went in lease order (here the later
    item first) and the rejection in item order: each held an item the other waited for, and
    PostgreSQL aborted one (both retry, so with retries off here, one failed). Now both go in
    item order: the second waits for the first, and every item's capacity is right."""
    import functools

    from app.quality import service
    from tests.conftest import expire_lease

    _pg_only(db_url)
    # A deadlock would be retried away: let it show.
    monkeypatch.setattr(assignment, "_retrying", functools.partial(assignment._retrying, attempts=1))
    monkeypatch.setattr(service, "DECIDE_ATTEMPTS", 1)
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 2, bundle_size=2, annotations_per_item=2)
    session.commit()
    w = assignment.enter(session, study, "prolific", "w")
    for k in range(2):
        lease = assignment.next_item(session, study, w.id)
        assignment.submit(session, study, w.id, lease.id, {"answer": "Yes"}, f"w{k}")
    leases = []
    for name in ("y1", "y2"):  # depth first: y1 leases the later item, y2 (once it is full) the other
        bundle = assignment.enter(session, study, "prolific", name)
        leases.append(assignment.next_item(session, study, bundle.id))
    assert leases[0].item_id > leases[1].item_id
    for a in leases:
        expire_lease(session, a)
    pid = session.scalar(select(Participant.id).where(Participant.worker_id == w.worker_id))

    holder = OrmSession(bind=session.get_bind())
    holder.execute(text("SELECT 1 FROM items WHERE id = :i FOR NO KEY UPDATE"), {"i": leases[0].item_id})

    def sweep():
        with OrmSession(bind=session.get_bind()) as s:
            assert assignment.sweep_expired(s) == 2

    def reject():
        with OrmSession(bind=session.get_bind()) as s:
            decide(s, s.get(Study, study.id), [pid], "rejected", s.get(User, owner.id), "bot")

    sweeper, s_out = _in_thread(sweep)
    _wait_until_waiting(session, 1)
    rejection, r_out = _in_thread(reject)
    _wait_until_waiting(session, 2)
    holder.rollback()
    holder.close()
    for t in (sweeper, rejection):
        t.join(30)
        assert not t.is_alive()
    assert (s_out["error"], r_out["error"]) == (None, None)
    session.expire_all()
    assert [n for (n,) in session.execute(select(Item.n_active).where(Item.study_id == study.id))] == [0, 0]
    assert session.scalars(select(Assignment.state).order_by(Assignment.id)).all() == [
        "rejected",
        "rejected",
        "expired",
        "expired",
    ]


def _one_answer(session, owner):
    """A live study of two items and one worker's answer: (study, bundle, lease, participant id)."""
    study = tiny_study(session, owner, 2, bundle_size=2, annotations_per_item=2)
    session.commit()
    w = assignment.enter(session, study, "prolific", "w")
    lease = assignment.next_item(session, study, w.id)
    assignment.submit(session, study, w.id, lease.id, {"answer": "Yes"}, "w0")
    pid = session.scalar(select(Participant.id).where(Participant.worker_id == w.worker_id))
    return study, w, lease, pid


def _deadlocked(session, bundle, lease, reject) -> dict:
    """`reject()` run in a thread into a deadlock with a writer outside the crowd's lock order:
    one holding the answered item, that then wants the worker's bundle. PostgreSQL aborts the
    rejection's try (the other never detects it). Returns the rejection's outcome.

    PostgreSQL looks for a deadlock once per wait, deadlock_timeout after it began: the cycle
    must be closed by then. The rejection's transactions get 5 s rather than 1 s, time enough
    for the other to start waiting on two loaded cores; the other gives up after 30 s, so a
    missed cycle fails the test rather than hanging it."""
    from sqlalchemy import event

    def patient(dbapi_conn, *_):
        dbapi_conn.execute("SET LOCAL deadlock_timeout = '5s'")  # until that transaction ends

    engine = session.get_bind()
    event.listen(engine, "checkout", patient)
    try:
        other = OrmSession(bind=engine)
        other.execute(text("SET LOCAL deadlock_timeout = '10min'"))
        other.execute(text("SET LOCAL lock_timeout = '30s'"))
        other.execute(text("SELECT 1 FROM items WHERE id = :i FOR NO KEY UPDATE"), {"i": lease.item_id})
        rejection, r_out = _in_thread(reject)
        _wait_until_waiting(session, 1)
        then, t_out = _in_thread(
            lambda: other.execute(text("SELECT 1 FROM bundles WHERE id = :b FOR UPDATE"), {"b": bundle.id})
        )
        then.join(60)  # granted once PostgreSQL has aborted the rejection's (first) try
        assert not then.is_alive() and t_out["error"] is None, t_out["error"]
        other.rollback()
        other.close()
        rejection.join(30)
        assert not rejection.is_alive()
    finally:
        event.remove(engine, "checkout", patient)
    return r_out


def test_a_rejection_aborted_by_a_deadlock_is_tried_again(db_url, session):
    """A writer outside the crowd's lock order (here: one holding an item the rejection gives
    capacity back to, that then wants the worker's bundle) deadlocks with a rejection, and
    PostgreSQL aborts the rejection: the whole decision is tried again, and succeeds once the
    other writer is done, rather than failing the admin's request."""
    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study, w, lease, pid = _one_answer(session, owner)

    def reject():
        with OrmSession(bind=session.get_bind()) as s:
            decide(s, s.get(Study, study.id), [pid], "rejected", s.get(User, owner.id), "bot")

    r_out = _deadlocked(session, w, lease, reject)
    assert r_out["error"] is None, r_out["error"]
    session.expire_all()
    assert session.get(Participant, pid).status == "rejected"
    assert session.scalars(select(Annotation.excluded)).all() == [True]
    assert session.scalars(select(Item.n_active).where(Item.id == lease.item_id)).one() == 0


def _executed_in_turn(session, owner):
    """The consolidation tests' two procedures, each executed by workers A and B, in turns
    A, B, B, A: depth first, so A's execution of one procedure is stored before B's and B's of
    the other before A's (a re-score's flush goes in annotation order: A then B on one
    procedure, B then A on the other)."""
    from tests.integration.test_hex_consolidation import EXECUTIONS, procedures_jsonl

    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Re-scores", bundle_size=2, gold_rate=0.0, annotations_per_item=2),
        procedures_jsonl(),
        "procedures",
        {},
    )
    services.set_state(session, study, "live", owner)
    bundles = {who: assignment.enter(session, study, "prolific", f"hex-{who}").id for who in "AB"}
    order = []
    for who in "ABBA":
        lease = assignment.next_item(session, study, bundles[who])
        ext = session.get(Item, lease.item_id).external_id
        response = {"steps": json.dumps([{"board": b, "actions": []} for b in EXECUTIONS[who][ext]])}
        assignment.submit(session, study, bundles[who], lease.id, response, uuid.uuid4().hex)
        order.append((who, ext))
    session.commit()
    assert order in (
        [("A", "1"), ("B", "1"), ("B", "2"), ("A", "2")],
        [("A", "2"), ("B", "2"), ("B", "1"), ("A", "1")],
    ), order
    return study


@pytest.mark.parametrize("overlap", ["one procedure", "shared executors"])
def test_two_hexagons_rescores_at_once(db_url, session, hexagons_kind, overlap):
    """Two admins fix gold boards at once, each fix re-scoring every execution of its
    procedure (app/kinds/hexagons/consolidation.rescore): two steps of one procedure, or one
    step of each of two procedures that the same two executors carried out (one re-score
    meets them A then B, the other B then A). Both are held at the lock they collide on (the
    procedure's row; worker A's totals) and let go together: both complete, neither fix is
    lost, every execution is scored against the final gold boards, and the totals equal a
    recount."""
    from app.kinds.hexagons import consolidation
    from tests.integration.test_hex_consolidation import board

    _pg_only(db_url)
    owner = make_user(session, "researcher")
    admin = make_user(session, "admin")
    study = _executed_in_turn(session, owner)
    items = {i.external_id: i.id for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    fixes = {
        "one procedure": [("2", 1, board(t0=4, t18=4)), ("2", 2, board(t0=4, t18=4, t1=3))],
        "shared executors": [("1", 2, board(t0=4, t1=3)), ("2", 1, board(t0=4, t18=4))],
    }[overlap]

    holder = OrmSession(bind=session.get_bind())
    if overlap == "one procedure":
        holder.execute(text("SELECT 1 FROM items WHERE id = :i FOR NO KEY UPDATE"), {"i": items["2"]})
    else:
        a = session.scalar(select(User.id).where(User.external_id == "hex-A"))
        holder.execute(text("SELECT 1 FROM lb_worker_categories WHERE worker_id = :w FOR UPDATE"), {"w": a})

    def fix(ext, step, gold):
        def run():
            with OrmSession(bind=session.get_bind()) as s:
                consolidation.decide(
                    s, s.get(Study, study.id), items[ext], step, "other", "fixed", gold, s.get(User, admin.id)
                )

        return run

    threads = [_in_thread(fix(*f)) for f in fixes]
    _wait_until_waiting(session, 2)
    holder.rollback()
    holder.close()
    for t, _ in threads:
        t.join(30)
        assert not t.is_alive()
    assert [out["error"] for _, out in threads] == [None, None]

    session.expire_all()
    for ext, step, gold in fixes:
        assert session.get(Item, items[ext]).reference["boards"][step - 1] == gold
    kind = hexagons_kind
    for ann in session.scalars(select(Annotation).where(Annotation.study_id == study.id)):
        item = session.get(Item, ann.item_id)
        assert ann.score == kind.score(item.payload, item.reference, ann.response)
    _recounted(session, study)


def _recounted(session, study) -> None:
    """The kept totals equal a rebuild, and the leaderboard from them the one counted from the
    raw annotations, to 12 digits: Hexagons scores are not dyadic, and a re-score moves a
    running sum by (new - old), so the last bit may differ from a sum taken afresh (the totals
    tests use dyadic scores to compare every bit)."""
    from app.leaderboards.service import compute, recompute_from_annotations
    from app.leaderboards.totals import rebuild

    def close(a, b, where="board"):
        if isinstance(a, float) and isinstance(b, float):
            assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)), where
        elif isinstance(a, dict):
            assert isinstance(b, dict) and set(a) == set(b), where
            for k in a:
                close(a[k], b[k], f"{where}.{k}")
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                close(x, y, f"{where}[{i}]")
        else:
            assert a == b, f"{where}: {a!r} != {b!r}"

    session.expire_all()
    kept = table_rows(session, study.id)
    summaries = [(i, p, round(x, 9)) for i, p, x in item_summaries(session, study.id)]
    rebuild(session.connection(), study.id)
    assert table_rows(session, study.id) == kept
    assert [(i, p, round(x, 9)) for i, p, x in item_summaries(session, study.id)] == summaries
    session.rollback()
    board = compute(session, study)
    session.commit()
    close(board, recompute_from_annotations(session, study))
    session.commit()


def test_a_rejection_still_aborted_after_its_tries_is_a_503_that_says_busy(db_url, session, client, monkeypatch):
    """The same deadlock with one try: the admin is told the database is busy and to retry
    (503, Retry-After), not that it cannot be reached, and nothing of the rejection is stored."""
    from app.quality import service
    from tests.conftest import login

    _pg_only(db_url)
    monkeypatch.setattr(service, "DECIDE_ATTEMPTS", 1)
    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    study, w, lease, pid = _one_answer(session, owner)
    hdr = {"X-CSRF-Token": login(client, admin)}
    r_out = _deadlocked(
        session,
        w,
        lease,
        lambda: client.post(
            f"/api/v1/studies/{study.id}/review",
            headers=hdr,
            json={"participant_ids": [pid], "decision": "reject", "reason": "bot"},
        ),
    )
    assert r_out["error"] is None, r_out["error"]
    r = r_out["result"]
    assert r.status_code == 503 and r.headers["Retry-After"], r.text
    assert "busy" in r.json()["detail"] and "cannot be reached" not in r.json()["detail"]
    session.expire_all()
    assert session.get(Participant, pid).status != "rejected"
    assert session.scalars(select(Annotation.excluded)).all() == [False]


def test_a_lease_the_sweeper_expires_during_a_rejection_gives_its_capacity_back_once(db_url, session):
    """The rejection looked up the worker's live lease, then the sweeper expired it (giving its
    item's capacity back) before the rejection's update reached the row, which then skipped it:
    the rejection still gave the same capacity back, and the item's count went below its live
    leases and answers (one answer more than its redundancy could come in). It now gives back
    only what its update moved."""
    from tests.conftest import expire_lease

    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 3, bundle_size=3, annotations_per_item=2)
    session.commit()
    w = assignment.enter(session, study, "prolific", "w")
    answered = assignment.next_item(session, study, w.id)
    assignment.submit(session, study, w.id, answered.id, {"answer": "Yes"}, "w0")
    lease = assignment.next_item(session, study, w.id)
    expire_lease(session, lease)
    session.commit()
    pid = session.scalar(select(Participant.id).where(Participant.worker_id == w.worker_id))

    holder = OrmSession(bind=session.get_bind())  # the sweeper's transaction, reaching the lease first
    holder.execute(text("SELECT 1 FROM assignments WHERE id = :a FOR UPDATE"), {"a": lease.id})

    def reject():
        with OrmSession(bind=session.get_bind()) as s:
            decide(s, s.get(Study, study.id), [pid], "rejected", s.get(User, owner.id), "bot")

    rejection, r_out = _in_thread(reject)
    _wait_until_waiting(session, 1)  # its update of the worker's assignments waits for the lease
    assert assignment.sweep_expired(holder) == 1  # expires it, gives its capacity back, commits
    holder.close()
    rejection.join(30)
    assert not rejection.is_alive() and r_out["error"] is None, r_out["error"]
    session.expire_all()
    assert session.get(Assignment, lease.id).state == "expired"
    assert session.get(Assignment, answered.id).state == "rejected"
    assert {i: n for i, n in session.execute(select(Item.id, Item.n_active).where(Item.study_id == study.id))} == {
        i: 0 for i in session.scalars(select(Item.id).where(Item.study_id == study.id))
    }
