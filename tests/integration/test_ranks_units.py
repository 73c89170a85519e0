"""The generic table's rank interval resamples the study's own non-gold items' clusters
(app/leaderboards/ranks.py): gold items and another study's items are no units of it
(docs/testing.md, "Mutation testing": the survivors of the seed-25 sample)."""

from __future__ import annotations

import dataclasses
import json

from sqlalchemy import select

from app.studies import services
from app.studies.models import Item
from tests.conftest import create_tom_study, make_user
from tests.integration.test_tom_leaderboard import _split_csv


def test_rank_units_are_the_studys_own_non_gold_clusters(client, session):
    """Another study of 6 propositions exists; this one has the fixture's 2 propositions and 3
    gold questions, each in a cluster of its own. Its agents are ranked over its 2 clusters:
    "—", fewer than 5 (with the other study's 6, or the 3 gold ones, there would be 8 or 5)."""
    from tests.conftest import login

    owner = make_user(session, "researcher")
    login(client, owner)
    create_tom_study(session, owner, data=_split_csv(50, 50), title="Six propositions")
    study = create_tom_study(session, owner, live=False)
    specs = [s for s in services.preview_items("tom", _fixture(), "csv").items if not s.is_gold][:3]
    gold = [
        dataclasses.replace(s, external_id=f"gold-{k}", is_gold=True, cluster=f"gold-cluster-{k}")
        for k, s in enumerate(specs)
    ]
    assert services.add_items(session, study, gold) == 3
    session.commit()
    services.set_state(session, study, "live", owner)
    refs = session.execute(
        select(Item.external_id, Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False))
    ).all()
    assert len({c for (c,) in session.execute(select(Item.cluster).where(Item.study_id == study.id))}) == 5
    flip = {"Yes": "No", "No": "Yes"}
    for name, right in (("first", True), ("wrong", False)):
        agent = services.register_agent(session, owner, "tom", name, "1")
        services.import_agent_outputs(
            session,
            study,
            agent,
            "".join(
                json.dumps({"question_id": q, "answer": r["answer"] if right else flip[r["answer"]]}) + "\n"
                for q, r in refs
            ).encode(),
        )
    session.commit()
    rows = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()["rows"]
    few = {"text": "—", "reason": "2 clusters shared by every ranked system: fewer than 5 rank nobody"}
    assert {r["name"]: r["rank"] for r in rows if r["type"] == "agent"} == {"first v1": few, "wrong v1": few}


def _fixture() -> bytes:
    from pathlib import Path

    return (Path(__file__).parents[1] / "fixtures" / "tom" / "questions.csv").read_bytes()
