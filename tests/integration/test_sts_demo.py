"""The STS demo without torch: the trained baseline is left out with a note, and the study is
still made from the published suite with the expert's and random's continuations. (With torch,
test_cli_demo.py checks the whole demo as `proctor demo` makes it.)"""

from __future__ import annotations

import sys

import pytest
from sqlalchemy import func, select

from app.agents.models import Agent
from app.kinds.sts import demo
from app.kinds.sts.models import Continuation, Scenario, SuiteVersion
from app.studies.models import Item, Study
from app.studies.services import StudySettings
from tests.conftest import make_user


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_without_torch_the_demo_leaves_the_baseline_out_and_says_so(session, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails, as where it is not installed
    owner = make_user(session, "researcher")
    settings = StudySettings(title="Demo", bundle_size=6, gold_rate=0.2)
    study = demo.build_demo(session, owner, settings)
    assert "sts demo: no trained baseline: torch is not installed" in capsys.readouterr().err
    names = set(session.scalars(select(Agent.name).where(Agent.owner_id == owner.id)))
    assert names == {"expert", "random", "people"}  # people: the demo's plays (the human row)
    version = session.scalar(select(SuiteVersion).where(SuiteVersion.suite_id == study.kind_settings["suite"]["id"]))
    assert version.state == "published"
    scenarios = session.scalars(select(Scenario).where(Scenario.version_id == version.id)).all()
    assert len(scenarios) == len(demo.LEVELS) * len(demo.SUITE_SEEDS)
    assert len({sc.category for sc in scenarios}) == 4
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    assert sorted({i.reference["agent"] for i in items if not i.is_gold}) == ["expert", "people", "random"]
    # The two agents' continuations, each simulated player's play of every scenario, the reference.
    plays = len(scenarios) * len(demo.PLAYERS)
    assert len(items) == 2 * len(scenarios) * demo.SUITE_CONTINUATIONS + plays + sum(demo.REFERENCE.values())
    assert {i.reference["scenario"] for i in items} <= {f"s{sc.id}" for sc in scenarios}
    # Beside it, a draft side-by-side study of the same version: every two of the agents and
    # people (the human row) on every scenario.
    pairs = session.scalar(select(Study).where(Study.title == demo.PAIRS_TITLE))
    assert pairs.state == "draft" and pairs.kind_settings["suite"] == study.kind_settings["suite"]
    pair_items = session.scalars(select(Item).where(Item.study_id == pairs.id, Item.is_gold.is_(False))).all()
    assert len(pair_items) == 3 * len(scenarios)
    sides = [frozenset((i.reference["a"]["agent"], i.reference["b"]["agent"])) for i in pair_items]
    assert set(sides) == {frozenset(p) for p in (("expert", "random"), ("expert", "people"), ("random", "people"))}
    # An interrupted demo run again reuses the suite and what was generated.
    stored = session.scalar(select(func.count(Continuation.id)))
    again = demo.build_demo(session, owner, settings.model_copy(update={"title": "Demo again"}))
    assert again.kind_settings["suite"] == study.kind_settings["suite"]
    assert session.scalar(select(func.count(Continuation.id))) == stored
