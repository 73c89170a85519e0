"""The review queue puts the workers most likely to be bad first: a straight-liner (one answer
to everything, fast) above careful workers, in a study's queue and in the queue of every study."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.auth.models import User
from app.kinds.tom.demo import simulate_worker
from app.quality import service as quality
from tests.conftest import create_tom_study, login, make_user


def _pseudonym(session, external_id: str) -> str:
    return session.scalar(select(User.pseudonym).where(User.external_id == external_id))


@pytest.fixture
def studies(session):
    owner = make_user(session, "researcher")
    first = create_tom_study(session, owner, title="First", bundle_size=10, gold_rate=0.2,
                             annotations_per_item=5)
    second = create_tom_study(session, owner, title="Second", bundle_size=10, gold_rate=0.2,
                              annotations_per_item=5)
    for i, acc in enumerate((0.95, 0.9, 0.85, 0.8)):
        simulate_worker(session, first, f"careful-{i}", acc, seed=i)
        simulate_worker(session, second, f"careful-b{i}", acc, seed=10 + i)
    simulate_worker(session, first, "straight-liner", 0.0, seed=99, always="Yes")
    # A careful worker who is merely quick stays below the straight-liner.
    simulate_worker(session, second, "quick", 0.9, seed=50, median_s=4.0)
    return first, second


def test_a_straight_liner_ranks_first_in_the_study_queue(session, studies):
    first, _ = studies
    queue = quality.review_queue(session, first)
    liner = _pseudonym(session, "straight-liner")
    assert queue[0]["worker"] == liner
    assert queue[0]["signals"]["sameness"] == pytest.approx(1.0)
    assert queue[0]["signals"]["speed"] > 0.7  # about 1 s against a typical 9 s
    careful = [w for w in queue if w["worker"] != liner]
    assert len(careful) == 4
    assert all(queue[0]["risk"] > w["risk"] + 0.3 for w in careful)
    # Careful workers vary their answers as the study does, and keep its pace.
    assert all(w["signals"]["sameness"] < 0.2 and w["signals"]["speed"] < 0.5 for w in careful)
    assert [w["risk"] for w in queue] == sorted((w["risk"] for w in queue), reverse=True)


def test_every_study_queue_orders_across_studies(session, studies, client):
    first, second = studies
    queue = quality.review_queue_all(session, "pending")
    assert {w["study_id"] for w in queue} == {first.id, second.id}
    assert len(queue) == 10
    assert queue[0]["worker"] == _pseudonym(session, "straight-liner")
    quick = next(w for w in queue if w["worker"] == _pseudonym(session, "quick"))
    assert quick["signals"]["speed"] > 0.2  # faster than the study's typical worker
    assert queue[0]["risk"] > quick["risk"]
    # The admin menu leads there; the page shows the same order.
    admin = make_user(session, "admin")
    login(client, admin)
    home = client.get("/studies").text
    assert 'href="/admin/review"' in home
    html = client.get("/admin/review").text
    rows = re.findall(r'<tr data-worker="([^"]+)" data-study="(\d+)"', html)
    assert [r[0] for r in rows] == [w["worker"] for w in queue]
    assert "Second" in html and "First" in html
    # A decision drops a worker from the pending queue.
    quality.decide(session, first, [queue[0]["participant_id"]], "rejected", admin, reason="straight-lining")
    html = client.get("/admin/review?status=pending").text
    assert _pseudonym(session, "straight-liner") not in html
    assert _pseudonym(session, "straight-liner") in client.get("/admin/review?status=rejected").text


def test_signals_are_none_without_data():
    assert quality.risk_score({}) is None
    signals = quality.risk_signals(None, 5.0, 10.0, {"Yes": 3}, {"Yes": 10, "No": 10})
    assert set(signals) == {"speed"}  # too few answers to judge their variety; no gold
    assert quality.risk_score(signals) == pytest.approx(0.5)
    one_value_study = quality.risk_signals(1.0, None, None, {"Yes": 9}, {"Yes": 30})
    assert set(one_value_study) == {"gold"}  # everyone gave the same answer: no sameness signal
