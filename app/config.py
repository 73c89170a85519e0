"""All settings in one place; every process reads the same environment variables."""

from __future__ import annotations

import math
import os
import re
from collections import Counter

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

from app.weak_keys import (
    MAX_ENGLISH_BITS,
    MAX_TURNED_ENGLISH_BITS,
    MAX_GUESSABLE_SHARE,
    MAX_WORD_BITS_PER_CHAR,
    MIN_PASSPHRASE_BITS,
    clock_share,
    constant_in,
    decoded,
    english_bits,
    hash_of_a_guess,
    hexspeak_share,
    name_uuid_of_a_guess,
    passphrase_bits,
    turned,
    word_bits,
)

ROOT = Path(__file__).resolve().parent.parent


DEFAULT_SECRET_KEY = "dev-only-change-me"
MIN_SECRET_KEY = 32
# key_bits of token_hex(16), the weakest random key of 32 characters: 100-120 as a rule, but the
# lowest of 300,000 draws 88.8, and a CI run drew one of 87.1 (90 was the floor then); 80 leaves
# room for that tail while "review-order-" + "k" * 40 (79) and words stay under it.
MIN_SECRET_BITS = 80


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", env_file=".env", extra="ignore")

    database_url: str = f"sqlite:///{ROOT / 'var' / 'proctor.db'}"
    # Connections per process, in two pools with no overflow (a busy server reuses connections
    # rather than opening new ones; a request waits for a free one, at most db_pool_timeout
    # seconds, then is answered 503 with Retry-After). The ORM's: the researchers' pages, jobs
    # and the crowd's rarer cases; a request holds its connection for its whole length there.
    db_pool_size: int = 20
    # The crowd hot path's (app/studies/hotpath.py): a statement holds a connection for 1-3 ms,
    # so by Little's law a process keeps under one busy on average; 10 absorbs bursts. Per web
    # process at most db_pool_size + db_hot_pool_size: keep N x that under PostgreSQL's
    # max_connections (docs/benchmarks.md, "Connections").
    db_hot_pool_size: int = 10
    db_pool_timeout: float = 30
    # SQLite's wait for the disk (PRAGMA synchronous, in WAL mode): "full" writes each commit
    # through before it is acknowledged, so no acknowledged answer is lost even to a power cut;
    # "normal" may lose the commits since the last checkpoint to a power cut (never to a crash
    # of the process; the file stays whole), and skips a flush per commit (the demo's seed
    # took a fifth longer with them). For rows made to be thrown away: `proctor demo` and the
    # tests use it.
    sqlite_synchronous: Literal["full", "normal"] = "full"
    # PostgreSQL that takes connections and never answers (stopped with SIGSTOP, a hung host
    # behind a proxy): a new connection, its TLS and login included, is given this long, then
    # the request is answered 503 (psycopg's own default is 130 s, libpq's none). libpq reads
    # at least 2.
    db_connect_timeout_s: int = 10
    # A server gone from the network (its host down, a partition) while a statement waits:
    # TCP keepalives probe an idle connection after db_keepalive_idle_s, and data or probes
    # unacknowledged for db_tcp_user_timeout_s end it (libpq's keepalives_* and
    # tcp_user_timeout). A live host acknowledges for a frozen server, so neither cuts a long
    # query, nor bounds a server process that stopped answering (docs/security.md).
    db_keepalive_idle_s: int = 10
    db_tcp_user_timeout_s: int = 30
    # Empty means the embedded default: jobs run in a thread of the web process.
    redis_url: str = ""
    storage_url: str = f"file://{ROOT / 'var' / 'blobs'}"
    s3_endpoint_url: str = ""
    s3_access_key: str = ""
    s3_secret_key: str = ""
    s3_region: str = "us-east-1"
    secret_key: str = DEFAULT_SECRET_KEY
    # Where `proctor demo` keeps the random key it makes when SECRET_KEY is not set.
    secret_key_file: str = str(ROOT / "var" / "secret_key")
    # Upload limit for CSV/JSONL imports (bytes, after decompression).
    max_upload_bytes: int = 50 * 1024 * 1024
    # Values (JSON items and keys, CSV cells) one uploaded file may hold: each is a Python
    # object when read, and a 50 MB file of `[],[],...` decoded to 1.2 GB. The largest released
    # file, Hexagons' train.jsonl, holds 719,470; at 2,000,000 an upload holds some 120 MB.
    max_upload_values: int = 2_000_000
    # Upload limit for agent artifacts (TorchScript archives, safetensors weights), in bytes.
    max_artifact_bytes: int = 200 * 1024 * 1024
    # An uploaded model's own process (workers/sandbox.py): CPU seconds for its whole life,
    # address space in MB (on the CPU), seconds one call may take.
    sandbox_cpu_seconds: int = 3600
    sandbox_memory_mb: int = 6144
    sandbox_call_seconds: int = 300
    # The longest a background job may run (a Celery soft time limit), in seconds.
    job_time_limit_s: int = 6 * 3600
    # Requests per minute per client on crowd entry and submit.
    rate_limit_entry: int = 60
    rate_limit_submit: int = 600
    # The prefix of the limiter's keys in Redis (deployments sharing one Redis keep theirs apart).
    rate_limit_namespace: str = "proctor"
    # Where workers reach the server (e.g. https://proctor.example.org), for the study page's
    # entry links; empty: the scheme, host and port each request came by.
    base_url: str = ""
    # Proxies (comma-separated IPs or CIDRs) whose X-Forwarded-For / -Proto / -Host are
    # believed; empty: none, and the client is the peer of the connection.
    trusted_proxies: str = ""
    # The level of the one-line request log ("proctor.requests"): INFO logs every request,
    # WARNING only those the server failed (5xx), ERROR none.
    log_level: str = "INFO"
    # Prolific's API (app/crowd/prolific_api.py): its address (a local fake's in tests) and how
    # long one call may take, in seconds.
    prolific_api_url: str = "https://api.prolific.com/api/v1"
    prolific_timeout_s: float = 30


