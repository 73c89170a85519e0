"""Who may post is decided before anything is read: a write to a route that needs an account,
from a caller without one (or, with a cookie session, without the session's CSRF token where
the headers tell), is refused without the app reading a byte of its body. FastAPI parses and
spools a form before it runs the route's dependencies; app.middleware.AuthBeforeBody answers first,
with what those dependencies would answer (tests/integration/test_api_roles.py holds them)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from app.auth.security import create_token
from tests.conftest import csrf_of, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "refusals decided before the body is read or a query runs"
)

# The uploads named in issue 10, by the API and by the researcher's pages.
UPLOADS = {
    "POST /api/v1/studies",
    "POST /api/v1/agents/{agent_id}/artifacts",
    "POST /api/v1/studies/{study_id}/agents/{agent_id}/outputs",
    "POST /api/v1/studies/{study_id}/annotations/import",
    "POST /api/v1/environments/{scan}/panoramas",
    "POST /api/v1/studies/{study_id}/generations",
    "POST /studies/new",
    "POST /studies/{study_id}/agents",
    "POST /studies/{study_id}/annotations/import",
    "POST /agents/{agent_id}/artifacts",
}
FORM = "multipart/form-data; boundary=xyz"


def writes_that_need_an_account(app) -> dict[str, str]:
    """'METHOD /path' -> a concrete path, for every write route with an account check."""
    from app.middleware import BODY_METHODS, _calls
    from app.routes import served_routes

    out = {}
    for route in served_routes(app.routes):
        dependant = getattr(route, "dependant", None)
        if dependant is None or not any(getattr(c, "roles", None) for c in _calls(dependant)):
            continue
        path = re.sub(r"\{[^}]+\}", "1", route.path)  # any id, scan or name
        for method in route.methods & BODY_METHODS:
            out[f"{method} {route.path}"] = path
    return out


class Probe:
    """Calls the app as a server would, with a body that never has to arrive: `reads` counts
    the times the app asked for it."""

    def __init__(self, app):
        self.app, self.reads = app, 0

    def post(self, path: str, headers: dict[str, str], body: bytes = b"x" * 1000, method: str = "POST"):
        async def receive():
            self.reads += 1
            return {"type": "http.request", "body": body, "more_body": False}

        sent = []

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
            "headers": [
                (b"host", b"testserver"),
                (b"content-type", FORM.encode()),
                (b"content-length", str(10 << 20).encode()),
            ]
            + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }
        # A thread of its own: the browser tests' Playwright keeps an event loop running in this one.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, self.app(scope, receive, send)).result()
        start = next(m for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return start["status"], dict((k.decode(), v.decode()) for k, v in start["headers"]), body


def test_the_uploads_are_among_the_guarded_routes(app):
    guarded = writes_that_need_an_account(app)
    assert UPLOADS <= set(guarded), sorted(UPLOADS - set(guarded))


@pytest.mark.parametrize("who", ["no session", "anonymous", "bad token", "crowd worker"])
def test_callers_without_an_account_are_refused_unread(app, session, who):
    """No session at all: refused for its missing form token (the app's first check); a
    browser that has seen a page but has no account, or a crowd worker's: 401 from the API, the
    login form from a page; a bad token: 401."""
    from app.studies.models import Study
    from tests.conftest import create_tom_study

    headers = {}
    with TestClient(app) as c:
        if who == "bad token":
            headers["authorization"] = "Bearer pct_not-a-token"
        elif who == "anonymous":
            csrf_of(c)
        elif who == "crowd worker":
            study = create_tom_study(session, make_user(session, "researcher"))
            session.commit()
            c.get(
                f"/s/{session.get(Study, study.id).slug}",
                params={"PROLIFIC_PID": "w1", "STUDY_ID": "s", "SESSION_ID": "e"},
            )
        if who in ("anonymous", "crowd worker"):
            headers["cookie"] = f"proctor_session={c.cookies['proctor_session']}"
    for key, path in sorted(writes_that_need_an_account(app).items()):
        probe = Probe(app)
        status, response_headers, body = probe.post(path, headers, method=key.split()[0])
        assert probe.reads == 0, f"{key} read the body of a caller with {who}"
        if who == "no session":
            assert status == 403 and b"form token" in body, (key, status, body)
        elif who == "bad token":
            assert status == 401 and b"invalid or revoked API token" in body, (key, status, body)
        elif path.startswith("/api/"):
            assert (status, body) == (401, b'{"detail":"log in or send an API token"}'), (key, status, body)
        else:
            assert status == 303 and response_headers["location"] == f"/login?next={path}", (key, status)


def test_a_cookie_session_without_its_form_token_is_refused_unread(app, session):
    researcher = make_user(session, "researcher")
    session.commit()
    with TestClient(app) as c:
        # Logged in, and not one page seen since: the session holds no form token to match.
        r = c.post(
            "/login",
            data={"email": researcher.email, "password": "pw-" + "x" * 8, "csrf_token": csrf_of(c)},
            follow_redirects=False,
        )
        assert r.status_code == 303
        no_token = {"cookie": f"proctor_session={c.cookies['proctor_session']}"}
        # A page seen (the session has its token), and another token in the header.
        csrf = csrf_of(c)
        wrong = {"cookie": f"proctor_session={c.cookies['proctor_session']}", "x-csrf-token": "not-" + csrf}
    for headers in (no_token, wrong):
        for path in ("/api/v1/studies", "/studies/new", "/agents/1/artifacts"):
            probe = Probe(app)
            status, _, _ = probe.post(path, headers)
            assert (status, probe.reads) == (403, 0), (path, headers.keys())


def test_routes_open_to_anyone_refuse_a_form_that_cannot_pass_csrf_unread(app):
    """The crowd's forms and the login form need no account, but they check CSRF: a client
    with no session (so no token to match) is refused before its body is read as well."""
    for path in ("/login", "/logout", "/task/some-study/answer", "/task/some-study/consent"):
        probe = Probe(app)
        # Within what these routes take (past 4 MB they refuse the size first: BodyLimit).
        status, _, body = probe.post(path, {"content-length": "1000"})
        assert (status, probe.reads) == (403, 0) and b"form token" in body, (path, status)


def test_a_caller_who_may_post_is_read_as_before(app, session):
    """The check costs an honest caller nothing: the body is read and judged for what it is."""
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    probe = Probe(app)
    status, _, body = probe.post("/api/v1/studies", {"authorization": f"Bearer {token}"}, body=b"--xyz--\r\n")
    assert probe.reads >= 1 and status == 422, (status, body)  # read: no file in it


def test_a_live_server_answers_before_the_body_arrives(live_server):
    """Over a socket: headers announcing 10 MB, and not one byte of it sent. The refusal comes
    at once (before, the server waited for the body it would then refuse)."""
    port = int(live_server.url.rsplit(":", 1)[1])
    for path, auth, expected in (
        ("/api/v1/studies", "", b" 403 "),
        ("/studies/new", "", b" 403 "),
        ("/api/v1/agents/1/artifacts", "Authorization: Bearer pct_x\r\n", b" 401 "),
    ):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {FORM}\r\n{auth}"
                f"Content-Length: {10 << 20}\r\n\r\n".encode()
            )
            start = time.monotonic()
            head = s.recv(4096)
            assert expected in head.split(b"\r\n", 1)[0], (path, head[:200])
            assert time.monotonic() - start < 5
