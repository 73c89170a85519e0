"""Workers see whom to contact, how long the task takes and what it pays before agreeing."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from app.studies import services
from app.studies.models import Study
from tests.conftest import ROOT, consent_version_of, create_tom_study, csrf_of, login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "a consent page rendered from the study's settings"
)

ENTRY = "?PROLIFIC_PID=w-consent&STUDY_ID=s&SESSION_ID=x"


def _details(html: str) -> dict[str, str]:
    block = re.search(r'<dl class="details" id="consent-details">(.*?)</dl>', html, re.S).group(1)
    return dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block))


def test_the_consent_page_shows_contact_time_and_pay(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(
        session, owner, payment="£2.50 on completion", estimated_minutes=12, contact="lab@example.org"
    )
    page = client.get(f"/s/{study.slug}{ENTRY}").text
    assert _details(page) == {
        "Contact": "lab@example.org",
        "Estimated time": "about 12 minutes",
        "Payment": "£2.50 on completion",
    }
    enter = client.post(
        f"/api/v1/crowd/{study.slug}/enter",
        json={"params": {"PROLIFIC_PID": "w-api", "STUDY_ID": "s", "SESSION_ID": "y"}},
    ).json()
    assert enter["consent_details"]["Payment"] == "£2.50 on completion"


def test_left_out_details_are_said_to_be_missing(client, session):
    study = create_tom_study(session, make_user(session, "researcher"))
    details = _details(client.get(f"/s/{study.slug}{ENTRY}").text)
    assert set(details.values()) == {"not stated by the researcher"}


def test_a_changed_payment_must_be_agreed_to_again(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, payment="£2", estimated_minutes=10, contact="a@b.org")
    shown = consent_version_of(client.get(f"/s/{study.slug}{ENTRY}").text)
    services.edit_study(session, study, services.StudyEdit(payment="£1"), owner)
    r = client.post(f"/task/{study.slug}/consent", data={"consent_version": shown, "csrf_token": csrf_of(client)})
    assert r.status_code == 409
    assert "£1" in r.text and _details(r.text)["Payment"] == "£1"


def test_bad_details_are_refused_naming_the_field(client, session):
    csrf = login(client, make_user(session, "researcher"))
    data = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()
    for field, value in (("estimated_minutes", "0"), ("contact", "x" * 256), ("payment", "x" * 101)):
        r = client.post(
            "/studies/new",
            data={"csrf_token": csrf, "title": "Bad", "kind": "tom", "format": "csv", field: value, "action": "create"},
            files={"file": ("q.csv", data)},
        )
        assert r.status_code == 422 and f"field &#39;{field}&#39;" in r.text, (field, r.text[:2000])
    assert session.scalar(select(func.count()).select_from(Study)) == 0
