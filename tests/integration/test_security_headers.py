"""Every response carries the security headers (issue 26.6): nosniff, Referrer-Policy, one
Content-Security-Policy that runs only our own script files, and HSTS over https only. The crowd's
pages may be framed by MTurk and post to its externalSubmit; the API docs keep their own policy."""

from __future__ import annotations

from fastapi.testclient import TestClient
import pytest

from app.middleware import CROWD_FRAMERS, SecurityHeaders, blob_origin
from tests.conftest import create_tom_study, login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "response headers, set by middleware"
)


def directives(response) -> dict[str, str]:
    """The one policy of a response, as {directive: its sources}."""
    policies = response.headers.get_list("content-security-policy")
    assert len(policies) == 1, policies  # browsers enforce every policy sent: one, or none is ours
    out = {}
    for part in policies[0].split(";"):
        name, _, sources = part.strip().partition(" ")
        out[name] = sources
    return out


def assert_common(response) -> None:
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert "strict-transport-security" not in response.headers  # plain http


def assert_own_page(response) -> dict[str, str]:
    assert_common(response)
    csp = directives(response)
    assert csp["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval'
    assert csp["object-src"] == "'none'" and csp["base-uri"] == "'self'"
    assert csp["frame-ancestors"] == "'none'" and csp["form-action"] == "'self'"
    assert response.headers["x-frame-options"] == "DENY"
    return csp


def test_every_kind_of_response_carries_the_headers(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    # The crowd's pages: framed by MTurk only, forms to us or to MTurk's externalSubmit.
    entry = client.get(
        f"/s/{study.slug}", params={"PROLIFIC_PID": "hdr-1", "STUDY_ID": "s", "SESSION_ID": "x"}, follow_redirects=False
    )
    task = client.get(f"/task/{study.slug}")
    assert task.status_code == 200 and 'id="consent"' in task.text
    for response in (entry, task, client.get("/s/no-such-study")):
        assert_common(response)
        csp = directives(response)
        assert csp["script-src"] == "'self'"
        assert csp["frame-ancestors"] == f"'self' {CROWD_FRAMERS}"
        assert csp["form-action"] == f"'self' {CROWD_FRAMERS}"
        for host in ("https://www.mturk.com", "https://workersandbox.mturk.com"):
            assert host in csp["form-action"].split()
        assert "x-frame-options" not in response.headers
    # Researchers' pages, the API's JSON, a static file, an error page (HTML and JSON).
    login(client, owner)
    for path in (
        "/studies",
        f"/studies/{study.id}",
        "/api/v1/studies",
        "/static/app.js",
        "/static/kinds/hexagons/board.js",
        "/no-such-page",
        "/api/v1/studies/2147483647",
        "/login",
    ):
        response = client.get(path)
        assert response.status_code in (200, 404), (path, response.status_code)
        assert_own_page(response)
    assert (
        client.get("/static/app.js").headers["content-type"].startswith(("text/javascript", "application/javascript"))
    )


def test_the_api_docs_keep_their_own_policy(client):
    for path in ("/api/docs", "/api/redoc", "/docs/oauth2-redirect"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert_common(response)
        csp = directives(response)  # one policy: theirs, which allows their inline start
        assert "'unsafe-inline'" in csp["script-src"] and csp["frame-ancestors"] == "'none'"
        assert response.headers["x-frame-options"] == "DENY"


def test_hsts_only_over_https(app):
    with TestClient(app, base_url="https://proctor.example") as secure:
        for path in ("/login", "/s/no-such-study", "/static/app.js", "/api/docs"):
            assert secure.get(path).headers["strict-transport-security"] == "max-age=31536000", path
    with TestClient(app, base_url="http://proctor.example") as plain:
        assert "strict-transport-security" not in plain.get("/login").headers


def test_an_unexpected_error_carries_the_headers_too(app):
    """A 500 (an error no handler knows) is answered by Starlette's outermost middleware,
    outside ours: before the fix it carried none of the headers, not even nosniff (issue 26,
    round 13). The API's is in the API's error shape; the traceback stays in the log."""

    def broken():
        raise RuntimeError("a bug at /srv/proctor/app/secret.py")

    app.add_api_route("/api/v1/broken-for-the-test", broken)
    app.add_api_route("/broken-for-the-test", broken)
    for base in ("http://proctor.example", "https://proctor.example"):
        with TestClient(app, base_url=base, raise_server_exceptions=False) as client:
            for method in ("GET", "HEAD"):
                page = client.request(method, "/broken-for-the-test")
                api = client.request(method, "/api/v1/broken-for-the-test")
                for response in (page, api):
                    assert response.status_code == 500
                    if base.startswith("http:"):
                        assert_own_page(response)
                    else:
                        assert response.headers["strict-transport-security"] == "max-age=31536000"
                    assert "/srv/" not in response.text and "RuntimeError" not in response.text
            assert page.headers["content-type"].startswith("text/plain")
            assert client.get("/api/v1/broken-for-the-test").json() == {"detail": "internal server error"}


def test_the_scheme_is_the_one_the_asgi_scope_names():
    """Behind a trusted proxy uvicorn's ProxyHeadersMiddleware has already set the scope's
    scheme from X-Forwarded-Proto; the middleware reads only the scope."""

    async def plain_app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def headers_for(scheme: str, path: str = "/") -> dict[bytes, bytes]:
        sent = []

        async def send(message):
            sent.append(message)

        await SecurityHeaders(plain_app)({"type": "http", "scheme": scheme, "path": path}, None, send)
        return dict(sent[0]["headers"])

    def run(coroutine):  # nothing in it waits: one step ends it (no event loop, which a
        try:  # browser test earlier in the process may hold)
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        raise AssertionError("the middleware waited for something")

    assert run(headers_for("https"))[b"strict-transport-security"] == b"max-age=31536000"
    assert b"strict-transport-security" not in run(headers_for("http"))


def test_s3_download_links_are_allowed_as_images():
    """Presigned S3 links (panoramas, STS frames) are on the bucket's host, not ours."""
    from app.config import Settings

    local = Settings(storage_url="file:///tmp/proctor-blobs")
    assert blob_origin(local) == ""
    s3 = Settings(
        storage_url="s3://proctor", s3_endpoint_url="https://minio.example:9000", s3_access_key="k", s3_secret_key="s"
    )
    origin = blob_origin(s3)
    assert origin == "https://minio.example:9000"
    csp = SecurityHeaders(None, blobs=origin).own_csp.decode()
    assert "img-src 'self' data: blob: https://minio.example:9000;" in csp
