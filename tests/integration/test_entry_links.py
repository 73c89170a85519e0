"""The study page's MTurk and Prolific entry links name the server workers reach: BASE_URL when
it is set, else the scheme, host and port the researcher's request came by (behind a proxy in
TRUSTED_PROXIES, the scheme and host it forwarded); the page warns when the links would work
only on the machine that serves them. `make demo PORT=...` serves and prints on that port."""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.conftest import create_tom_study, login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "links built from BASE_URL and the request"
)

ROOT = Path(__file__).resolve().parents[2]
PROLIFIC_QUERY = "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
WARNING = (
    'Only on this machine These links start with {base}, an address that means "this computer": '
    "they work only on the machine that serves Proctor, not for workers elsewhere. Set BASE_URL to "
    "the address workers reach (e.g. https://proctor.example.org), or open this page by that address."
)


@pytest.fixture
def make_app(db_url, monkeypatch):
    """An app built under these settings (BASE_URL, TRUSTED_PROXIES; unset when not given)."""
    from app.config import get_settings
    from tests.conftest import app_for

    def make(base_url: str = "", proxies: str = ""):
        monkeypatch.setenv("BASE_URL", base_url)
        monkeypatch.setenv("TRUSTED_PROXIES", proxies)
        get_settings.cache_clear()
        return app_for(db_url)

    yield make
    get_settings.cache_clear()


def study_page(client: TestClient, session, study, owner, **headers) -> dict:
    """The links and the warning as the page shows them (text, tags and entities gone)."""
    login(client, owner)
    r = client.get(f"/studies/{study.id}", headers=headers)
    assert r.status_code == 200, r.text

    def text(element_id: str) -> str | None:
        m = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:code|p)>', r.text, re.S)
        return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip() if m else None

    return {"mturk": text("entry-mturk"), "prolific": text("entry-prolific"), "warning": text("entry-warning")}


def test_without_base_url_the_links_follow_the_request(make_app, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    app = make_app()
    with TestClient(app, base_url="http://lab-server.example.org:8123") as c:
        shown = study_page(c, session, study, owner)
    assert shown == {
        "mturk": f"http://lab-server.example.org:8123/s/{study.slug}?workerId=...&assignmentId=...&hitId=...",
        "prolific": f"http://lab-server.example.org:8123/s/{study.slug}{PROLIFIC_QUERY}",
        "warning": None,
    }
    # `make demo PORT=8100`: the page opened on that port names that port, and says the links
    # are for this machine only.
    with TestClient(app, base_url="http://127.0.0.1:8100") as c:
        shown = study_page(c, session, study, owner)
    assert shown["prolific"] == f"http://127.0.0.1:8100/s/{study.slug}{PROLIFIC_QUERY}"
    assert shown["warning"] == WARNING.format(base="http://127.0.0.1:8100")
    with TestClient(app, base_url="http://localhost:8000") as c:
        assert study_page(c, session, study, owner)["warning"] == WARNING.format(base="http://localhost:8000")


def test_base_url_names_the_server_whatever_the_request_came_by(make_app, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    # (Over https: with an https BASE_URL the session cookie is Secure.)
    with TestClient(make_app(base_url="https://proctor.example.org/"), base_url="https://10.0.0.5:8443") as c:
        shown = study_page(c, session, study, owner)
    assert shown["prolific"] == f"https://proctor.example.org/s/{study.slug}{PROLIFIC_QUERY}"
    assert shown["mturk"].startswith(f"https://proctor.example.org/s/{study.slug}?workerId=")
    assert shown["warning"] is None
    # A BASE_URL on this machine only is warned about too.
    with TestClient(make_app(base_url="http://127.0.0.1:9000"), base_url="http://lab.example.org") as c:
        assert study_page(c, session, study, owner)["warning"] == WARNING.format(base="http://127.0.0.1:9000")


def test_behind_a_trusted_proxy_the_links_take_the_forwarded_scheme_and_host(make_app, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    forwarded = {
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "proctor.lab.example.org",
        "X-Forwarded-For": "198.51.100.4",
    }
    app = make_app(proxies="10.0.0.0/8")
    with TestClient(app, base_url="http://10.0.0.2:8000", client=("10.0.0.9", 40000)) as proxy:
        shown = study_page(proxy, session, study, owner, **forwarded)
    assert shown["prolific"] == f"https://proctor.lab.example.org/s/{study.slug}{PROLIFIC_QUERY}"
    assert shown["warning"] is None
    # Anyone else's forwarded headers are their own words, and ignored.
    with TestClient(app, base_url="http://10.0.0.2:8000", client=("203.0.113.7", 40000)) as other:
        shown = study_page(other, session, study, owner, **forwarded)
    assert shown["prolific"] == f"http://10.0.0.2:8000/s/{study.slug}{PROLIFIC_QUERY}"


def test_make_demo_takes_a_port():
    ran = subprocess.run(["make", "-n", "demo", "PORT=8100"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ".venv/bin/proctor demo --port 8100" in ran.stdout.splitlines()
    default = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert ".venv/bin/proctor demo --port 8000" in default.stdout.splitlines()
