"""Weak SECRET_KEYs the ninth round of issue 26's re-attack found accepted: a clock's reading
written out, hexspeak, and a part repeated just under the repeat rule's share with a typed run
after it. Each is refused with its reason; random keys of the calibration's shapes are not
(tests/integration/test_reattack26_secrets.py runs them through the whole check). Below, the
re-attack of round 9: encoded and URL-encoded short texts, digests in other encodings, version
6 and name-based UUIDs, words reversed or in ROT13, other layouts' walks and mixed walks, base64
pieces joined."""

import secrets

import pytest

from app.config import weak_secret_key
from app.weak_keys import MAX_GUESSABLE_SHARE, clock_share, hexspeak_share
from tests.conftest import SeededSecrets


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
    secrets = SeededSecrets(9)
    keys = [secrets.token_hex(16) for _ in range(300)] + [secrets.token_urlsafe(24) for _ in range(300)]
    worst = max(max(clock_share(k), hexspeak_share(k)) for k in keys)
    assert worst < MAX_GUESSABLE_SHARE, worst


# The re-attack of round 9 (issue 26): weak keys the checks above still accepted.
def _encodings(text: bytes) -> list[str]:
    import base64

    return [
        base64.b64encode(text).decode(),
        base64.urlsafe_b64encode(text).decode().rstrip("="),
        base64.b32encode(text).decode(),
        base64.b85encode(text).decode(),
        text.hex(),
    ]


@pytest.mark.parametrize(
    "text",
    [
        b"abcdefghijklmnopqrstuvwxyz",
        b"qwertyuiopasdfghjklzxcvbnm",
        b"123456789012345678901234",
        b"2026-11-29T10:40:00+00:00",
        b"mysupersecretkeyforproctor1",
        b"1qaz2wsx3edc4rfv",
        b"passwordpassword",
    ],
)
def test_an_encoded_short_text_gets_the_whole_check_but_the_length_rule(text):
    # 1a: a text of 16-31 characters, encoded, was checked for listed words only.
    for key in _encodings(text):
        if len(key) >= 32:
            assert weak_secret_key(key) is not None, (text, key)


def test_an_encoded_random_password_of_twenty_characters_passes():
    # The length rule is the only one skipped; the rest are per character, so a random text
    # of 20 printable characters, hex-encoded, is as strong as it was.
    import string

    alphabet = string.ascii_letters + string.digits + "!#%&*+-.:;=?@^_~"
    secrets = SeededSecrets(20)
    texts = ["".join(secrets.choice(alphabet) for _ in range(20)).encode() for _ in range(200)]
    refused = [t for t in texts if weak_secret_key(t.hex()) is not None]
    assert not refused, refused[:3]


@pytest.mark.parametrize(
    "hash_, text",
    [("sha224", b"secret"), ("sha384", b"password"), ("blake2b", b"secret"), ("sha3_256", b"secret\n")],
)
def test_a_digest_by_the_other_common_hashes_is_refused_too(hash_, text):
    """Round 13 of issue 26: `sha384sum`, `sha224sum`, `b2sum` (BLAKE2b) and Python's sha3_256
    of "secret" or "password" passed every rule; only md5, sha1, sha256 and sha512 were tried."""
    import base64
    import hashlib

    digest = hashlib.new(hash_, text).digest()
    for key in (digest.hex(), digest.hex().upper(), base64.b64encode(digest).decode()):
        assert f"the {hash_} hash" in (weak_secret_key(key) or ""), key


@pytest.mark.parametrize(
    "hash_, text", [("sha256", b"password"), ("sha512", b"secret"), ("md5", b"admin"), ("sha1", b"proctor")]
)
def test_a_digest_in_any_encoding_is_the_digest(hash_, text):
    # 1b: only padded base64 of a digest was decoded; JWT-style unpadded base64, base32 and
    # base85 now are too, by the decoding the encodings check uses.
    import base64
    import hashlib

    digest = hashlib.new(hash_, text).digest()
    for key in (
        base64.b64encode(digest).decode().rstrip("="),
        base64.urlsafe_b64encode(digest).decode().rstrip("="),
        base64.b32encode(digest).decode(),
        base64.b85encode(digest).decode(),
    ):
        if len(key) >= 32:
            assert f"the {hash_} hash" in (weak_secret_key(key) or ""), key