@lru_cache
def get_settings() -> Settings:
    return Settings()


def ensure_local_dirs() -> None:
    """The SQLite file's folder and the local blob folder, made if missing."""
    s = get_settings()
    if s.database_url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(s.database_url.removeprefix("sqlite:///")) or ".", exist_ok=True)
    if s.storage_url.startswith("file://"):
        os.makedirs(s.storage_url.removeprefix("file://"), exist_ok=True)


def trusted_proxies(settings: Settings | None = None) -> list[str]:
    """TRUSTED_PROXIES as a list of addresses and networks. A wrong entry stops the server
    (uvicorn's parser would take it as a name no peer ever has, silently)."""
    import ipaddress

    out = []
    for item in (settings or get_settings()).trusted_proxies.split(","):
        if not (item := item.strip()):
            continue
        try:
            out.append(
                str(ipaddress.ip_network(item, strict=False)) if "/" in item else str(ipaddress.ip_address(item))
            )
        except ValueError:
            raise ValueError(
                f"TRUSTED_PROXIES: {item!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/8)"
            ) from None
    return out


def weak_secret_key(key: str) -> str | None:
    """Why a SECRET_KEY must not sign sessions and download links, or None if it may: it signs
    every cookie and link, so a known or short one lets anyone forge an admin's session."""
    if not key or key == DEFAULT_SECRET_KEY or key.startswith("change-me"):
        return "SECRET_KEY is not set (or is the example value)"
    if len(key) < MIN_SECRET_KEY:
        return f"SECRET_KEY has {len(key)} characters; it needs at least {MIN_SECRET_KEY}"
    # Hex a byte at a time ("91:32:61:...", a fingerprint's or xxd's layout) is read as the hex
    # it is (round 17 of issue 26): two digits and a separator carry 8 bits in 3 characters,
    # under the word rule's floor a character, and "08:45" reads as a time; 3 to 5% of random
    # ones were refused. Round 18: as od writes it too (a space before the first byte, a line
    # of 16 a line) and a hexdump format ("%02x:", a separator after the last): 7 to 8% were.
    bytewise = re.sub(r"\s+", " ", key.strip()).rstrip("-:")
    if _HEX_BYTES.fullmatch(bytewise):
        key = re.sub("[-: ]", "", bytewise)
    return weak_pattern(key)


