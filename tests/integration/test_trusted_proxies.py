"""The client's address is the connection's peer, unless that peer is a proxy named in
TRUSTED_PROXIES: then it is the rightmost X-Forwarded-For hop that is not a trusted proxy.
Per-address limits (logins, crowd entry) count that address: a client cannot pick its own by
writing the header, and clients behind one trusted proxy are counted apart."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from tests.conftest import csrf_of

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "the client address from the peer and X-Forwarded-For"
)

LOGINS_PER_ADDRESS = 20  # app/auth/views.py


@pytest.fixture
def make_app(db_url, monkeypatch):
    from app.config import get_settings
    from app.main import create_app

    def make(proxies: str = ""):
        monkeypatch.setenv("TRUSTED_PROXIES", proxies)
        get_settings.cache_clear()
        return create_app(db_url)

    yield make
    get_settings.cache_clear()


def attempt(client: TestClient, csrf: str, forwarded: str | None = None) -> int:
    """A failed login for a fresh email (no per-account limit in the way); its status."""
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    r = client.post(
        "/login",
        headers=headers,
        follow_redirects=False,
        data={"email": f"{uuid.uuid4().hex[:8]}@example.org", "password": "wrong-password", "csrf_token": csrf},
    )
    return r.status_code


def test_a_forged_forwarded_for_does_not_escape_the_login_limit(make_app):
    """No trusted proxies (the default): the header is the client's own words, and ignored."""
    with TestClient(make_app(), client=("203.0.113.7", 40000)) as c:
        csrf = csrf_of(c)
        codes = [attempt(c, csrf, forwarded=f"198.51.100.{i}") for i in range(LOGINS_PER_ADDRESS + 1)]
    assert codes[:-1] == [401] * LOGINS_PER_ADDRESS and codes[-1] == 429, codes


def test_an_untrusted_peer_is_the_client_whatever_it_forwards(make_app):
    """A proxy is trusted by its address, not by saying so: another peer's header is ignored."""
    with TestClient(make_app("10.0.0.0/8"), client=("203.0.113.7", 40000)) as c:
        csrf = csrf_of(c)
        codes = [attempt(c, csrf, forwarded=f"198.51.100.{i}") for i in range(LOGINS_PER_ADDRESS + 1)]
    assert codes[-1] == 429, codes


def test_clients_behind_a_trusted_proxy_have_limits_of_their_own(make_app):
    app = make_app("10.0.0.0/8, 192.0.2.1")
    with TestClient(app, client=("10.1.2.3", 40000)) as proxy:
        csrf = csrf_of(proxy)
        first = [attempt(proxy, csrf, forwarded="198.51.100.1") for _ in range(LOGINS_PER_ADDRESS + 1)]
        assert first[:-1] == [401] * LOGINS_PER_ADDRESS and first[-1] == 429, first
        # Another client through the same proxy is counted apart...
        assert attempt(proxy, csrf, forwarded="198.51.100.2") == 401
        # ...but the first cannot come back as someone else by writing a hop of its own in
        # front: the rightmost untrusted hop (the one the proxy appended) is the client, and
        # further trusted proxies (192.0.2.1) are skipped.
        assert attempt(proxy, csrf, forwarded="6.6.6.6, 198.51.100.1") == 429
        assert attempt(proxy, csrf, forwarded="6.6.6.7, 198.51.100.1, 192.0.2.1") == 429


def test_a_wrong_trusted_proxies_entry_stops_the_app(make_app):
    from app.main import InsecureSettings

    with pytest.raises(InsecureSettings, match="TRUSTED_PROXIES: 'proxy.internal'"):
        make_app("10.0.0.1, proxy.internal")


def test_served_as_proctor_serve_serves_it_a_local_client_cannot_forge_its_address(live_server):
    """Through uvicorn with `proctor serve`'s options, from 127.0.0.1 (which uvicorn's own
    proxy handling trusts by default): the forged header still changes nothing."""
    import re

    import httpx

    with httpx.Client(base_url=live_server.url) as c:
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/login").text).group(1)
        codes = [attempt(c, csrf, forwarded=f"198.51.100.{i}") for i in range(LOGINS_PER_ADDRESS + 1)]
    assert codes[-1] == 429, codes
