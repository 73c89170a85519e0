"""The leaderboard against a plain recomputation from the raw rows, and what a rejection does."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

import pytest
from sqlalchemy import select

from app.agents.models import AgentOutput
from app.auth.models import User
from app.kinds.tom.demo import simulate_worker
from app.errors import InputError
from app.leaderboards.service import compute
from app.quality import service as quality
from app.studies import services
from app.studies.models import Annotation, Item, Participant
from tests.conftest import create_tom_study, make_user


@pytest.fixture
def populated(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=40, gold_rate=0.1, annotations_per_item=3)
    items = session.execute(
        select(Item.external_id, Item.reference, Item.category).where(Item.study_id == study.id)
    ).all()
    lines = [
        json.dumps(
            {"question_id": ext, "answer": ref["answer"] if i % 4 else ("No" if ref["answer"] == "Yes" else "Yes")}
        )
        for i, (ext, ref, _) in enumerate(items)
        if i % 10
    ]  # 10% unanswered
    agent = services.register_agent(session, owner, "tom", "three-quarters")
    services.import_agent_outputs(session, study, agent, "\n".join(lines).encode())
    for w, acc in enumerate((0.95, 0.8, 0.7, 0.9, 0.6)):
        simulate_worker(session, study, f"sim-{w}", acc, seed=w)
    return study, owner, agent


def recompute(session, study):
    """Straight from rows, in Python: the reference the SQL aggregation must match."""
    items = {i.id: i for i in session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False)))}
    anns = [
        a
        for a in session.scalars(select(Annotation).where(Annotation.study_id == study.id).order_by(Annotation.id))
        if not a.is_gold and not a.excluded
    ]
    by_item = defaultdict(list)
    for a in anns:
        by_item[a.item_id].append(a)
    majority = {}
    for iid, rows in by_item.items():
        votes = Counter(a.response["answer"] for a in rows)
        top = max(votes.values())
        winners = {v for v, n in votes.items() if n == top}
        pick = rows[0].response["answer"] if len(winners) > 1 else winners.pop()
        majority[iid] = pick == items[iid].reference["answer"]
    by_worker = defaultdict(list)
    for a in anns:
        by_worker[a.worker_id].append(a.response["answer"] == items[a.item_id].reference["answer"])
    outputs = {o.item_id: o.response["answer"] for o in session.scalars(select(AgentOutput))}
    agent_right = [outputs.get(iid) == it.reference["answer"] for iid, it in items.items()]
    clusters = defaultdict(list)
    for iid, it in items.items():
        clusters[it.cluster].append(outputs.get(iid) == it.reference["answer"])
    return {
        "majority": (sum(majority.values()), len(majority)),
        "workers": {w: (sum(v), len(v)) for w, v in by_worker.items()},
        "agent": (sum(agent_right), len(agent_right)),
        "agent_consistency": (sum(all(v) for v in clusters.values()), len(clusters)),
    }


def test_leaderboard_matches_recomputation(session, populated):
    study, _, _ = populated
    board = compute(session, study)
    ref = recompute(session, study)
    rows = {r["type"]: r for r in board["rows"] if r["type"] != "annotator"}
    k, n = ref["agent"]
    assert rows["agent"]["accuracy"]["n"] == n
    assert rows["agent"]["accuracy"]["mean"] == pytest.approx(k / n)
    k, n = ref["agent_consistency"]
    assert rows["agent"]["consistency"]["mean"] == pytest.approx(k / n)
    k, n = ref["majority"]
    assert rows["majority"]["accuracy"]["mean"] == pytest.approx(k / n)
    names = dict(session.execute(select(User.id, User.pseudonym)).all())
    annot = {r["name"]: r for r in board["rows"] if r["type"] == "annotator"}
    for wid, (k, n) in ref["workers"].items():
        assert annot[names[wid]]["accuracy"]["mean"] == pytest.approx(k / n)
        assert annot[names[wid]]["answered"] == n
    lo, hi = rows["agent"]["accuracy"]["low"], rows["agent"]["accuracy"]["high"]
    assert lo < rows["agent"]["accuracy"]["mean"] < hi
    assert set(board["categories"]) == {"1", "2", "3"}
    # The random baseline answers Yes at the upload's Yes rate p (every question, gold
    # included); it is scored on the non-gold items: right with probability p on a Yes item
    # and 1 - p on a No item, so its expected accuracy is the mean of those, and its 95%
    # interval the normal one for a sum of independent Bernoullis (each of variance p(1-p)).
    base = rows["baseline"]
    refs = session.execute(select(Item.is_gold, Item.reference).where(Item.study_id == study.id)).all()
    p = sum(r["answer"] == "Yes" for _, r in refs) / len(refs)
    assert study.kind_settings["random_yes_rate"] == pytest.approx(p, abs=1e-12)
    scored = [r["answer"] for gold, r in refs if not gold]
    expected = sum(p if a == "Yes" else 1 - p for a in scored) / len(scored)
    half = 1.959963984540054 * math.sqrt(len(scored) * p * (1 - p)) / len(scored)
    assert base["name"] == f"Random baseline (Yes rate {p:.2f}, this study's items)"
    assert base["accuracy"]["n"] == base["answered"] == len(scored) == ref["agent"][1]
    assert base["accuracy"]["mean"] == pytest.approx(expected, abs=1e-12)
    assert base["accuracy"]["low"] == pytest.approx(expected - half, abs=1e-12)
    assert base["accuracy"]["high"] == pytest.approx(expected + half, abs=1e-12)
    assert board["agreement"]["items_with_2plus"] > 0
    assert not math.isnan(board["agreement"]["krippendorff_alpha"])


def test_rejecting_a_worker_drops_their_answers_and_frees_their_items(session, populated):
    study, owner, _ = populated
    admin = make_user(session, "admin")
    worst = session.scalar(
        select(Participant).join(User, User.id == Participant.worker_id).where(User.external_id == "sim-4")
    )
    mine = set(
        session.scalars(
            select(Annotation.item_id).where(Annotation.worker_id == worst.worker_id, Annotation.is_gold.is_(False))
        )
    )
    before = {i: session.get(Item, i).n_active for i in mine}
    pseud = session.get(User, worst.worker_id).pseudonym
    assert pseud in {r["name"] for r in compute(session, study)["rows"]}
    for blank in ("", "   "):  # a reason is needed, and whitespace is none
        with pytest.raises(InputError) as refused:
            quality.decide(session, study, [worst.id], "rejected", admin, reason=blank)
        assert refused.value.field == "reason"
        assert str(refused.value) == "field 'reason': a rejection needs a reason (the worker is told it)"
    session.expire_all()
    assert session.get(Participant, worst.id).status == "pending"  # nothing changed
    assert {i: session.get(Item, i).n_active for i in mine} == before
    assert quality.decide(session, study, [worst.id], "rejected", admin, reason="random answers") == 1
    board = compute(session, study)
    assert pseud not in {r["name"] for r in board["rows"]}
    ref = recompute(session, study)
    maj = next(r for r in board["rows"] if r["type"] == "majority")
    assert maj["accuracy"]["mean"] == pytest.approx(ref["majority"][0] / ref["majority"][1])
    for i in mine:
        assert session.get(Item, i).n_active == before[i] - 1
    # The freed capacity goes to the next worker.
    got = simulate_worker(session, study, "newcomer", 0.9, seed=7)
    assert got > 0
    queue = {w["worker"]: w for w in quality.review_queue(session, study)}
    assert queue[pseud]["status"] == "rejected"


def test_review_queue_median_and_flags(session, populated):
    study, _, _ = populated
    from statistics import median

    queue = quality.review_queue(session, study)
    for w in queue:
        wid = session.scalar(select(User.id).where(User.pseudonym == w["worker"]))
        ms = session.scalars(
            select(Annotation.duration_ms).where(Annotation.worker_id == wid, Annotation.study_id == study.id)
        ).all()
        assert w["median_seconds"] == pytest.approx(median(ms) / 1000.0)
    simulate_worker(session, study, "yes-clicker", 0.0, seed=3, always="Yes")
    flagged = {w["worker"]: w["flags"] for w in quality.review_queue(session, study)}
    clicker = session.scalar(select(User.pseudonym).where(User.external_id == "yes-clicker"))
    assert any("same answer" in f for f in flagged[clicker])


def test_a_second_annotator_with_the_same_answers_narrows_no_interval(session, populated):
    """Every row of the generic leaderboard holds at most one answer per item (an agent's
    output, one annotator's answer, the per-item majority), so its Wilson intervals are over
    items already: a twin of every annotator, answering every item as they did, leaves the
    agent's and the majority's estimates as they were and gives each twin its original's."""
    import uuid

    from app.studies.models import Assignment

    study, _, _ = populated
    before = compute(session, study)
    anns = session.scalars(select(Annotation).where(Annotation.study_id == study.id).order_by(Annotation.id)).all()
    twins: dict[int, User] = {}
    for a in anns:
        if a.worker_id not in twins:
            twin = make_user(session, "worker")
            twin.pseudonym = f"twin-{a.worker_id}"
            twins[a.worker_id] = twin
            session.flush()
        orig = session.get(Assignment, a.assignment_id)
        copy = Assignment(
            study_id=study.id,
            item_id=a.item_id,
            worker_id=twins[a.worker_id].id,
            bundle_id=orig.bundle_id,
            exclusion_group=orig.exclusion_group,
            slot=orig.slot,
            is_gold=orig.is_gold,
            state="completed",
            lease_expires_at=orig.lease_expires_at,
        )
        session.add(copy)
        session.flush()
        session.add(
            Annotation(
                assignment_id=copy.id,
                study_id=study.id,
                item_id=a.item_id,
                worker_id=copy.worker_id,
                is_gold=a.is_gold,
                response=dict(a.response),
                score=a.score,
                scores=a.scores,
                idempotency_key=uuid.uuid4().hex,
            )
        )
    session.flush()
    after = compute(session, study)
    names = dict(session.execute(select(User.id, User.pseudonym)).all())
    rows_before = {r["name"]: r for r in before["rows"]}
    rows_after = {r["name"]: r for r in after["rows"]}
    assert len(rows_after) == len(rows_before) + len(twins)
    for name, row in rows_before.items():
        assert rows_after[name] == row, name  # agent, majority, baseline, each annotator
    for wid in twins:
        twin_row = dict(rows_after[f"twin-{wid}"], name=None)
        assert twin_row == dict(rows_before[names[wid]], name=None)
    maj = rows_after["Human majority (per item)"]
    assert maj["accuracy"]["n"] == maj["answered"] == rows_before["Human majority (per item)"]["answered"]


def test_a_cancelled_export_stops_and_says_so(session, client):
    """Any kind's job is cancelled through one route; the export handler stops at its next
    check, and a job that has ended cannot be cancelled."""
    from app import jobs
    from tests.conftest import create_tom_study, login, make_user

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Cancel export")
    csrf = login(client, owner)
    job = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    session.commit()
    r = client.post(f"/api/v1/jobs/{job.id}/cancel", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert jobs.run_job(job.id) == "skipped"  # a cancelled job is never claimed
    session.refresh(job)
    assert job.state == "cancelled" and "cancelled by the researcher" in job.log
    again = client.post(f"/api/v1/jobs/{job.id}/cancel", headers={"X-CSRF-Token": csrf})
    assert again.status_code == 409 and again.json()["field"] == "state"
