"""Upload refusals say what the researcher did: an Excel workbook is named as one, an over-long
cell names its column and the limit, a refused file is not offered again, and a refused agent
or annotation import is shown on the study page, in the card of the form that sent it."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import zipfile

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.agents.models import Agent
from app.auth.security import create_token
from app.studies.models import Study
from tests.conftest import ROOT, create_tom_study, login, make_user

FIXTURE = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"
EXCEL_SAYS = "this is an Excel workbook: save it as CSV (UTF-8)"


def xlsx() -> bytes:
    """A workbook as Excel saves it: a zip of XML parts under xl/."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
        z.writestr("xl/worksheets/sheet1.xml", "<worksheet>" + "<row/>" * 50 + "</worksheet>")
    return out.getvalue()


XLS = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)  # the OLE header of an old .xls


def _page_error(r) -> str:
    m = re.search(r'<p class="error" role="alert"[^>]*>(.*?)</p>', r.text, re.S)
    assert m, r.text[:500]
    return html.unescape(m.group(1))


def _kept_token(r) -> str:
    return re.search(r'name="upload_token" value="([^"]*)"', r.text).group(1)


@pytest.fixture
def researcher(session):
    return make_user(session, "researcher")


@pytest.mark.parametrize("workbook", ["xlsx", "xls"])
def test_an_excel_workbook_is_named_as_one(workbook, app, client, session, researcher):
    data = xlsx() if workbook == "xlsx" else XLS
    token = create_token(session, researcher)
    session.commit()
    r = client.post(
        "/api/v1/studies",
        headers={"Authorization": f"Bearer {token}"},
        data={"settings": json.dumps({"title": "from Excel"})},
        files={"file": (f"q.{workbook}", data, "application/octet-stream")},
    )
    assert r.status_code == 422
    assert r.json()["field"] == "file" and EXCEL_SAYS in r.json()["detail"]
    with TestClient(app) as page:
        csrf = login(page, researcher)
        r = page.post(
            "/studies/new",
            data={"title": "from Excel", "action": "preview", "csrf_token": csrf},
            files={"file": (f"q.{workbook}", data, "application/octet-stream")},
        )
        assert r.status_code == 422
        assert EXCEL_SAYS in _page_error(r)
        assert _kept_token(r) == "" and "kept from the preview" not in r.text
    assert session.scalar(select(func.count()).select_from(Study)) == 0


def test_an_over_long_cell_names_its_column_and_the_limit(app, researcher):
    rows = list(csv.reader(io.StringIO(FIXTURE.read_text("utf-8"), newline="")))[:6]
    rows[3][rows[0].index("context")] = "word " * 40000  # past the csv module's 131072
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    with TestClient(app) as page:
        csrf = login(page, researcher)
        r = page.post(
            "/studies/new",
            data={"title": "long", "action": "preview", "csrf_token": csrf},
            files={"file": ("q.csv", out.getvalue().encode(), "text/csv")},
        )
    assert r.status_code == 422
    message = _page_error(r)
    assert "field 'context'" in message and "131072 characters" in message, message
    assert re.search(r"\bline \d+", message), message


def test_a_refused_file_is_not_offered_again_but_a_good_one_is(app, researcher, session):
    good = FIXTURE.read_bytes()
    rows = list(csv.reader(io.StringIO(FIXTURE.read_text("utf-8"), newline="")))[:6]
    rows[2][rows[0].index("answer")] = "Perhaps"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    bad = out.getvalue().encode()
    with TestClient(app) as page:
        csrf = login(page, researcher)
        # A good file previewed is kept for the create...
        r = page.post(
            "/studies/new",
            data={"title": "kept", "action": "preview", "csrf_token": csrf},
            files={"file": ("q.csv", good, "text/csv")},
        )
        assert r.status_code == 200 and 'id="preview"' in r.text
        kept = _kept_token(r)
        assert kept and "kept from the preview" in r.text
        # ... also when the form, not the file, is refused (the title is too long) ...
        r = page.post(
            "/studies/new", data={"title": "t" * 300, "action": "create", "csrf_token": csrf, "upload_token": kept}
        )
        assert r.status_code == 422 and "field 'title'" in _page_error(r)
        assert "255" in _page_error(r) and _kept_token(r) == kept
        # ... but a refused file replacing it is not kept: the next submit must choose a file.
        r = page.post(
            "/studies/new",
            data={"title": "kept", "action": "preview", "csrf_token": csrf, "upload_token": kept},
            files={"file": ("q.csv", bad, "text/csv")},
        )
        assert r.status_code == 422 and "Perhaps" in _page_error(r)
        assert _kept_token(r) == "" and "kept from the preview" not in r.text
        r = page.post(
            "/studies/new", data={"title": "kept", "action": "create", "csrf_token": csrf, "upload_token": ""}
        )
        assert r.status_code == 422 and "choose a file" in _page_error(r)
    assert session.scalar(select(func.count()).select_from(Study)) == 0


def test_a_refused_agent_import_shows_on_the_study_page(app, session, researcher):
    study = create_tom_study(session, researcher, title="Where the form was")
    agents = session.scalar(select(func.count()).select_from(Agent))
    with TestClient(app) as page:
        csrf = login(page, researcher)
        for data, says in ((xlsx(), EXCEL_SAYS), (b'{"question_id": "nope", "answer": "No"}\n', "unknown question id")):
            r = page.post(
                f"/studies/{study.id}/agents",
                data={"name": "fresh agent", "version": "1", "csrf_token": csrf},
                files={"file": ("answers.jsonl", data, "application/jsonl")},
                follow_redirects=False,
            )
            assert r.status_code == 422
            assert says in _page_error(r)
            # The study page itself, in the site's layout: its title, the menu, the agent form.
            assert "<h1>Where the form was" in r.text and 'href="/agents"' in r.text
            assert 'id="agents-error"' in r.text and f'action="/studies/{study.id}/agents"' in r.text
        r = page.post(
            f"/studies/{study.id}/annotations/import",
            data={"source": "earlier", "csrf_token": csrf},
            files={"file": ("prior.xls", XLS, "application/vnd.ms-excel")},
            follow_redirects=False,
        )
        assert r.status_code == 422 and 'id="prior-error"' in r.text
        assert EXCEL_SAYS in _page_error(r)
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Agent)) == agents  # no half-made agent