def weak_pattern(key: str) -> str | None:
    """Why a text is a pattern, words or something guessable, or None: every rule of
    weak_secret_key but the length. A text decoded from a key (hex, base64, %XX escapes) may be
    shorter than a key; the randomness floors, set for 32 characters, are taken per character
    for a shorter one (a random text of 20 characters passes as a random key of 32 does)."""
    if key in (key + key)[1:-1]:  # one unit repeated ("a" x 37, "abc" x 12)
        return "SECRET_KEY repeats one short part; use a random key"
    scale = min(1.0, len(key) / MIN_SECRET_KEY)
    if (
        (bits := key_bits(key)) < MIN_SECRET_BITS * scale
        or (bits := min(pattern_bits(key, layout) for layout in (_NEXT, *_OTHER_LAYOUTS))) < MIN_PATTERN_BITS * scale
        or (bits := interleaved_bits(key)) < MIN_INTERLEAVED_BITS * scale
        or (bits := interleaved_bits(key, (4, 5))) < MIN_WOVEN_BITS * scale
        or (bits := letter_walk_bits(key)) < MIN_WALK_BITS
    ):
        return (
            f"SECRET_KEY looks like about {math.floor(bits)} bits of randomness; it needs at least "
            f"{math.ceil(MIN_SECRET_BITS * scale)}: use a random key, not words or a pattern"
        )
    # A part repeated with a change ("proctor" x 5 + "12", sixteen 0s and 16 random digits),
    # or with a run typed after it ("supersecretkey" twice and "12345678"): much of it is copies
    # of what came before it or runs along a row. A random key's copies are chance runs of 4
    # or 5 characters (a few percent of it).
    if repeated_share(key) + run_share(key) >= MAX_REPEATED_SHARE:
        return "SECRET_KEY repeats parts of itself; use a random key"
    if counting(key):
        return "SECRET_KEY counts (1, 2, 3... or 0, 2, 4...); use a random key"
    # Words reversed or in ROT13 cost a guesser two tries more: the key is read each way. Words
    # drawn from a passphrase list are as strong as their draws, however English they read.
    drawn = passphrase_bits(key) >= MIN_PASSPHRASE_BITS
    if not drawn and min(map(word_bits, (key, *turned(key)))) < MAX_WORD_BITS_PER_CHAR * len(key):
        return "SECRET_KEY is mostly common English words (maybe reversed or in ROT13); use a random key"
    # The turned keys only where the key has letters enough.
    if not drawn and (english := english_bits(key)) is not None:
        turned_english = min((b for k in turned(key) if (b := english_bits(k)) is not None), default=math.inf)
        if english < MAX_ENGLISH_BITS or turned_english < MAX_TURNED_ENGLISH_BITS:
            return "SECRET_KEY reads as English words, or pronounceable made-up ones; use a random key"
    if clock_share(key) >= MAX_GUESSABLE_SHARE:
        return "SECRET_KEY is mostly a date or a time (guessable to the day); use a random key"
    if hexspeak_share(key) >= MAX_GUESSABLE_SHARE:
        return "SECRET_KEY is mostly hex digits spelling words (deadbeef, cafebabe...); use a random key"
    if constant := constant_in(key):
        return f"SECRET_KEY is digits of {constant}; use a random key"
    if not drawn and (what := placeholder(key)):  # "example" and "replace" are drawn words too
        return f"SECRET_KEY is {what}; use a random key"
    if hash_ := hash_of_a_guess(key):
        return f"SECRET_KEY is the {hash_} hash of a word or a common text; use a random key"
    return _weak_encoding(key) or _weak_escapes(key)


MAX_REPEATED_SHARE = 0.4

# Texts a key is set to by mistake (round 8 of issue 26's re-attack): a template's placeholder, or a
# command that was meant to make the key but was pasted instead of run. Long enough that a random
# key never holds one (the suite's shapes: none of 20,000 each).
_PLACEHOLDERS = (
    "your-", "your_", "<your", "yoursecret", "insecure", "placeholder", "replace-", "replace_",
    "replaceme", "changeme", "change_me", "change-me", "${secret", "$(openssl", "$(python", "$(head",
    "python -c", "python3 -c", "openssl rand", "secrets.token", "token_hex(", "token_urlsafe(",
    "not-for-production", "do-not-use", "example",
    # A key that names itself (round 16 of issue 26: "acme_corp_prod_secret_key_2026_q4" passed):
    # the rest is a name, a place and a date, as guessable as a placeholder.
    "secret_key", "secret-key", "secretkey", "secret key", "secret.key",
)  # fmt: skip
# A UUID of version 1, 2 or 6 (1's fields reordered) is its clock's time and the machine's
# network address; the nil and max UUIDs are constants. Version 4 (random, 122 bits) is fine.
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-(?:[126][0-9a-f]{3}-[0-9a-f]{4}|0000-0000|ffff-ffff)-[0-9a-f]{12}"


