"""Values that parse but cannot be stored or looked up are refused where they enter, naming
where, with nothing stored: a NaN or infinity that an importer lets through (JSON has no NaN,
and PostgreSQL would refuse the insert with a server error; issue 26: refused centrally, not
only by each importer), and a model config whose architecture is not a name."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import func, select

from app.errors import InputError
from app.kinds import get_kind
from app.kinds.base import ImportResult, ItemSpec
from app.studies import services
from app.studies.models import Item, Study
from tests.conftest import ROOT, create_tom_study, make_user


def test_an_item_with_nan_is_refused_and_nothing_is_stored(session, monkeypatch):
    owner = make_user(session, "researcher")
    kind = get_kind("tom")
    good = kind.import_items((ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes(), "csv", {})
    bad = ItemSpec(external_id="q-bad", payload={**good.items[0].payload, "weight": [1.0, math.nan]})
    monkeypatch.setattr(
        type(kind), "import_items", lambda self, data, fmt, options: ImportResult(items=[*good.items, bad])
    )
    studies_before = session.scalar(select(func.count(Study.id)))
    with pytest.raises(InputError) as refused:
        services.create_study(session, owner, "tom", services.StudySettings(title="NaN"), b"x", "csv")
    assert refused.value.field == "payload.weight[1]" and "'q-bad'" in str(refused.value)
    session.rollback()
    assert session.scalar(select(func.count(Study.id))) == studies_before
    assert session.scalar(select(func.count(Item.id)).where(Item.external_id == "q-bad")) == 0


def test_adding_an_item_with_an_infinite_reference_is_refused(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, live=False)
    before = session.scalar(select(func.count(Item.id)).where(Item.study_id == study.id))
    spec = ItemSpec(external_id="gen-1", payload={"x": 1}, reference={"score": -math.inf})
    with pytest.raises(InputError) as refused:
        services.add_items(session, study, [spec])
    assert refused.value.field == "reference.score"
    session.rollback()
    assert session.scalar(select(func.count(Item.id)).where(Item.study_id == study.id)) == before


def test_an_agent_output_with_nan_is_refused_and_the_old_outputs_stay(session, monkeypatch):
    from app.agents.models import AgentOutput

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    agent = services.register_agent(session, owner, "tom", "nan-agent")
    ext = session.scalars(select(Item.external_id).where(Item.study_id == study.id, Item.is_gold.is_(False))).first()
    kind = get_kind("tom")
    monkeypatch.setattr(
        type(kind), "import_agent_outputs", lambda self, data, known, payloads=None: {ext: {"answer": "yes"}}
    )
    assert services.import_agent_outputs(session, study, agent, b"x") == 1
    monkeypatch.setattr(
        type(kind),
        "import_agent_outputs",
        lambda self, data, known, payloads=None: {ext: {"answer": "yes", "p": math.nan}},
    )
    with pytest.raises(InputError) as refused:
        services.import_agent_outputs(session, study, agent, b"x")
    assert refused.value.field == "output.p" and repr(ext) in str(refused.value)
    session.rollback()
    kept = session.scalars(select(AgentOutput.response).where(AgentOutput.agent_id == agent.id)).all()
    assert kept == [{"answer": "yes"}]


def test_finite_values_pass():
    from app import jsonsafe

    assert jsonsafe.non_finite({"a": [1, 2.5, {"b": "NaN"}], "c": None, "d": True}) is None
    assert jsonsafe.non_finite({"a": [1, {"b": math.inf}]}, "payload") == "payload.a[1].b"


def test_a_model_config_whose_architecture_is_not_a_name_is_refused_not_a_500(client, session):
    """`{"architecture": [...]}` was looked up as a dict key (TypeError: a 500); it is refused
    like any unknown architecture, naming the field, and no version is stored."""
    import json

    from app.agents.models import AgentArtifact
    from tests.conftest import login
    from tests.integration.test_api_roles import _listener_upload

    owner = make_user(session, "researcher")
    agent = services.register_agent(session, owner, "navigation", "odd-config")
    session.commit()
    csrf = login(client, owner)
    form, files = _listener_upload()
    for architecture in (["gru"], {"name": "gru"}, 3):
        config = {**json.loads(form["config"]), "architecture": architecture}
        r = client.post(
            f"/api/v1/agents/{agent.id}/artifacts",
            headers={"X-CSRF-Token": csrf},
            data={**form, "config": json.dumps(config)},
            files=files,
        )
        assert r.status_code == 422 and r.json()["field"] == "config.architecture", r.text
    assert session.scalar(select(func.count(AgentArtifact.id)).where(AgentArtifact.agent_id == agent.id)) == 0


def test_an_item_id_or_category_past_its_column_is_refused_for_any_kind(client, session):
    """The issue-26 re-attack, round 2: the example kind's importer took an id of 10,000
    characters, which PostgreSQL refused in the insert (a 500). The core refuses any text past
    its column, whatever the kind's importer lets through."""
    import json

    from app.auth.security import create_token

    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    session.commit()
    studies_before = session.scalar(select(func.count(Study.id)))
    for line in ({"id": "x" * 10_000, "sentence": "one two"}, {"id": "ok", "sentence": "one two"}):
        r = client.post(
            "/api/v1/studies",
            headers={"Authorization": f"Bearer {token}"},
            data={"settings": json.dumps({"title": "Long ids"}), "kind": "wordcount", "format": "jsonl"},
            files={"file": ("s.jsonl", (json.dumps(line) + "\n").encode(), "application/jsonl")},
        )
        if line["id"] == "ok":
            assert r.status_code == 201, r.text
        else:
            assert r.status_code == 422 and r.json()["field"] == "external_id" and "10000 characters" in r.text, r.text
    session.expire_all()
    assert session.scalar(select(func.count(Study.id))) == studies_before + 1
