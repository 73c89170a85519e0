"""What a SECRET_KEY must not be beyond patterns of its own characters (app/config.py,
weak_secret_key): common English words run together ("correcthorsebatterystaple...") and the
digits of pi. Both are guessed from a list, not from the key's characters, whose frequencies
look random enough (English text: about 4.1 bits a letter)."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path

# The most common English words of three letters or more (written here, from general word
# frequency lists; shorter words save a guesser next to nothing), and the nouns passphrase
# advice and its examples use. A guesser's list is larger: a word here is counted at the cost
# of picking it from this list, a generous upper bound for the words a guesser tries first.
# Round 15 of issue 26's re-attack added the NATO spelling alphabet and programmers' placeholder
# names ("AlphaBravoCharlie...", "foobarbazqux..." passed every rule); round 16 the placeholder
# text's first words ("lorem-ipsum-dolor-sit-amet-2026-prod" passed).
WORDS = frozenset(
    """
    the and that have for not with you this but his from they say her she will one all would
    there their what out about who get which when make can like time just him know take people
    into year your good some could them see other than then now look only come its over think
    also back after use two how our work first well way even new want because any these give day
    most very find thing tell man woman child world life hand part place case week company system
    program question government number night point home water room mother area money story fact
    month lot right study book eye job word business issue side kind head house service friend
    father power hour game line end member law car city community name president team minute idea
    kid body information school face others level office door health person art war history party
    result change morning reason research girl guy moment air teacher force education foot boy age
    policy process music market sense nation plan college interest death experience effect class
    control care field development role effort rate heart drug show leader light voice wife police
    mind price report decision son view relationship town road arm difference value building action
    model season society tax director position player record paper space ground form event official
    matter center couple site project activity star table need court oil situation cost industry
    figure street image phone data picture practice piece land product doctor wall patient worker
    news test movie north love support technology step baby computer type attention film tree source
    organization hair window evidence population site university bank key password secret admin
    letmein welcome dragon monkey master sunshine princess football baseball shadow superman batman
    trustno iloveyou qwerty login hello freedom whatever summer winter spring autumn flower
    correct horse battery apple orange banana cherry lemon grape river mountain ocean forest desert
    island garden castle bridge tower dog cat bird fish cow pig sheep goat mouse lion tiger bear wolf
    fox rabbit snake eagle quick brown lazy jump jumps red blue green yellow black white purple
    pink gray grey gold silver iron stone wood fire earth wind rain snow storm cloud sun moon planet
    sky sea lake hill valley king queen prince knight soldier castle sword shield magic dream happy
    sad big small long short high low old young great little large early late hot cold warm cool
    hard soft fast slow strong weak rich poor full empty open close free true false best better
    never always every many much more less same different next last own real sure clear whole
    special easy possible able public human local certain late dark bright deep simple single
    should must might may shall does did done made said went going gone came seen knew thought told
    found gave took left felt kept held stood heard meant set put run walk talk read write play
    move live believe bring happen begin keep hold turn start stop help learn lead understand watch
    follow create speak spend grow offer remember consider appear buy wait serve die send expect
    build stay fall cut reach kill remain suggest raise pass sell require decide return explain hope
    develop carry break receive agree win pay meet include continue leave call try ask feel become
    let mean where why here while through before down off again under never between each those both
    few still since without around against during such another however among until within upon
    coffee chair pencil guitar piano letter
    alpha bravo charlie delta echo foxtrot golf hotel india juliet juliett kilo lima mike november
    oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu
    foo bar baz qux quux corge grault garply waldo fred plugh xyzzy thud
    lorem ipsum dolor sit amet consectetur adipiscing elit
    """.split()
)
MIN_WORD = 3
# How often each letter comes in English text, in percent (the usual table): a letter no listed
# word covers costs -log2 of it, so an unlisted English word costs about 4.2 bits a letter and
# random letters about 5.6 (the table's cross-entropy with a uniform draw).
LETTERS = dict(
    zip(
        "etaoinshrdlcumwfgypbvkjxqz",
        (12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8)
        + (0.15, 0.15, 0.1, 0.07),
    )
)
_LETTER_BITS = {c: -math.log2(p / 100) for c, p in LETTERS.items()}
_DIGIT_BITS, _OTHER_BITS = math.log2(10), math.log2(33)  # 33: punctuation and the space


# Text written upside down ("ʇɔǝɹɹoɔ" for "correct", read from the end, or "ɔoɹɹǝɔʇ" letter by
# letter): the turned letters put back, and the letters that turn into each other (b and q, d
# and p, n and u) swapped. Issue 26, round 14: "ɔoɹɹǝɔʇɥoɹsǝqɐʇʇǝɹʎsʇɐdlǝdɐssʍoɹp" passed every
# rule.
_UPSIDE_DOWN_ONLY = "ɐɔǝɟƃɥᴉıɾʞɯɹʇʌʍʎ"
_UPSIDE_DOWN = str.maketrans(_UPSIDE_DOWN_ONLY + "bqdpnu", "acefghiijkmrtvwy" + "qbpdun")


def turned(key: str) -> tuple[str, ...]:
    """The key reversed and in ROT13 (and turned back when it is written upside down): words
    written so are as guessable as the words."""
    import codecs

    readings = (key[::-1], codecs.encode(key, "rot13"))
    if any(c in _UPSIDE_DOWN_ONLY for c in key):
        readings += (key.translate(_UPSIDE_DOWN), key[::-1].translate(_UPSIDE_DOWN))
    return readings


# Leetspeak ("p4ssw0rd", "dr@g0n"): a digit or symbol standing for a letter. A word written so is
# read with the letters put back, at one bit more a character changed, the guesser's choice to
# change it. 1 and | stand for i or l: a listed word is matched with its l taken as i too.
LEET = str.maketrans("4@3016!|5$789", "aaeoigiisstbg")


def fold(text: str, l_as_i: bool = False) -> str:
    """The text in lower case with leetspeak's stand-ins put back (and l as i, if asked)."""
    folded = text.lower().translate(LEET)
    return folded.replace("l", "i") if l_as_i else folded


