"""Re-attack of issue 26.7: SECRET_KEY patterns are refused, not only repeats and few characters.
Found from a fresh clone: `proctor serve` started with "abcdefghijklmnopqrstuvwxyz0123456789"
(186 bits by its characters' frequencies), a keyboard row, "0123456789abcdef" twice and one more
character, or the alphabet in both cases."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from app.config import weak_secret_key
from tests.conftest import ROOT

PATTERNS = [
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "qwertyuiopasdfghjklzxcvbnm1234567890",
    "0123456789abcdef0123456789abcdef0",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "zyxwvutsrqponmlkjihgfedcba9876543210",
    "acegikmoqsuwyacegikmoqsuwy13579bdf",
    # round 2: a word repeated with a change, a keyboard's columns
    "proctorproctorproctorproctorproctor12",
    "changeme-changeme-changeme-changeme-x",
    "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik,9ol.0p;/",
]


@pytest.mark.parametrize("key", PATTERNS)
def test_a_pattern_is_not_a_secret_key(key):
    assert weak_secret_key(key) is not None, key


def test_random_keys_are_never_refused_for_a_run_they_happen_to_hold():
    # token_hex(32) and the suite's own "test-secret-" + token_hex(24) too: a check by
    # compression refused over half of those (hex text compresses), and was taken back.
    for make in (
        lambda: secrets.token_hex(16),
        lambda: secrets.token_hex(32),
        lambda: secrets.token_urlsafe(24),
        lambda: secrets.token_urlsafe(48),
        lambda: "test-secret-" + secrets.token_hex(24),
    ):
        refused = [k for k in (make() for _ in range(2000)) if weak_secret_key(k) is not None]
        assert not refused, refused[:3]


def test_proctor_serve_refuses_a_pattern(tmp_path):
    env = {
        **os.environ,
        "SECRET_KEY": PATTERNS[0],
        "DATABASE_URL": f"sqlite:///{tmp_path / 'p.db'}",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--port", "1"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "SECRET_KEY" in done.stderr + done.stdout
