"""Protocol 1's quality control on the platform, on SQLite and PostgreSQL: a navigation task is
6 following sessions, one of them a QC episode shared by every task; a worker who ends the QC
episode within 3 m of its goal is approved automatically when the task ends (with an audit
entry and no actor), one who stops farther is left pending and flagged for the admin, and an
admin's decision is never overridden."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import func, select

from app import audit
from app.auth.models import User
from app.errors import InputError
from app.kinds.navigation.environments import get_graph, import_house
from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths, to_r2r
from app.quality import service as quality
from app.studies import assignment, services
from app.studies.models import Assignment, Bundle, Item, Participant, Study
from tests.conftest import login, make_user

_HOUSE = {}


def house():
    if "h" not in _HOUSE:
        _HOUSE["h"] = generate_house(3)
    return _HOUSE["h"]


def r2r_file(n_paths: int = 8) -> bytes:
    h = house()
    paths = sample_paths(h, n_paths, rng=21)
    texts = [describe_path(h, p, rng=300 + k, n=3) for k, p in enumerate(paths)]
    return json.dumps(to_r2r(h, paths, texts, first_path_id=700)).encode()


def coop_file(n: int = 6) -> bytes:
    """Key "0" is the human-written QC episode, then one generated instruction per path."""
    h = house()
    data = {}
    for k, p in enumerate(sample_paths(h, n + 1, rng=5)):
        data[str(k if k == 0 else 100 + k)] = {
            "generated_instr": describe_path(h, p, rng=k, n=1)[0],
            "distance": p.distance,
            "scan": h.scan,
            "path": list(p.path),
            "heading": p.heading,
            "instr_id": f"{60 + k}_0",
            "instructions": describe_path(h, p, rng=50 + k, n=2),
            "path_id": 60 + k,
            "model": "toy",
        }
    return json.dumps(data).encode()


QC = "700_1"  # the second instruction of the first path


def qc_study(session, owner, **settings) -> Study:
    import_house(session, house())
    study = services.create_study(
        session,
        owner,
        "navigation",
        services.StudySettings(title="QC study", **settings),
        r2r_file(),
        "r2r",
        {"qc_instruction": QC},
    )
    services.set_state(session, study, "live", owner)
    return study


def run_task(session, study, worker: str, qc_path, until=None) -> Bundle:
    """A worker follows every regular instruction exactly and walks `qc_path(reference)` on the
    QC episode; `until(assignment)` true stops them after that session."""
    bundle = assignment.enter(session, study, "prolific", worker)
    while True:
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            break
        item = session.get(Item, a.item_id)
        ref = item.reference["path"]
        path = qc_path(ref) if item.is_gold else ref
        assignment.submit(session, study, bundle.id, a.id, {"path": path, "trace": [], "rating": 3}, uuid.uuid4().hex)
        if until is not None and until(a):
            break
    session.expire_all()
    return session.get(Bundle, bundle.id)


def participant_of(session, study, worker: str) -> Participant:
    session.expire_all()
    return session.scalar(
        select(Participant)
        .join(User, User.id == Participant.worker_id)
        .where(Participant.study_id == study.id, User.external_id == worker)
    )


def qc_reference(session, study) -> list[str]:
    return session.scalar(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(True))).reference["path"]


def system_approvals(session, participant: Participant) -> list[audit.AuditEntry]:
    return session.scalars(
        select(audit.AuditEntry).where(
            audit.AuditEntry.target_type == "participant",
            audit.AuditEntry.target_id == str(participant.id),
            audit.AuditEntry.actor_id.is_(None),
        )
    ).all()


def test_qc_episode_option_and_the_task_design(session):
    owner = make_user(session, "researcher")
    import_house(session, house())
    data = r2r_file()
    raw = json.loads(data)
    study = services.create_study(
        session, owner, "navigation", services.StudySettings(title="x"), data, "r2r", {"qc_instruction": QC}
    )
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    gold = [i for i in items if i.is_gold]
    assert [g.external_id for g in gold] == [QC]
    assert gold[0].payload["instruction"] == raw[0]["instructions"][1]
    assert gold[0].reference == {"path": raw[0]["path"]}
    # The QC path's other instructions are nobody's regular item; every other one is.
    assert {i.external_id for i in items} == {QC} | {
        f"{r['path_id']}_{k}" for r in raw[1:] for k in range(len(r["instructions"]))
    }
    # The design: tasks of 6 with one QC slot.
    assert study.bundle_size == 6 and round(study.bundle_size * study.gold_rate) == 1

    # Another bundle size keeps one QC slot; a gold rate the researcher sets is kept.
    for size in (2, 3, 10):
        s = services.create_study(
            session,
            owner,
            "navigation",
            services.StudySettings(title="x", bundle_size=size),
            data,
            "r2r",
            {"qc_instruction": QC},
        )
        assert s.bundle_size == size and round(size * s.gold_rate) == 1
    s = services.create_study(
        session,
        owner,
        "navigation",
        services.StudySettings(title="x", gold_rate=0.0),
        data,
        "r2r",
        {"qc_instruction": QC},
    )
    assert (s.bundle_size, s.gold_rate) == (6, 0.0)
    # Without a QC episode nothing changes: the platform's defaults, no gold.
    plain = services.create_study(session, owner, "navigation", services.StudySettings(title="x"), data, "r2r")
    assert (plain.bundle_size, plain.gold_rate) == (10, 0.1)
    assert not session.scalar(
        select(func.count()).select_from(Item).where(Item.study_id == plain.id, Item.is_gold.is_(True))
    )
    # A coop file brings its own QC episode, and the same design.
    coop = services.create_study(
        session, owner, "navigation", services.StudySettings(title="x"), coop_file(), "coop", {"speaker": "toy"}
    )
    assert coop.bundle_size == 6 and round(6 * coop.gold_rate) == 1

    # An id the upload lacks is refused, naming the field, and nothing is stored.
    n_studies = session.scalar(select(func.count()).select_from(Study))
    for bad in ("700_9", "nope", "7000_1"):
        with pytest.raises(InputError) as e:
            services.create_study(
                session, owner, "navigation", services.StudySettings(title="x"), data, "r2r", {"qc_instruction": bad}
            )
        assert e.value.field == "qc_instruction" and repr(bad) in str(e.value)
    session.rollback()
    assert session.scalar(select(func.count()).select_from(Study)) == n_studies


def test_the_new_study_form_takes_the_qc_episode(session, client):
    owner = make_user(session, "researcher")
    import_house(session, house())
    csrf = login(client, owner)
    form = {
        "csrf_token": csrf,
        "title": "Form QC",
        "kind": "navigation",
        "format": "r2r",
        "navigation.qc_instruction": QC,
        "action": "create",
    }
    r = client.post("/studies/new", data=form, files={"file": ("paths.json", r2r_file())}, follow_redirects=False)
    assert r.status_code == 303, r.text
    study = session.scalar(select(Study).where(Study.title == "Form QC"))
    assert study.bundle_size == 6 and round(6 * study.gold_rate) == 1
    assert session.scalars(select(Item.external_id).where(Item.study_id == study.id, Item.is_gold.is_(True))).all() == [
        QC
    ]
    r = client.post(
        "/studies/new",
        data={**form, "title": "Bad QC", "navigation.qc_instruction": "1_1"},
        files={"file": ("paths.json", r2r_file())},
    )
    assert r.status_code == 422 and "field &#39;navigation.qc_instruction&#39;" in r.text
    assert session.scalar(select(Study).where(Study.title == "Bad QC")) is None


def test_every_task_of_six_holds_the_one_qc_episode(session):
    owner = make_user(session, "researcher")
    study = qc_study(session, owner)
    qc_item = session.scalar(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(True)))
    for w in range(5):
        bundle = run_task(session, study, f"six-{w}", lambda ref: ref)
        rows = session.scalars(
            select(Assignment).where(Assignment.bundle_id == bundle.id).order_by(Assignment.slot)
        ).all()
        assert bundle.size == 6 and bundle.n_done == 6 and bundle.finished_at is not None
        assert [a.slot for a in rows] == list(range(6))
        assert [a.item_id for a in rows if a.is_gold] == [qc_item.id]
        assert sum(session.get(Item, a.item_id).is_gold for a in rows) == 1


def test_reaching_the_qc_goal_approves_and_stopping_far_flags(session, client):
    owner = make_user(session, "researcher")
    study = qc_study(session, owner)
    graph = get_graph(house().scan)
    ref = qc_reference(session, study)
    near_end = graph.distance(ref[-2], ref[-1])
    assert 0 < near_end <= 3.0  # one viewpoint short of the goal is within the 3 m

    # One viewpoint short of the goal: approved automatically when the task ends.
    run_task(session, study, "near", lambda r: r[:-1])
    near = participant_of(session, study, "near")
    reason = f"auto: reached the QC goal ({near_end:.1f} m)"
    assert (near.status, near.reason, near.reviewed_by) == ("approved", reason, None)
    entries = system_approvals(session, near)
    assert len(entries) == 1 and entries[0].action == "worker.approved"
    assert entries[0].detail["reason"] == reason and entries[0].detail["auto"] is True

    # Never leaving the start: pending, with the distance at which they stopped as the flag.
    run_task(session, study, "far", lambda r: r[:1])
    far = participant_of(session, study, "far")
    far_ne = graph.distance(ref[0], ref[-1])
    assert far_ne > 3.0
    assert (far.status, far.reviewed_by) == ("pending", None) and not system_approvals(session, far)
    # Someone who left after one regular session (no QC episode answered).
    mid = run_task(session, study, "mid", lambda r: r, until=lambda a: not a.is_gold)
    assert mid.finished_at is None

    queue = quality.review_queue(session, study)
    by_worker = {session.scalar(select(User.external_id).where(User.pseudonym == w["worker"])): w for w in queue}
    assert by_worker["far"]["flags"][0] == f"QC episode: stopped {far_ne:.1f} m from the goal"
    assert (by_worker["near"]["status"], by_worker["near"]["reason"], by_worker["near"]["auto"]) == (
        "approved",
        reason,
        True,
    )
    assert not any(f.startswith("QC episode") for f in by_worker["near"]["flags"] + by_worker["mid"]["flags"])
    # The flagged pending worker first, then the other pending one, then the approved.
    order = [w["participant_id"] for w in queue]
    assert order == [far.id, participant_of(session, study, "mid").id, near.id]

    # The same through the admin's JSON API and the audit log.
    admin = make_user(session, "admin")
    login(client, admin)
    api = {w["participant_id"]: w for w in client.get(f"/api/v1/studies/{study.id}/review").json()}
    assert api[near.id]["status"] == "approved" and api[near.id]["reason"] == reason
    assert api[far.id]["flags"][0].startswith("QC episode: stopped")
    log = client.get("/api/v1/audit").json()
    auto = [e for e in log if e["target"] == f"participant:{near.id}"]
    assert len(auto) == 1 and auto[0]["actor"] is None and auto[0]["detail"]["reason"] == reason
    assert not [e for e in log if e["target"] == f"participant:{far.id}"]


def n_assignments(session, bundle_id: int) -> int:
    session.expire_all()
    return session.scalar(select(func.count()).select_from(Assignment).where(Assignment.bundle_id == bundle_id))


def worker_with_early_qc(session, study, prefix: str) -> tuple[str, Bundle]:
    """A worker whose task has the QC episode before its last slot."""
    for w in range(20):
        name = f"{prefix}-{w}"
        bundle = assignment.enter(session, study, "prolific", name)
        if bundle.gold_slots and bundle.gold_slots[0] < bundle.size - 1:
            return name, bundle
    pytest.fail("no worker with the QC episode before the last slot")


def test_finishing_early_closes_the_task_and_runs_the_review(session):
    """finish_early (no work left for this worker) closes an unfinished task with what was
    done: finished_at is set, the QC verdict applies (approved when the QC goal was reached,
    pending otherwise), nothing more is leased, and a second call changes nothing."""
    owner = make_user(session, "researcher")
    study = qc_study(session, owner)

    # Reached the QC goal, then no more work: approved automatically, once.
    name, bundle = worker_with_early_qc(session, study, "qc-then-out")
    run_task(session, study, name, lambda r: r, until=lambda a: a.is_gold)
    open_bundle = session.get(Bundle, bundle.id)
    done, taken = open_bundle.n_done, n_assignments(session, bundle.id)
    assert open_bundle.finished_at is None and 1 <= done < 6 and taken == done
    assert participant_of(session, study, name).status == "pending"
    assignment.finish_early(session, bundle.id)
    session.expire_all()
    closed = session.get(Bundle, bundle.id)
    assert closed.finished_at is not None and closed.n_done == done
    p = participant_of(session, study, name)
    assert (p.status, p.reason, p.reviewed_by) == ("approved", "auto: reached the QC goal (0.0 m)", None)
    assert len(system_approvals(session, p)) == 1
    assert assignment.next_item(session, study, bundle.id) is None
    assert n_assignments(session, bundle.id) == taken
    finished = closed.finished_at
    assignment.finish_early(session, bundle.id)  # the done page reloaded
    session.expire_all()
    assert session.get(Bundle, bundle.id).finished_at == finished
    assert len(system_approvals(session, participant_of(session, study, name))) == 1

    # One regular session, no QC episode: closed, but left pending for the admin. (A worker
    # whose first slot is not the QC episode's: which slots are gold is drawn per worker.)
    name = next(
        n
        for n in (f"one-and-out-{w}" for w in range(20))
        if 0 not in assignment.enter(session, study, "prolific", n).gold_slots
    )
    bundle = run_task(session, study, name, lambda r: r, until=lambda a: not a.is_gold)
    assert bundle.finished_at is None and bundle.n_done == 1
    assignment.finish_early(session, bundle.id)
    session.expire_all()
    assert session.get(Bundle, bundle.id).finished_at is not None
    p = participant_of(session, study, name)
    assert (p.status, p.reason, p.reviewed_by) == ("pending", "", None)
    assert not system_approvals(session, p)
    assert assignment.next_item(session, study, bundle.id) is None
    assert n_assignments(session, bundle.id) == 1


def test_a_repeated_last_answer_approves_once(session):
    owner = make_user(session, "researcher")
    study = qc_study(session, owner)
    bundle = assignment.enter(session, study, "prolific", "twice")
    last = None
    while (a := assignment.next_item(session, study, bundle.id)) is not None:
        item = session.get(Item, a.item_id)
        last = (a.id, {"path": item.reference["path"], "trace": [], "rating": 4}, uuid.uuid4().hex)
        first = assignment.submit(session, study, bundle.id, *last)
    again = assignment.submit(session, study, bundle.id, *last)  # the last answer, sent twice
    assert again.id == first.id
    session.expire_all()
    finished = session.get(Bundle, bundle.id).finished_at
    assert finished is not None
    assignment.finish_early(session, bundle.id)  # a reload of the done page
    p = participant_of(session, study, "twice")
    assert p.status == "approved" and p.reason == "auto: reached the QC goal (0.0 m)"
    assert len(system_approvals(session, p)) == 1
    done = session.get(Bundle, bundle.id)
    assert (done.finished_at, done.n_done) == (finished, 6)  # closed once, not again
    assert assignment.next_item(session, study, bundle.id) is None
    assert n_assignments(session, bundle.id) == 6


def test_an_admin_decision_is_never_overridden(session):
    owner = make_user(session, "researcher")
    admin = make_user(session, "admin")
    study = qc_study(session, owner)

    # Approved by hand before the task ends, then the QC episode fails: still the admin's.
    bundle = assignment.enter(session, study, "prolific", "hand")
    p = participant_of(session, study, "hand")
    assert quality.decide(session, study, [p.id], "approved", admin, reason="checked by hand") == 1
    run_task(session, study, "hand", lambda r: r[:1])
    p = participant_of(session, study, "hand")
    assert (p.status, p.reason, p.reviewed_by) == ("approved", "checked by hand", admin.id)
    assert not system_approvals(session, p)
    assert session.get(Bundle, bundle.id).finished_at is not None

    # Rejected after reaching the QC goal, before the task ends; the task is then closed with
    # what was done (no work left): the rejection stands.
    name, bundle = worker_with_early_qc(session, study, "early-qc")
    run_task(session, study, name, lambda r: r, until=lambda a: a.is_gold)
    p = participant_of(session, study, name)
    assert p.status == "pending" and quality.kind_verdict(session, study, p)[0] == "approved"
    assert quality.decide(session, study, [p.id], "rejected", admin, reason="copied answers") == 1
    leased = n_assignments(session, bundle.id)
    assert session.get(Bundle, bundle.id).finished_at is None
    assignment.finish_early(session, bundle.id)
    p = participant_of(session, study, name)
    assert (p.status, p.reason, p.reviewed_by) == ("rejected", "copied answers", admin.id)
    assert not system_approvals(session, p)
    closed = session.get(Bundle, bundle.id)
    assert closed.finished_at is not None and closed.n_done < closed.size
    with pytest.raises(assignment.NotAvailable, match="reviewed and closed"):
        assignment.next_item(session, study, bundle.id)
    assert n_assignments(session, bundle.id) == leased

    # An automatic approval is not final: an admin may still reject.
    run_task(session, study, "auto-then-rejected", lambda r: r)
    p = participant_of(session, study, "auto-then-rejected")
    assert p.status == "approved" and p.reviewed_by is None
    assert quality.decide(session, study, [p.id], "rejected", admin, reason="found later") == 1
    p = participant_of(session, study, "auto-then-rejected")
    assert (p.status, p.reviewed_by) == ("rejected", admin.id)
