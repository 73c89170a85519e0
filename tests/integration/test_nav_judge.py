"""The listener ensemble as the navigation kind's automatic judge (issue 28): where a
generation run with listeners made a speaker's items, the leaderboard adds "People and the
listener ensemble together": per speaker people's SR on the instructions they followed, the
ensemble's success rate on every instruction (its rollouts of the chosen candidate), their
agreement, the PPI++ SR with what it is worth, and how many follows a ±0.05 interval needs,
each checked against a recomputation from the stored rows. SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from app.kinds.navigation.environments import get_graph, import_house
from app.kinds.navigation.models import Candidate, Rollout
from app.leaderboards import stats
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Annotation, Item
from tests.conftest import make_user
from tests.integration.test_navigation_leaderboard import _follow, coop_file, house
from tests.nav_fixtures import stored_generation_run


def _tables(session, study) -> dict:
    session.expire_all()
    return {t["key"]: t for t in compute(session, study)["extra"]["tables"]}


def _judged_by_a_run(session, study, owner) -> dict[int, float]:
    """A run with listeners behind the speaker's items: per item, 4 rollouts of its chosen
    candidate, of which (item index mod 5) reach the goal, capped at 4."""
    run = stored_generation_run(session, owner, study)
    rates = {}
    items = session.scalars(
        select(Item).where(Item.study_id == study.id, Item.source == "agent").order_by(Item.id)
    ).all()
    for i, item in enumerate(items):
        cand = Candidate(
            run_id=run.id,
            path_key=item.cluster,
            k=0,
            role="inference",
            instruction=item.payload["instruction"],
            speaker_score=-1.0,
            listener_score=0.5,
            chosen=True,
        )
        session.add(cand)
        session.flush()
        wins = min(i % 5, 4)
        for r in range(4):
            session.add(
                Rollout(candidate_id=cand.id, listener=r // 2, m=r % 2, path=[], ndtw=0.5, sdtw=0.5, success=r < wins)
            )
        item.reference = {**item.reference, "generation_run": run.id, "candidate": 0}
        rates[item.id] = wins / 4
    session.commit()
    return rates


def _follow_some(session, study, graph, limit: int) -> None:
    """One follower per instruction until `limit` follows: every third stops early (which
    fails), the others follow exactly, so people's SR varies and agrees with the ensemble only
    in part."""
    done, w = 0, 0
    while done < limit:
        bundle = assignment.enter(session, study, "prolific", f"f-{w}")
        w += 1
        a = assignment.next_item(session, study, bundle.id)
        while a is not None and done < limit:
            item = session.get(Item, a.item_id)
            style = "early" if done % 3 == 0 else "exact"
            path = _follow(graph, item.reference["path"], style)
            assignment.submit(
                session, study, bundle.id, a.id, {"path": path, "trace": [], "rating": 2}, uuid.uuid4().hex
            )
            done += 1
            a = assignment.next_item(session, study, bundle.id)


def test_people_and_the_listener_ensemble_together(session):
    h = house()
    import_house(session, h)
    graph = get_graph(h.scan)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Judge", bundle_size=5, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "navigation", s, coop_file(h, n=30), "coop", {"speaker": "toy"})
    services.set_state(session, study, "live", owner)
    _follow_some(session, study, graph, 8)
    assert "navigation_ppi" not in _tables(session, study)  # no run, no judge
    rates = _judged_by_a_run(session, study, owner)
    _follow_some(session, study, graph, 24)
    table = _tables(session, study)["navigation_ppi"]
    assert [r["agent"] for r in table["rows"]] == ["toy"]
    row = table["rows"][0]

    followed: dict[int, list[float]] = {}
    for item_id, scores in session.execute(
        select(Annotation.item_id, Annotation.scores)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Item.source == "agent", Annotation.excluded.is_(False))
    ):
        followed.setdefault(item_id, []).append(float(scores["success"]))
    human = [sum(v) / len(v) for v in followed.values()]
    judged = [rates[i] for i in followed]
    unseen = [r for i, r in rates.items() if i not in followed]
    assert len(followed) >= 10 and unseen  # a sample, and instructions only the ensemble saw
    want = stats.ppi_mean(human, judged, unseen, unit="instruction")
    assert row["judged"] == len(rates) == 30
    assert row["judge"] == pytest.approx(sum(rates.values()) / 30)
    assert row["people"]["mean"] == pytest.approx(sum(human) / len(human)) and row["people"]["n"] == len(human)
    assert row["agreement"]["mean"] == pytest.approx(sum(1 - abs(a - b) for a, b in zip(human, judged)) / len(human))
    assert row["ppi"]["mean"] == pytest.approx(want["mean"]) and row["ppi"]["low"] == pytest.approx(want["low"])
    assert row["ppi"]["high"] == pytest.approx(want["high"]) and row["ppi"]["n"] == 30
    assert row["worth"] == pytest.approx(round(want["effective_n"], 1))
    plan = stats.ppi_people_needed(human, judged, 30, 0.05, unit="instruction")
    assert row["plan"] == (
        {"text": "all 30", "reason": "even all give a wider interval than ±0.05"}
        if not plan["reachable"]
        else f"{plan['people']} of 30"
    )
    assert {c["key"] for c in table["columns"]} == set(row)
