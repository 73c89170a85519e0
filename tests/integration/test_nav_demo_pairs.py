"""The navigation demo's side-by-side study (app/kinds/navigation/demo.py): made beside the
following study as `proctor demo` makes it, followed (the default), live, with simulated judges
whose walks and picks give its leaderboard ratings and followed success per speaker, and half
its judgements left for newcomers."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.kinds import get_kind
from app.kinds.navigation import demo
from app.studies import services
from app.studies.models import Annotation, Item, Study
from tests.conftest import make_user


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_demo_makes_a_followed_navigation_pair_study(session):
    kind = get_kind("navigation")
    owner = make_user(session, "researcher")
    material = kind.demo()
    material["setup"](session)
    settings = services.StudySettings(title="Demo: Navigation following", **material["settings"])
    study = services.create_study(session, owner, "navigation", settings, material["items"], material["format"])
    services.set_state(session, study, "live", owner)
    material["simulate"](session, study, owner)

    pairs = session.scalar(select(Study).where(Study.title == demo.PAIRS_TITLE))
    assert pairs is not None and pairs.state == "live" and pairs.owner_id == owner.id
    assert pairs.kind_settings == {"mode": "pairs", "control_length": False, "follow": True}
    items = session.scalars(select(Item).where(Item.study_id == pairs.id)).all()
    assert len(items) == demo.PAIR_PATHS and all(i.payload["follow"] for i in items)
    assert {frozenset((i.reference["a"]["agent"], i.reference["b"]["agent"])) for i in items} == {
        frozenset(("grammar", "terse"))
    }
    # The terse speaker's instruction is the grammar's without where to stop: shorter, a prefix.
    for i in items:
        side = {i.reference[s]["agent"]: s for s in ("a", "b")}
        full, short = i.payload[f"instruction_{side['grammar']}"], i.payload[f"instruction_{side['terse']}"]
        assert len(short.split()) < len(full.split()) and full.startswith(short.rstrip(".")), (full, short)
    answers = session.scalars(select(Annotation).where(Annotation.study_id == pairs.id)).all()
    judged = len(demo.PAIR_JUDGES) * demo.PAIR_BUNDLE
    assert len(answers) == judged < demo.PAIR_PATHS * pairs.annotations_per_item  # the rest: newcomers'
    assert all(set(a.response["follows"]) == {"a", "b"} and set(a.scores) >= {"a", "b"} for a in answers)

    tables = {t["key"]: t for t in kind.extra_leaderboard(session, pairs)["tables"]}
    rated = {r["agent"]: r for r in tables["navigation_pair_ratings"]["rows"]}
    assert set(rated) == {"grammar", "terse"}
    assert rated["grammar"]["rating"]["mean"] > rated["terse"]["rating"]["mean"]
    assert all(r["rating"]["low"] is not None for r in rated.values())
    followed = {r["agent"]: r for r in tables["navigation_pair_followed"]["rows"]}
    assert followed["grammar"]["follows"] == followed["terse"]["follows"] == judged
    assert followed["grammar"]["success"]["mean"] > followed["terse"]["success"]["mean"]
    # Seeding again makes no second one.
    demo.simulate_pairs(session, owner)
    assert len(session.scalars(select(Study).where(Study.title == demo.PAIRS_TITLE)).all()) == 1
