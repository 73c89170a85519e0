"""Crowd platforms behind one interface (app/crowd): a lab's own participants come by a link
with an id of the lab's choosing and are one platform among the others: their own workers,
the study's code on the done page, no link to another site; the study page lists each
platform's entry link; a link naming no platform's worker says which parameters it needs."""

from __future__ import annotations

import re

from sqlalchemy import select

from app import crowd
from app.auth.models import User
from tests.conftest import create_tom_study, login, make_user
from tests.integration.test_completion_codes import _finish


def test_a_labs_own_participant_enters_by_the_direct_link(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, completion_code="LAB042")
    session.commit()
    worker = type(client)(client.app)
    page = _finish(worker, study.slug, "participant=P017")
    assert re.search(r'id="completion-code">(\w+)<', page).group(1) == "LAB042"
    assert 'id="prolific-return"' not in page and "externalSubmit" not in page
    who = session.scalars(select(User).where(User.external_id == "P017")).all()
    assert [u.platform for u in who] == ["direct"]
    # The same id on Prolific is another person.
    other = type(client)(client.app)
    other.get(f"/s/{study.slug}?PROLIFIC_PID=P017&STUDY_ID=S&SESSION_ID=X")
    session.expire_all()
    assert sorted(u.platform for u in session.scalars(select(User).where(User.external_id == "P017"))) == [
        "direct",
        "prolific",
    ]


def test_the_study_page_lists_every_platforms_entry_link(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    login(client, owner)
    page = client.get(f"/studies/{study.id}").text
    for p in crowd.PLATFORMS:
        link = re.search(rf'id="entry-{p.name}">([^<]+)<', page).group(1)
        assert f"/s/{study.slug}?{p.worker_param}=" in link


def test_a_link_without_a_worker_names_each_platforms_parameters(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    r = client.get(f"/s/{study.slug}?STUDY_ID=S")
    assert r.status_code == 400
    for param in ("workerId", "PROLIFIC_PID", "participant"):
        assert param in r.text