@pytest.mark.parametrize(
    "key",
    [
        "1ef0ad3a-63c4-6a1e-b2a0-0242ac120002",  # 1d: version 6 is version 1's clock and address reordered
        "1EF0AD3A-63C4-6A1E-B2A0-0242AC120002",
    ],
)
def test_a_version_6_uuid_is_refused_as_version_1_is(key):
    assert "time-based" in (weak_secret_key(key) or ""), key


@pytest.mark.parametrize(
    "key",
    [
        "my%20super%20secret%20proctor%20key%202026",
        "".join("%%%02X" % b for b in b"letmein!2026"),  # every character escaped
        "%71%77%65%72%74%79uiop%61%73%64%66",  # qwertyuiopasdf
    ],
)
def test_a_url_encoded_text_is_checked_as_the_text(key):
    # 1i: %XX escapes broke the words apart; the unquoted text gets every rule but the length.
    assert "once URL-decoded" in (weak_secret_key(key) or ""), key


@pytest.mark.parametrize(
    "key",
    [
        "godyzalehtrevospmujxofnworbkciuqeht",  # 1f: the pangram reversed
        "gurdhvpxoebjasbkwhzcfbiregurynmlqbt",  # and in ROT13
        "cnffjbeqfrpergnqzvayrgzrvaqentba",  # password secret admin letmein dragon, ROT13
        "nimdadrowssapterces_nogard_niemtel",  # listed words reversed
    ],
)
def test_english_reversed_or_in_rot13_is_english(key):
    assert "English words" in (weak_secret_key(key) or ""), key


def test_unlisted_words_reversed_or_in_rot13_read_as_english():
    import codecs

    text = "purpleelephantsjuggleseventeenmarshmallows"  # 4.0 bits a letter turned back
    for key in (text[::-1], codecs.encode(text, "rot13")):
        assert "reads as English" in (weak_secret_key(key) or ""), key


@pytest.mark.parametrize(
    "key",
    [
        "pyfgcrlaoeuidhtnsqjkxbmwvzpyfgcrlaoe",  # 1e: Dvorak's letter rows
        "qwfpgjluyarstdhneiozxcvbkmqwfpgjluy",  # Colemak's
        "lrcgfypsnthdiueoazvwmbxkjq0987654321",  # Dvorak's backwards
    ],
)
def test_walks_along_dvorak_and_colemak_rows_are_patterns(key):
    assert "bits of randomness" in (weak_secret_key(key) or ""), key


@pytest.mark.parametrize(
    "key",
    [
        "Qw3rTy!uIoP@aSdF#gHjK$lZxC%vBnM^",  # 1j: a QWERTY walk, capitals, leet and symbols mixed in
        "q1w2e3r4t5y6u7i8o9p0a!s@d#f$g%h^j&k*l(",
        "p-y-f-g-c-r-l-a-o-e-u-i-d-h-t-n-s-7-x",  # Dvorak's, separated
    ],
)
def test_a_keyboard_walk_with_other_characters_mixed_in_is_a_walk(key):
    assert "bits of randomness" in (weak_secret_key(key) or ""), key


def test_a_name_based_uuid_of_a_listed_word_is_refused():
    # 1d: a version 3 or 5 UUID is md5 or sha1 of a namespace and a name: of a listed word or
    # key name it is guessed as the digests are; of an unlisted name it is not told apart.
    import uuid

    for make in (uuid.uuid3, uuid.uuid5):
        for ns in (uuid.NAMESPACE_DNS, uuid.NAMESPACE_URL):
            for name in ("proctor", "secret", "password"):
                assert "UUID" in (weak_secret_key(str(make(ns, name))) or ""), (make, ns, name)
            assert "UUID" in (weak_secret_key(make(ns, "proctor").hex) or "")
    assert weak_secret_key(str(uuid.uuid5(uuid.NAMESPACE_DNS, secrets.token_hex(8)))) is None


@pytest.mark.parametrize(
    "key",
    [
        "YWRtaW4=cGFzc3dvcmQ=c2VjcmV0cHJvY3Rvcg==",  # 1c: admin, password, secretproctor
        "cGFzc3dvcmRwYXNzd29yZA==cGFzc3dvcmQ=",  # password three times
    ],
)
def test_base64_pieces_joined_are_decoded_piece_by_piece(key):
    assert "once decoded" in (weak_secret_key(key) or ""), key