def placeholder(key: str) -> str | None:
    """What a key set by mistake is, or None."""

    # The published key first: "SECRET_KEY=" + one (round 16's "secret_key") is that key.
    if where := _published(key):
        return f"the example key printed in {where}, which is public, not secret"
    low = key.lower()
    if any(p in low for p in _PLACEHOLDERS):
        return "a placeholder or a command, not its output"
    if len("".join(re.findall(_UUID, low))) * 2 >= len(key):
        return "a time-based or constant UUID (its clock's time and the machine's address)"
    if name_uuid_of_a_guess(key):
        return "a name-based UUID (version 3 or 5) of a word or a common key name"
    if _network_address(key):
        return "a network address (IPv6 written out is 39 characters), which is public, not secret"
    return None


# Keys a framework's documentation prints as what a random key looks like, copied from there
# into thousands of projects (round 12 of issue 26's re-attack: each passed every rule, random
# as they are). A quarter of one (16 hex digits) in a key is a copy, maybe edited (one found
# online ends "...bcb1"): a random key holds a given 16 hex digits once in some 10^17.
_PUBLISHED_KEYS = {
    "09d25e094faa6ca2556c818166b7a9563b93f7099f6f0f4caa6cf63b88e8d3e7": "FastAPI's security tutorial",
    "192b9bdd22ab9ed4d12e236c78afcb9a393ec15f71bbf5dc987d54727823bcbf": "Flask's documentation",
    # Round 15: the private keys of Hardhat's and Anvil's first development accounts, printed by
    # `npx hardhat node`, `anvil` and every Ethereum tutorial.
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80": "Hardhat's and Anvil's list of development accounts",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d": "Hardhat's and Anvil's list of development accounts",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a": "Hardhat's and Anvil's list of development accounts",
}
_PUBLISHED_PART = 16


def _published(key: str) -> str | None:
    """Where the example key the key copies (in part) was printed, or None."""
    low = key.lower()
    for published, where in _PUBLISHED_KEYS.items():
        parts = (published[i : i + _PUBLISHED_PART] for i in range(0, len(published), _PUBLISHED_PART))
        if any(part in low for part in parts):
            return where
    return None


def _network_address(key: str) -> bool:
    """Whether the key is an IP address or network (round 11 of issue 26's re-attack: the
    documentation's "2001:0db8:85a3:0000:0000:8a2e:0370:7334" passed every rule)."""
    import ipaddress

    try:
        ipaddress.ip_interface(key.strip().strip("[]"))
    except ValueError:
        return False
    return True


def counting(key: str) -> bool:
    """Whether the key is numbers counting by a step, written out: with separators ("1,2,3")
    or run together ("123456789101112", "02468101214"), from any start."""

    numbers = [int(n) for n in re.findall(r"\d+", key)]
    if len(numbers) >= 6 and sum(map(len, re.findall(r"\d+", key))) >= 0.5 * len(key):
        if len({b - a for a, b in zip(numbers, numbers[1:])}) == 1:
            return True
    if not key.isdigit():
        return False
    for first in range(1, 7):  # the first number's digits, then the second's
        for second in (first, first + 1):
            a, b = int(key[:first]), int(key[first : first + second] or 0)
            if b <= a or key[first] == "0":
                continue
            written, n = "", a
            while len(written) < len(key):
                written += str(n)
                n += b - a
            if written.startswith(key):
                return True
    return False


# decoded_share of random bytes: 0.64 and up (20,000 token_hex(16), the lowest of eight shapes:
# docs/security.md); a counter's bytes, or
# a counter's steps, 0.3 or less.
MIN_DECODED_SHARE = 0.5


