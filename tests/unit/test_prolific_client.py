"""The Prolific API client (app/crowd/prolific_api.py) as made for each call."""

from __future__ import annotations


def test_prolific_clients_share_one_tls_context_and_still_verify(monkeypatch):
    """Each call from a researcher's Prolific page makes a client; loading the CA bundle for
    each took ~30 ms of CPU a call (17% of the Prolific test file). The context is made once
    (per SSL_CERT_FILE / SSL_CERT_DIR) and still verifies certificates and host names."""
    import ssl

    import certifi

    from app.crowd.prolific_api import ProlificClient

    def context(client: ProlificClient) -> ssl.SSLContext:
        return client._http._transport._pool._ssl_context  # type: ignore[attr-defined]

    with ProlificClient("a") as one, ProlificClient("b") as two:
        assert context(one) is context(two)
        assert context(one).verify_mode == ssl.CERT_REQUIRED and context(one).check_hostname
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    with ProlificClient("c") as three:
        assert context(three) is not context(one)
