"""No server with a key anyone could know (issue 10.5): the app, `proctor serve` and
`proctor worker` refuse the example key, no key or a short one; `proctor demo` makes a random
key of its own, once, readable by its owner only, and keeps using it."""

from __future__ import annotations

import os
import stat

import pytest

from app.config import DEFAULT_SECRET_KEY, get_settings
from tests.conftest import untraced, SeededSecrets
from tests.integration.test_cli_demo import run_cli


@pytest.mark.parametrize(
    "key, why",
    [
        (DEFAULT_SECRET_KEY, "SECRET_KEY is not set (or is the example value)"),
        ("change-me-in-production", "SECRET_KEY is not set (or is the example value)"),
        ("short-but-random-Zq8", "SECRET_KEY has 20 characters; it needs at least 32"),
        # Long enough, and no more secret than a short one (issue 26.7).
        ("a" * 37, "SECRET_KEY repeats one short part"),
        ("review-order-" + "k" * 40, "SECRET_KEY looks like about 79 bits of randomness; it needs at least 80"),
    ],
)
def test_the_server_and_the_worker_refuse_a_weak_key(key, why, tmp_path, monkeypatch):
    from app.main import InsecureSettings, create_app

    monkeypatch.setenv("SECRET_KEY", key)
    get_settings.cache_clear()
    try:
        with pytest.raises(InsecureSettings, match="^" + why.replace("(", r"\(").replace(")", r"\)")):
            create_app(f"sqlite:///{tmp_path / 'x.db'}")
    finally:
        get_settings.cache_clear()
    env = {"SECRET_KEY": key, "DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "REDIS_URL": ""}
    serve = run_cli("serve", "--port", "1", env=env)
    assert serve.returncode == 1 and why in serve.stderr and "token_urlsafe" in serve.stderr
    worker = run_cli("worker", env={**env, "REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert worker.returncode == 1 and why in worker.stderr


def test_random_keys_pass_and_patterns_do_not():
    from app.config import key_bits, weak_secret_key

    secrets = SeededSecrets(10)

    assert key_bits("ab" * 16) == 32.0 and key_bits("a" * 40) == 0  # length x bits per character
    with untraced():  # a calibration
        assert all(
            weak_secret_key(f()) is None
            for f in [lambda: secrets.token_hex(16), lambda: secrets.token_urlsafe(24)]
            for _ in range(500)
        )
    assert weak_secret_key("0123456789abcdef" * 3) == "SECRET_KEY repeats one short part; use a random key"
    assert "bits of randomness" in weak_secret_key("passwordpassword" + "x" * 20)


def test_the_demo_makes_a_key_of_its_own_once(tmp_path):
    key_file = tmp_path / "var" / "secret_key"
    # One kind's demo is enough for the key (test_cli_demo.py runs them all; the STS one trains).
    env = {
        "SECRET_KEY": "",
        "SECRET_KEY_FILE": str(key_file),
        "REDIS_URL": "",
        "PROCTOR_KINDS": "tom",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
        "STORAGE_URL": f"file://{tmp_path / 'blobs'}",
    }
    first = run_cli("demo", "--no-serve", env=env)
    assert first.returncode == 0, first.stderr
    key = key_file.read_text().strip()
    assert len(key) >= 32 and stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    again = run_cli("demo", "--no-serve", env=env)
    assert again.returncode == 0, again.stderr
    assert key_file.read_text().strip() == key  # sessions and links stay valid across runs