def _weak_encoding(key: str) -> str | None:
    """A key that is hex or base64 of something: what it decodes to must be as random (a
    counter's bytes, or a weak text encoded, are a pattern however the encoding spreads them).
    Read bare and out of what wraps it ("0x", "base64:", quotes): "0x" + hex is base64 too."""
    for form in _unwrapped(key):
        data = _joined_base64(form) or decoded(form)
        if data is None:
            continue
        if data.isascii() and data.decode("ascii").isprintable():
            # 16 or more printable characters come from random bytes once in some 10^7 draws:
            # this is a text someone encoded, as weak as the text (of any length it decodes to).
            if (why := weak_pattern(data.decode("ascii"))) is not None:
                return f"{why.removesuffix('; use a random key')} once decoded from hex or base64; use a random key"
        elif decoded_share(data) < MIN_DECODED_SHARE:
            return "SECRET_KEY decodes (hex, base32, base64 or base85) to bytes that repeat themselves or count; use a random key"
    return None


# What an encoded key is often written inside (issue 26, round 16: each passed where the bare
# encoding was refused): quotes (an env file read as it stands), a name before ":" or "="
# (Laravel's "base64:...", "hex:...", "SECRET_KEY=..." pasted whole), "0x", and hex written in
# groups ("74686973-20697320-...").
_KEY_PREFIX = re.compile(r"^(?:0[xX]|[A-Za-z][A-Za-z0-9_]{0,19}[:=])")
_HEX_GROUPS = re.compile(r"[0-9a-fA-F]+(?:[-: ][0-9a-fA-F]+)+")
_HEX_BYTES = re.compile(r"[0-9a-fA-F]{2}(?:([-: ])[0-9a-fA-F]{2})(?:\1[0-9a-fA-F]{2})+")


def _unwrapped(key: str) -> list[str]:
    """The key, then the encoding inside what wraps it (quotes, a prefix, groups), if any."""
    inner = key[1:-1] if len(key) > 2 and key[0] == key[-1] and key[0] in "'\"" else key
    inner = _KEY_PREFIX.sub("", inner)
    if _HEX_GROUPS.fullmatch(inner):
        inner = re.sub("[-: ]", "", inner)
    return [key, inner] if inner != key else [key]


def _joined_base64(key: str) -> bytes | None:
    """The bytes of base64 pieces joined, each with its padding ("YWRtaW4=cGFzc3dvcmQ="), or
    None: only a text's (printable), at least 16 bytes. Random keys of base64 never hold a "="
    but at their end; base85's that do decode piecewise to printable text once in 10^7."""
    import base64
    import binascii

    pieces = re.findall(r"[A-Za-z0-9+/_-]+={0,2}", key)
    if len(pieces) < 2 or "".join(pieces) != key or not all(p.endswith("=") for p in pieces[:-1]):
        return None
    try:
        data = b"".join(
            base64.b64decode(p.replace("-", "+").replace("_", "/") + "=" * (-len(p) % 4), validate=True) for p in pieces
        )
    except (ValueError, binascii.Error):
        return None
    return data if len(data) >= 16 and data.isascii() and data.decode("ascii").isprintable() else None