_FOLDED_WORDS = frozenset(fold(w, l_as_i=True) for w in WORDS)
# Bits a character below which a key is words: English words score about 2 to 2.7 (a listed word
# of five letters about 10 bits, separators repeated next to nothing), random keys 3.1 and up.
MAX_WORD_BITS_PER_CHAR = 2.8


def word_bits(key: str) -> float:
    """The fewest bits a guesser needs for the key as listed words (each log2 of the list's
    size, one more for its case) and single characters between them (a letter by its English
    frequency, an upper-case one a bit more, a digit log2 10, a separator as the one before it
    1): a segmentation by dynamic programming over the key. A word may be in leetspeak
    ("p4ssw0rd"), at a bit more a character not a letter."""
    low, folded = key.lower(), fold(key, l_as_i=True)
    n, longest = len(key), max(map(len, WORDS))
    word = math.log2(len(WORDS)) + 1
    best = [0.0] + [math.inf] * n
    separator = ""  # the last separator before i: words are parted by one kind ("-", " ")
    for i in range(n):
        c = key[i]
        if c.isdigit():
            one = _DIGIT_BITS
        elif low[i] in _LETTER_BITS:
            one = _LETTER_BITS[low[i]] + c.isupper()
        else:
            one = 1.0 if c == separator else _OTHER_BITS
            separator = c
        best[i + 1] = min(best[i + 1], best[i] + one)
        for j in range(i + MIN_WORD, min(n, i + longest) + 1):
            if low[i:j] in WORDS:
                best[j] = min(best[j], best[i] + word)
            elif folded[i:j] in _FOLDED_WORDS:
                changed = sum(not c.isalpha() for c in low[i:j])
                best[j] = min(best[j], best[i] + word + changed)
    return best[n]


# A passphrase drawn from a list (diceware, xkcdpass, Bitwarden's and 1Password's generators) is
# English words, yet as strong as its draws: log2 of the list's size a word. Random ones of 10
# words from EFF's list (129 bits) read as English (issue 26, re-attack round 10: 85% refused).
# Words drawn from it count when they are at least MIN_PASSPHRASE_BITS and no more than half of
# them are common words (WORDS: a person's choice, "princess-football-shadow-..."); a word drawn
# twice is a draw too (a key of copies is refused as one), less the order's share in the list's
# order (eight random ones are so once in 20,000: a set, 88 bits), or their steps along the
# list when fewer (its first ten words: 15 bits).
PASSPHRASE_LIST = "eff_large_wordlist.txt"
MIN_PASSPHRASE_BITS = 100
# Characters between two words: one kind throughout ("-", " ", ".", "_"), or none.
_PASSPHRASE_SEPARATORS = " -_.,+:;/|~*"


