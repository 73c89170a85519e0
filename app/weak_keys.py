"""What a SECRET_KEY must not be beyond patterns of its own characters (app/config.py,
weak_secret_key): common English words run together ("correcthorsebatterystaple...") and the
digits of pi. Both are guessed from a list, not from the key's characters, whose frequencies
look random enough (English text: about 4.1 bits a letter)."""

from __future__ import annotations

import math
import re
from functools import lru_cache

# The most common English words of three letters or more (written here, from general word
# frequency lists; shorter words save a guesser next to nothing), and the nouns passphrase
# advice and its examples use. A guesser's list is larger: a word here is counted at the cost
# of picking it from this list, a generous upper bound for the words a guesser tries first.
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
# Bits a character below which a key is words: English words score about 2 to 2.7 (a listed word
# of five letters about 10 bits, separators repeated next to nothing), random keys 3.1 and up.
MAX_WORD_BITS_PER_CHAR = 2.8


def word_bits(key: str) -> float:
    """The fewest bits a guesser needs for the key as listed words (each log2 of the list's
    size, one more for its case) and single characters between them (a letter by its English
    frequency, an upper-case one a bit more, a digit log2 10, a separator as the one before it
    1): a segmentation by dynamic programming over the key."""
    low = key.lower()
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
    return best[n]


# A run of this many digits of pi is no chance: a random one is in its first 4,000 digits
# with odds of 1 in 10^12 (str() of an int stops at 4,300 digits).
PI_RUN = 16


@lru_cache(maxsize=1)
def pi_digits(n: int = 4_000) -> str:
    """The first n digits of pi ("31415..."), by Machin's formula in integers."""

    def arctan_inverse(x: int, one: int) -> int:
        total, term, k, sign = 0, one // x, 1, 1
        while term:
            total += sign * (term // k)
            term //= x * x
            k, sign = k + 2, -sign
        return total

    one = 10 ** (n + 10)
    pi = 4 * (4 * arctan_inverse(5, one) - arctan_inverse(239, one))
    return str(pi)[:n]


def is_pi(key: str) -> bool:
    """Whether at least half the key is runs of PI_RUN or more digits of pi (the start of each
    run of digits, a point left out)."""
    pi, covered = pi_digits(), 0
    for run in re.findall(r"\d{%d,}" % PI_RUN, key.replace(".", "")):
        covered += next((k for k in range(len(run), PI_RUN - 1, -1) if run[:k] in pi), 0)
    return covered * 2 >= len(key)