def _weak_escapes(key: str) -> str | None:
    """A URL-encoded text ("my%20secret%20key", "%6C%65%74..."): as weak as the text. Two
    escapes at least: a random key of printable characters holds one by chance (2% of 32)."""
    from urllib.parse import unquote_to_bytes

    if len(re.findall("%[0-9a-fA-F]{2}", key)) < 2:
        return None
    try:
        text = unquote_to_bytes(key.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.isprintable() and (why := weak_pattern(text)) is not None:
        return f"{why.removesuffix('; use a random key')} once URL-decoded; use a random key"
    return None


def decoded_share(data: bytes) -> float:
    """How random bytes look, 0 to 1: key_bits of them and of the steps between them, as a share
    of the most their number allows, the lowest over the bytes taken 1, 2, 3 or 4 apart (a
    counter of 2-byte numbers is zeros every other byte) and averaged over where each starts."""

    def share(part: bytes) -> float:
        n = len(part)
        return key_bits(part.decode("latin-1")) / (n * math.log2(min(n, 256))) if n > 1 else 1.0

    def steps(part: bytes) -> bytes:
        return bytes((b - a) % 256 for a, b in zip(part, part[1:]))

    return min(
        sum(min(share(p), share(steps(p))) for p in parts) / len(parts)
        for parts in ([data[i::apart] for i in range(apart)] for apart in (1, 2, 3, 4))
    )


def repeated_share(key: str, shortest: int = 4, longest_key: int = 256) -> float:
    """The share of the key (its first `longest_key` characters) that repeats an earlier part of
    it, counting copies of `shortest` or more characters: 28 of 37 in "proctor" x 5 + "12"."""
    key = key[:longest_key]
    n, i, covered = len(key), 1, 0
    while i < n:
        best = 0
        for j in range(i):
            k = 0
            while i + k < n and key[j + k] == key[i + k]:
                k += 1
            best = max(best, k)
        if best >= shortest:
            covered, i = covered + best, i + best
        else:
            i += 1
    return covered / n if n else 0.0


def key_bits(key: str) -> float:
    """An upper estimate of a key's randomness: its length times the Shannon entropy of its
    characters' frequencies. Random keys score near their true value (token_urlsafe(48): about
    340; token_hex(16): about 115); a key of few distinct or very uneven characters scores low."""
    n = len(key)
    return -n * sum(c / n * math.log2(c / n) for c in Counter(key).values())


# Runs a person types or counts (either way, any case): each run counts as one character.
_SEQUENCES = (
    "abcdefghijklmnopqrstuvwxyz",
    "0123456789",
    "1234567890",
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
    # and down a keyboard's columns ("1qaz2wsx...")
    "1qaz",
    "2wsx",
    "3edc",
    "4rfv",
    "5tgb",
    "6yhn",
    "7ujm",
    "8ik,",
    "9ol.",
    "0p;/",
    # and down them without the digits, each column from its top (round 8: "qazwsxedc...")
    "qazwsxedcrfvtgbyhnujmikolp",
    # the same with shift held (lower case: keys are compared lower-cased)
    "!@#$%^&*()_+",
    "qwertyuiop{}|",
    'asdfghjkl:"',
    "zxcvbnm<>?",
    "!qaz",
    "@wsx",
    "#edc",
    "$rfv",
    "%tgb",
    "^yhn",
    "&ujm",
    "*ik<",
    "(ol>",
    ")p:?",
)
_FORWARD = {(s[i], s[i + 1]) for s in _SEQUENCES for i in range(len(s) - 1)}
_NEXT = frozenset(_FORWARD | {(b, a) for a, b in _FORWARD})


def _neighbours(*rows: str) -> frozenset[tuple[str, str]]:
    """Pairs of characters next to each other along the alphabet, the digits or the rows."""
    forward = {(s[i], s[i + 1]) for s in ("abcdefghijklmnopqrstuvwxyz", "1234567890", *rows) for i in range(len(s) - 1)}
    return frozenset(forward | {(b, a) for a, b in forward})


# The letter rows of Dvorak and Colemak (round 9 of the re-attack), read one layout at a time: a
# random key's chance runs along three layouts at once would be three layouts' worth.
_OTHER_LAYOUTS = (
    _neighbours("',.pyfgcrl/=", "aoeuidhtns-", ";qjkxbmwvz", "<>pyfgcrl?+", "aoeuidhtns_", ":qjkxbmwvz"),
    _neighbours("qwfpgjluy;[]", "arstdhneio'", "zxcvbkm,./", "qwfpgjluy:{}", 'arstdhneio"', "zxcvbkm<>?"),
)
RUN = 4  # runs of 3 come by chance in a random hex key
# pattern_bits of keys that are a pattern: 2 to 20; of token_hex(16): 76 and up (lowest of 100,000
# draws), so a random key of 32 characters is never refused for a run it happens to hold.
MIN_PATTERN_BITS = 60


def run_share(key: str, shortest: int = 6) -> float:
    """The share of the key in runs of `shortest` or more along the alphabet, the digits or a
    keyboard row, either way ("12345678", "qwerty", "9876543"); shorter ones, and zigzags
    ("545454"), come by chance in random digits."""
    low, covered = key.lower(), set[int]()
    for pairs in (_FORWARD, {(b, a) for a, b in _FORWARD}):
        start = 0
        for i in range(1, len(key) + 1):
            if i < len(key) and (low[i - 1], low[i]) in pairs:
                continue
            if i - start >= shortest:
                covered.update(range(start, i))
            start = i
    return len(covered) / len(key) if key else 0.0


def pattern_bits(key: str, neighbours: frozenset[tuple[str, str]] = _NEXT) -> float:
    """key_bits of the key with what frequencies miss taken out: runs of RUN or more along the
    alphabet, the digits or a keyboard row ("abcdef...", "qwerty...", "9876") count as their
    first character, and the steps between neighbouring characters must vary as much (a constant step, or a
    pattern repeated with a change, scores low). A random key loses little (token_hex(16):
    runs of 4 are rare, its steps as varied as its characters)."""
    low = key.lower()
    kept: list[str] = []
    start = 0
    for i in range(1, len(key) + 1):
        if i < len(key) and (low[i - 1], low[i]) in neighbours:
            continue
        run = key[start:i]  # a maximal run along a sequence (or one character)
        kept += run[:1] if len(run) >= RUN else run
        start = i
    steps = [ord(b) - ord(a) for a, b in zip(key, key[1:])]
    n = len(steps)
    step_bits = -n * sum(c / n * math.log2(c / n) for c in Counter(steps).values()) if n else 0.0
    return min(key_bits("".join(kept)), step_bits)


# interleaved_bits of counters and interleaved runs: 0 to 10; of token_hex(16): 52 and up (lowest
# of 200,000 draws; token_urlsafe(24): 63 of 50,000).
MIN_INTERLEAVED_BITS = 30


# interleaved_bits(key, (4, 5)) of four or five runs woven together: 0 to 8; of token_hex(16): 40
# and up (lowest of 100,000 draws; token_urlsafe(24) 44, base64 of 24 bytes 46).
MIN_WOVEN_BITS = 20


# letter_walk_bits of a walk with other characters mixed in: about 15; of random keys' letters,
# 59 and up (32 printable characters; 5,000 draws of each of thirteen shapes, hex's six letters
# aside), of a keyboard's letters in order 5 to 15.
MIN_WALK_BITS = 30


def letter_walk_bits(key: str) -> float:
    """pattern_bits of the key's letters alone, in each layout, per 32 of them: a walk with
    capitals, digits and symbols mixed in ("Qw3rTy!uIoP@aSdF#...") walks the rows again once
    they are taken out. Infinite (not read) for under 16 letters, or letters of under ten kinds
    (hex's six are a pattern of their own, and the other rules read hex)."""
    letters = "".join(c for c in key if c.isascii() and c.isalpha())
    if len(letters) < 16 or len(set(letters.lower())) < 10:
        return math.inf
    return min(pattern_bits(letters, layout) for layout in (_NEXT, *_OTHER_LAYOUTS)) * MIN_SECRET_KEY / len(letters)


def interleaved_bits(key: str, steps: tuple[int, ...] = (2, 3)) -> float:
    """pattern_bits summed over the key's every other (and every third...) character: runs woven
    together ("a0b1c2...", a counter's "000102...1f") are patterns again once taken apart, while a
    random key's parts keep about its randomness between them."""
    return min(sum(pattern_bits(key[i::step]) for i in range(step)) for step in steps)


SECRET_KEY_HELP = (
    "set SECRET_KEY to a random key of at least 32 characters, e.g. the output of "
    "`python -c 'import secrets; print(secrets.token_urlsafe(48))'` (`proctor demo` "
    "makes its own)"
)


def demo_secret_key() -> str:
    """The demo's key: SECRET_KEY when it is strong, else a random one kept in
    secret_key_file (made once, readable by its owner only) and put in the environment."""
    settings = get_settings()
    if weak_secret_key(settings.secret_key) is None:
        return settings.secret_key
    path = settings.secret_key_file
    try:
        with open(path) as f:
            key = f.read().strip()
    except FileNotFoundError:
        key = ""
    if weak_secret_key(key) is not None:
        import secrets

        key = secrets.token_urlsafe(48)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
    os.environ["SECRET_KEY"] = key
    get_settings.cache_clear()
    return key