@lru_cache(maxsize=1)
def passphrase_words() -> frozenset[str]:
    """EFF's long wordlist (app/eff_large_wordlist.txt); empty where an install lacks it."""
    try:
        text = (Path(__file__).resolve().parent / PASSPHRASE_LIST).read_text("utf-8")
    except OSError:
        return frozenset()
    return frozenset(w for w in text.split("\n") if w and not w.startswith("#"))


@lru_cache(maxsize=1)
def _list_index() -> dict[str, int]:
    return {w: i for i, w in enumerate(sorted(passphrase_words()))}


def passphrase_bits(key: str) -> float:
    """Bits of the key as a passphrase drawn from EFF's list: log2 7,776 for each word of the
    fewest that make it (in any case, parted by one kind of separator or none, a word followed
    by at most one digit, as Bitwarden adds), less log2 of their number's factorial when they
    are in alphabetical order (or only their steps along the list); 0 when it is not one, or
    when more than half of its words are common ones."""
    listed = passphrase_words()
    if not listed:
        return 0.0
    low = key.lower()
    others = {c for c in low if not c.isalnum()} - {"-"}  # "-" may be inside a word (t-shirt)
    if len(others) > 1 or others - set(_PASSPHRASE_SEPARATORS):
        return 0.0
    longest = max(map(len, listed))
    best = 0.0
    for separator in others or {"-", ""}:
        words = _fewest_words(low, separator, listed, longest)
        if not words or sum(w in WORDS for w in words) * 2 > len(words):
            continue
        bits = len(words) * math.log2(len(listed))
        if words in (sorted(words), sorted(words, reverse=True)):  # the list's first words, say
            # In order they are only a set, and the list's own run costs its steps along it.
            at = sorted(_list_index()[w] for w in words)
            steps = [min(at[0], len(listed) - 1 - at[-1]), *(b - a for a, b in zip(at, at[1:]))]
            bits = min(bits - math.log2(math.factorial(len(words))), sum(math.log2(2 + d) for d in steps))
        best = max(best, bits)
    return best


def _fewest_words(low: str, separator: str, listed: frozenset[str], longest: int) -> list[str] | None:
    """The fewest listed words that make `low`, each maybe followed by a digit and then by the
    separator (none after the last), or None."""
    n = len(low)
    came_from: dict[int, tuple[int, str]] = {0: (-1, "")}
    frontier = [0]
    while frontier:  # breadth first: the first way to reach the end has the fewest words
        following = []
        for i in frontier:
            for j in range(i + MIN_WORD, min(n, i + longest) + 1):
                if low[i:j] not in listed:
                    continue
                for end in (j, j + 1) if j < n and low[j].isdigit() else (j,):
                    if end == n:
                        nxt = n
                    elif low.startswith(separator, end) and end + len(separator) < n:
                        nxt = end + len(separator)
                    else:
                        continue
                    if nxt not in came_from:
                        came_from[nxt] = (i, low[i:j])
                        following.append(nxt)
        if n in came_from:
            words, at = [], n
            while at:
                at, word = came_from[at]
                words.append(word)
            return words[::-1]
        frontier = following
    return None


# A run of this many digits of a constant is no chance: a random one is in the first 4,000
# digits of one of the six with odds of about 1 in 10^11 (str() of an int stops at 4,300 digits).
CONSTANT_RUN = 16
DIGITS = 4_000


