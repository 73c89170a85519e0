"""Re-attack of issue 26.7: SECRET_KEY patterns are refused, not only repeats and few characters.
Found from a fresh clone: `proctor serve` started with "abcdefghijklmnopqrstuvwxyz0123456789"
(186 bits by its characters' frequencies), a keyboard row, "0123456789abcdef" twice and one more
character, or the alphabet in both cases."""

from __future__ import annotations

import base64
import hashlib
import os
import string
import subprocess
import sys

import pytest

from app.config import weak_secret_key
from tests.conftest import ROOT, untraced, SeededSecrets

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
    # round 4: four and five runs woven together; a counter's bytes in base64 and in hex
    "".join(map("".join, zip("abcdefghijklm", "0123456789012", "qwertyuiopasd", "NOPQRSTUVWXYZ"))),
    "".join(map("".join, zip("abcdefghij", "0123456789", "qwertyuiop", "ABCDEFGHIJ", "zyxwvutsrq"))),
    base64.b64encode(b"".join(i.to_bytes(4, "big") for i in range(10))).decode(),
    base64.urlsafe_b64encode(b"".join(i.to_bytes(4, "big") for i in range(10))).decode(),
    b"".join(i.to_bytes(2, "big") for i in range(20)).hex(),
    # round 5: a counter of single bytes (every byte different) in base64 and base32, 2-byte
    # counters in base32, numbers counting written out, keyboard walks with shift held, and
    # half the key one character
    base64.b64encode(bytes(range(48))).decode(),
    base64.b64encode(bytes(range(0, 144, 3))).decode(),
    base64.urlsafe_b64encode(bytes(range(200, 248))).decode(),
    base64.b32encode(bytes(range(20))).decode(),
    base64.b32encode(b"".join(i.to_bytes(2, "big") for i in range(12))).decode(),
    "1234567891011121314151617181920212223242526272829",
    "0246810121416182022242628303234363840424446485052545658",
    ",".join(str(i) for i in range(1, 25)),
    '!@#$%^&*()_+QWERTYUIOP{}|ASDFGHJKL:"ZXCVBNM<>?',
    "!QAZ@WSX#EDC$RFV%TGB^YHN&UJM*IK<(OL>)P:?",
    "0" * 16 + "1b3886f4f9467e5b",
    # round 6: common English words run together or spaced, the digits of pi, a counter's
    # bytes in base85 and Ascii85
    "correcthorsebatterystaplecorrecthorse",
    "correct horse battery staple forever",
    "CorrectHorseBatteryStapleBlueSky",
    "thequickbrownfoxjumpsoverthelazydog",
    "iloveyoumorethanwordscansaytoday",
    "31415926535897932384626433832795028841971",
    "3.1415926535897932384626433832795028841971",
    base64.b85encode(bytes(range(40))).decode(),
    base64.b85encode(b"".join(i.to_bytes(2, "big") for i in range(20))).decode(),
    base64.a85encode(bytes(range(40))).decode(),
    base64.b64encode(b"correcthorsebatterystaple!!").decode(),  # words, shorter than a key, encoded
    # round 7: e and other constants' digits, words in leetspeak, words outside the list, a
    # hash's hex digest of a word (with echo's newline too) or of a number
    "27182818284590452353602874713526624977572470",
    "2.718281828459045235360287471352662497757247",
    "14142135623730950488016887242096980785696718",
    "16180339887498948482045868343656381177203091",
    "p4ssw0rd-s3cr3t-dr4g0n-m0nk3y-l3tm31n",
    "P@ssw0rdS3cr3tDr@g0nM0nk3yW3lc0m3",
    "purple elephants juggle seventeen marshmallows",
    "PurpleElephantsJuggleSeventeenMarshmallows",
    "c0rr3ctH0rs3B4tt3ryS74pl3F0r3v3r",
    hashlib.sha256(b"password").hexdigest(),
    hashlib.sha256(b"password\n").hexdigest(),
    hashlib.sha256(b"Proctor").hexdigest().upper(),
    hashlib.md5(b"secret").hexdigest(),
    hashlib.sha1(b"admin123").hexdigest(),
    hashlib.sha512(b"1234").hexdigest(),
    hashlib.sha256(b"dragon").hexdigest()[:40],
]


@pytest.mark.parametrize("key", PATTERNS)
def test_a_pattern_is_not_a_secret_key(key):
    assert weak_secret_key(key) is not None, key


def test_random_keys_are_never_refused_for_a_run_they_happen_to_hold():
    secrets = SeededSecrets(26)
    # token_hex(32) and the suite's own "test-secret-" + token_hex(24) too: a check by
    # compression refused over half of those (hex text compresses), and was taken back.
    for make in (
        lambda: secrets.token_hex(16),
        lambda: secrets.token_hex(32),
        lambda: secrets.token_urlsafe(24),
        lambda: secrets.token_urlsafe(48),
        lambda: "test-secret-" + secrets.token_hex(24),
        lambda: base64.b64encode(secrets.token_bytes(24)).decode(),  # decoded: 24 random bytes
        lambda: base64.b32encode(secrets.token_bytes(20)).decode(),
        lambda: "".join(secrets.choice("0123456789") for _ in range(40)),  # digits: never "counting"
        lambda: "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)") for _ in range(50)),
        # round 6: letters only (words by chance), base85 of random bytes
        lambda: "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(32)),
        lambda: base64.b85encode(secrets.token_bytes(32)).decode(),
        lambda: base64.a85encode(secrets.token_bytes(32)).decode(),
        # punctuation only: a separator costs a bit only after the same one (the review's 31%)
        lambda: "".join(secrets.choice("!@#$%^&*()-_=+[]{};:,.") for _ in range(40)),
        lambda: "".join(secrets.choice(string.punctuation) for _ in range(32)),
        # round 7: letters of both cases (the letter-pair model reads them as English text)
        lambda: "".join(secrets.choice(string.ascii_letters) for _ in range(32)),
    ):
        # 500 a shape (~3 ms a key): a shape refused 1% of the time fails here 99 times in 100;
        # the calibration itself, 20,000 a shape, is in docs/security.md.
        with untraced():
            refused = [k for k in (make() for _ in range(500)) if weak_secret_key(k) is not None]
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
