"""/agents lists every agent a researcher has, of every kind, with its kind: the model-uploading
ones with their versions, and the ones known by imported outputs with the studies holding them."""

from __future__ import annotations

import json
import re

from sqlalchemy import select

from app.studies import services
from app.studies.models import Item
from tests.conftest import create_tom_study, login, make_user


def _card(page: str, agent_id: int) -> str:
    m = re.search(rf'<section class="card" id="agent-{agent_id}">(.*?)</section>', page, re.S)
    assert m, page[:1000]
    return m.group(1)


def test_the_agents_page_lists_every_kind(client, session):
    owner, other = make_user(session, "researcher"), make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Belief study")
    ids = session.scalars(select(Item.external_id).where(Item.study_id == study.id)).all()[:5]
    imported = services.register_agent(session, owner, "tom", "gpt-answers", "2")
    services.import_agent_outputs(
        session, study, imported, "".join(json.dumps({"question_id": i, "answer": "Yes"}) + "\n" for i in ids).encode()
    )
    speaker = services.register_agent(session, owner, "navigation", "my-speaker")
    unused = services.register_agent(session, owner, "tom", "not-yet-run")
    theirs = services.register_agent(session, other, "tom", "someone-elses")
    session.commit()

    login(client, owner)
    page = client.get("/agents").text
    card = _card(page, imported.id)
    assert "gpt-answers v2" in card and "Common-ToM belief questions" in card
    assert f'<a href="/studies/{study.id}">Belief study</a></td><td>5</td>' in card
    assert "Upload a new version" not in card  # its kind takes outputs, not models
    card = _card(page, speaker.id)
    assert "Navigation following" in card and "Upload a new version" in card
    assert "No outputs imported yet" in _card(page, unused.id)
    assert f'id="agent-{theirs.id}"' not in page and "someone-elses" not in page