@lru_cache(maxsize=1)
def constants() -> dict[str, str]:
    """The first DIGITS digits ("31415...") of the constants a person knows the start of: pi (by
    Machin's formula), e (its series), the square roots of 2, 3 and 5 and the golden ratio, all
    in integers."""
    one = 10 ** (DIGITS + 10)

    def arctan_inverse(x: int) -> int:
        total, term, k, sign = 0, one // x, 1, 1
        while term:
            total += sign * (term // k)
            term //= x * x
            k, sign = k + 2, -sign
        return total

    e, term, k = 0, one, 1
    while term:
        e, term, k = e + term, term // k, k + 1
    found = {
        "pi": 4 * (4 * arctan_inverse(5) - arctan_inverse(239)),
        "e": e,
        "the square root of 2": math.isqrt(2 * one * one),
        "the square root of 3": math.isqrt(3 * one * one),
        "the square root of 5": math.isqrt(5 * one * one),
        "the golden ratio": (one + math.isqrt(5 * one * one)) // 2,
    }
    return {name: str(value)[:DIGITS] for name, value in found.items()}


def pi_digits(n: int = DIGITS) -> str:
    """The first n digits of pi ("31415...")."""
    return constants()["pi"][:n]


def constant_in(key: str) -> str | None:
    """The constant at least half the key is runs of CONSTANT_RUN or more digits of (the start
    of each run of digits, a point left out), or None."""
    runs = re.findall(r"\d{%d,}" % CONSTANT_RUN, key.replace(".", ""))
    for name, digits in constants().items():
        covered = sum(next((k for k in range(len(run), CONSTANT_RUN - 1, -1) if run[:k] in digits), 0) for run in runs)
        if covered * 2 >= len(key):
            return name
    return None


# Words outside the list: English spelling is predictable, one letter from the one before it.
# A letter-pair model fitted to the list (its words between a start and an end mark, each pair
# seen plus half) charges English text of other words (prose of these docs) about 4.1 bits a
# letter and random letters 5.7 (5.6 to 5.8 for the calibration's shapes); a key of at least
# ENGLISH_LETTERS letters, three quarters of it, under MAX_ENGLISH_BITS a letter is words. A
# random key's letters scored 4.39 at the lowest of 50,000 of 24 letters (the fewest the rule
# checks), and English of these docs' words (technical ones included) is under 4.3 84% of the
# time. Two letters may also be a word's end and the next one's start: the cheaper is taken.
# A text decoded from a key is held to the same 24 letters: at 16, random printable texts of
# 20 characters with digits read as leetspeak were refused 7 times in 20,000 (a flaky test);
# a shorter English text decoded is left to the listed words (word_bits).
ENGLISH_LETTERS = 24
MAX_ENGLISH_BITS = 4.3
# The key reversed or in ROT13 (round 9) is read against a lower floor: random keys so turned
# scored lower than as they are (the lowest of 20,000 each: 4.31 for 32 letters and digits and
# 4.33 for token_urlsafe(24), against 4.46 and 4.49), while English turned back scores about 4.1
# (and listed words so turned are caught by word_bits first).
MAX_TURNED_ENGLISH_BITS = 4.2
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


@lru_cache(maxsize=1)
def _pair_bits() -> dict[tuple[str, str], float]:
    seen: dict[tuple[str, str], int] = {}
    for w in WORDS:
        marked = "^" + w + "$"
        for pair in zip(marked, marked[1:]):
            seen[pair] = seen.get(pair, 0) + 1
    after = {a: sum(n for (x, _), n in seen.items() if x == a) for a in "^" + _ALPHABET}
    return {
        (a, b): -math.log2((seen.get((a, b), 0) + 0.5) / (after[a] + 0.5 * 27))
        for a in "^" + _ALPHABET
        for b in _ALPHABET + "$"
    }


def english_bits(key: str) -> float | None:
    """Bits a letter of the key's letters (leetspeak folded back) under the letter-pair model,
    or None when they are too few to tell (under ENGLISH_LETTERS, or under 3/4 of the key; or
    the key is not half letters of its own, or half a run of hex: random digits fold into a few
    common letters, and hex has six letters)."""
    letters = re.sub("[^a-z]", "", fold(key))
    hex_run = max(map(len, re.findall("[0-9a-fA-F]+", key)), default=0)
    if (
        len(letters) < max(ENGLISH_LETTERS, 0.75 * len(key))
        or sum(map(str.isalpha, key)) * 2 < len(key)
        or hex_run * 2 >= len(key)
    ):
        return None
    bits = _pair_bits()
    total = bits["^", letters[0]]
    for a, b in zip(letters, letters[1:]):
        total += min(bits[a, b], bits[a, "$"] + bits["^", b])
    return total / len(letters)


# A hash's hex digest of a guessable text ("echo password | sha256sum"): as random-looking as
# any hex, and as weak as the text. The texts: each listed word in three cases with a common
# ending, with and without the newline echo adds, a few a key is often called, and the numbers
# under 1,000; the hashes of coreutils' md5sum, sha1sum, sha224sum, sha256sum, sha384sum,
# sha512sum and b2sum (BLAKE2b), and SHA3-256 (round 13: sha384 of "password" and the others
# passed): some 130,000 digests in about 0.4 s, made when a key first has such a run (the
# suite's own key has one). A key is checked by its longest run of hex digits (at least 32,
# half the key) against the digests' first 16.
_HASHES = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b", "sha3_256")
_KEY_NAMES = (
    "", "secret", "secretkey", "secret_key", "SECRET_KEY", "proctor", "changeme", "change-me",
    "dev", "development", "production", "prod", "test", "testing", "django-insecure", "flask",
    "abc123", "qwerty", "letmein", "iloveyou", "1234", "12345", "123456", "1234567", "12345678",
    "123456789", "1234567890",
    # round 8 of the re-attack
    "foobar", "hunter2", "admin", "root", "supersecret", "mysecret", "my secret", "my secret key",
    "mysecretkey", "secret-key", "proctor-secret", "proctor_secret", "proctor-dev", "proctor-key",
)  # fmt: skip


@lru_cache(maxsize=1)
def _digests() -> dict[str, tuple[str, str]]:
    import hashlib

    texts = set(map(str, range(1_000)))
    for w in (*WORDS, *_KEY_NAMES):
        for case in (w, w.capitalize(), w.upper()):
            texts.update(case + end for end in ("", "1", "123", "!"))
    found = {}
    for name in _HASHES:
        make = getattr(hashlib, name)
        for text in texts:
            for data in (text.encode(), text.encode() + b"\n"):
                digest = make(data).hexdigest()
                found[digest[:16]] = (digest, name)
    return found


def hash_of_a_guess(key: str) -> str | None:
    """The hash a key's long hex run is the hex digest (or the start of one) of a guessable
    text by, or None. A key that is a digest's bytes in base32, base64 (as `openssl dgst -binary
    | base64` writes them, or unpadded as in a JWT) or base85 is read as their hex."""
    run = max(re.findall(r"[0-9a-fA-F]{32,}", key), key=len, default="").lower()
    runs = (
        [run] if len(run) * 2 >= len(key) else [d.hex() for d in decodings(key) if len(d) in (16, 20, 28, 32, 48, 64)]
    )
    for run in runs:
        digest, name = _digests().get(run[:16], ("", ""))
        if digest and (digest.startswith(run) or run.startswith(digest)):
            return name
    return None


_UUID_NAMESPACES = (
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",  # DNS, URL, OID, X.500 (RFC 9562)
    "6ba7b811-9dad-11d1-80b4-00c04fd430c8",
    "6ba7b812-9dad-11d1-80b4-00c04fd430c8",
    "6ba7b814-9dad-11d1-80b4-00c04fd430c8",
)


@lru_cache(maxsize=1)
def _name_uuids() -> frozenset[str]:
    import uuid

    texts = {case for w in (*WORDS, *_KEY_NAMES) for case in (w, w.capitalize(), w.upper())}
    spaces = [uuid.UUID(ns) for ns in _UUID_NAMESPACES]
    return frozenset(make(ns, text).hex for ns in spaces for text in texts for make in (uuid.uuid3, uuid.uuid5))


def name_uuid_of_a_guess(key: str) -> bool:
    """Whether the key holds a version 3 or 5 UUID (md5 or sha1 of a namespace and a name) of a
    listed word or key name in three cases, under one of the standard namespaces (some 15,000
    UUIDs, made when a key first holds one of these versions)."""
    found = re.findall(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[35][0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}", key.lower())
    return bool(found) and any(u.replace("-", "") in _name_uuids() for u in found)


def decodings(key: str) -> list[bytes]:
    """The bytes a key stands for in each encoding it is valid in: hex, base32 (either case),
    base64 (either alphabet, padded or not), base85 and Ascii85, in that order (the smallest
    alphabet first: a hex key is also base32 and base64 text)."""
    import base64
    import binascii

    padded = key + "=" * (-len(key) % 4)
    found = []
    for decode in (
        bytes.fromhex,
        lambda k: base64.b32decode(k + "=" * (-len(k) % 8), casefold=True),
        lambda k: base64.b64decode(padded, validate=True),
        lambda k: base64.b64decode(padded, b"-_", validate=True),
        base64.b85decode,
        base64.a85decode,
    ):
        try:
            found.append(decode(key))
        except (ValueError, binascii.Error):
            continue
    return found


def decoded(key: str) -> bytes | None:
    """What a hex, base32, base64 or base85 key stands for (the first of its decodings), or
    None: at least 16 bytes."""
    return next((data for data in decodings(key) if len(data) >= 16), None)


# A clock's reading written out ("2026-11-29T10:21:17Z", "Sunday, 29 November 2026", an epoch
# second count): the time a key was made is guessable to the day, its digits are no secret.
# Dates and counts of seconds are matched only with no digit beside them, so a run of random
# digits is not read as one; single digits between letters (days, hours) are common in random
# keys and count only as part of a date or a time with its separators.
_MONTHS = "january february march april may june july august september october november december"
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
_SHORT_MONTHS = "|".join(m[:3] for m in _MONTHS.split())
_NAMES = "|".join(_MONTHS.split() + _DAYS.split() + [w[:3] for w in (_MONTHS + " " + _DAYS).split()])
_NUMBER_START, _NUMBER_END = r"(?<![0-9a-z])", r"(?![0-9a-z])"  # digits standing alone
_CLOCK = re.compile(
    "|".join(
        (
            r"(?<!\d)(?:19|20)\d\d[-/.](?:0[1-9]|1[0-2])[-/.](?:0[1-9]|[12]\d|3[01])(?!\d)",  # 2026-11-29
            r"(?<!\d)(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|1[0-2])[-/.](?:19|20)?\d\d(?!\d)",  # 29/11/2026
            r"(?<!\d)(?:[01]?\d|2[0-3])[:h][0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?(?: ?[ap]m\b)?(?!\d)",  # 10:21:17.123, 10:21 am
            # 20261129, 20261129t102117z
            _NUMBER_START
            + r"(?:19|20)\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])(?:t?(?:[01]\d|2[0-3])[0-5]\d(?:[0-5]\d)?z?)?"
            + _NUMBER_END,
            _NUMBER_START + r"1[0-9]{9}(?:\d{3}(?:\d{3})?)?" + _NUMBER_END,  # seconds (milli-, micro-) since 1970
            _NUMBER_START + r"(?:19|20)\d\d" + _NUMBER_END,  # a year
            r"(?<!\d)(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?(?=[ ,]+(?:%s))" % _SHORT_MONTHS,  # 29 nov
            r"\b(?:%s)\b" % _NAMES,
            r"\butc\b|\bgmt\b|(?<=\d)z\b|[+-](?:0\d|1[0-4]):?[0-5]\d(?!\d)",  # time zones
        )
    )
)
# Hex digits spelling words ("deadbeef", "cafebabe", "c0ffee"): a pattern of hex keys.
_HEXSPEAK = re.compile(
    "|".join(
        sorted(
            """deadbeef cafebabe feedface 8badf00d baadf00d decafbad deadc0de fee1dead cafed00d
            0ff1ce c0ffee badc0de d15ea5e defaced facade decade accede b16b00b5 dabbad00 1ceb00da
            abad1dea b105f00d 0d15ea5e beefcafe dead beef cafe babe face feed fade bead deaf c0de
            f00d b00b d00d 1337 c0ca c01a ba5e ba11 be11 5eed acce55 c0ffee 0b5e55ed""".split(),
            key=len,
            reverse=True,
        )
    )
)
# A key 40% or more of which is these is refused: of 20,000 random keys of each of the
# calibration's seventeen shapes, the most was 0.19 of a clock's and 0.25 of hexspeak.
MAX_GUESSABLE_SHARE = 0.4


def clock_share(key: str) -> float:
    """The share of the key that is a date, a time, a day's or month's name or a time zone."""
    return _covered(_CLOCK, key.lower(), separators=" ,.:-/t")


def hexspeak_share(key: str) -> float:
    """The share of the key that is hex digits spelling words."""
    return _covered(_HEXSPEAK, key.lower(), separators="-_ ")


def _covered(pattern: re.Pattern[str], low: str, separators: str) -> float:
    """The share of the text that the pattern's matches cover, with the separators between two
    matches counted as theirs."""
    spans = [m.span() for m in pattern.finditer(low) if m.end() > m.start()]
    covered = sum(b - a for a, b in spans)
    gaps = (low[end:start] for (_, end), (start, _) in zip(spans, spans[1:]))
    covered += sum(len(gap) for gap in gaps if set(gap) <= set(separators))
    return covered / len(low) if low else 0.0
