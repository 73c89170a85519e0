"""Weak SECRET_KEYs the ninth round of issue 26's re-attack found accepted: a clock's reading
written out, hexspeak, and a part repeated just under the repeat rule's share with a typed run
after it. Each is refused with its reason; random keys of the calibration's shapes are not
(tests/integration/test_reattack26_secrets.py runs them through the whole check)."""

import secrets

import pytest

from app.config import weak_secret_key
from app.weak_keys import MAX_GUESSABLE_SHARE, clock_share, hexspeak_share


@pytest.mark.parametrize(
    "key, why",
    [
        ("2026-11-29T10:21:17.123456+00:00-key", "date or a time"),
        ("Sunday, 29 November 2026 10:21:17 UTC", "date or a time"),
        ("29 Nov 2026, 10:21 am - my proctor key", "date or a time"),
        ("20261129T102117Z-19991231T235959Z", "date or a time"),
        ("2026-11-29 2025-10-28 2024-09-27 2023", "date or a time"),
        ("1764411677123-proctor-1764411677123", "date or a time"),  # milliseconds since 1970
        ("deadbeefcafebabefeedface8badf00ddecafbadc0ffee00", "spelling words"),
        ("DEADBEEFCAFEBABEFEEDFACE8BADF00D", "spelling words"),
        ("c0ffee-badc0de-8badf00d-decafbad-x93k", "spelling words"),
        ("supersecretkeysupersecretkey12345678", "repeats parts of itself"),
        ("proctorkeyproctorkeyxqwerty987654", "repeats parts of itself"),
    ],
)
def test_round_nine_weak_keys_are_refused_with_their_reason(key, why):
    assert why in (weak_secret_key(key) or ""), key


def test_the_shares_count_what_is_a_clock_or_hexspeak():
    # 11 of "29 nov 2026 proctor" (19): the day before a month's name, the name, the year and
    # the two spaces between them; "proctor" is neither, nor the space before it.
    assert clock_share("29 nov 2026 proctor") == pytest.approx(11 / 19)
    assert clock_share("2026 nov 29 proctor") == pytest.approx(8 / 19)  # a day after the month: a number
    assert hexspeak_share("deadbeef" + "x" * 8) == 0.5
    assert hexspeak_share("deadbeef-cafebabe") == 1.0  # a separator between two words is theirs
    # Digits beside other digits or letters are not a date or a count of seconds: random digits
    # and hex runs are read as neither.
    assert clock_share("x20261129x") == 0.0
    assert clock_share("91764411677") == 0.0


def test_random_keys_are_far_from_the_guessable_share():
    keys = [secrets.token_hex(16) for _ in range(300)] + [secrets.token_urlsafe(24) for _ in range(300)]
    worst = max(max(clock_share(k), hexspeak_share(k)) for k in keys)
    assert worst < MAX_GUESSABLE_SHARE, worst
