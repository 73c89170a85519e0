"""Captions to the features they mention, over the A3DS grammar's words (paper section 2.1).

A colour word names the floor, the wall or the object by where it stands: before "floor" or
after "on", before "wall" or after "in front of a", before a shape or size word (or "object")
or after "is". A colour word with no such place names the target's feature of that colour when
exactly one of the target's floor, wall and object has it (the paper's rule, section 2.1);
otherwise it is unparsed. A phrase may name several values ("in the middle" is orientation 6, 7 and 8), so
a mention is a set of values. Words that are neither the grammar's nor placed are reported as
unparsed, never guessed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.kinds.a3ds.scenes import FEATURES, HUES, WORDS, factors

# Words of the grammars that name no feature (and "object", the contrastive speaker's head
# noun when the shape is not worth naming).
FUNCTION_WORDS = frozenset("a an the there is on in front of floor wall standing picture shows object and".split())
HEAD_NOUNS = frozenset(WORDS["shape"]) | frozenset(WORDS["scale"]) | {"object"}


def _phrases() -> list[tuple[tuple[str, ...], str, frozenset[int]]]:
    """(words, feature or "hue", values), longest first so "nearly in the middle" wins over
    "in the middle" and "light green" over "green"."""
    out = [(tuple(h.split()), "hue", frozenset([k])) for k, h in enumerate(HUES)]
    for f in ("scale", "shape", "orientation"):
        by_words: dict[str, set[int]] = {}
        for k, w in enumerate(WORDS[f]):
            by_words.setdefault(w, set()).add(k)
        out += [(tuple(w.split()), f, frozenset(v)) for w, v in by_words.items()]
    return sorted(out, key=lambda p: -len(p[0]))


PHRASES = _phrases()


@dataclass
class Parsed:
    # feature -> the values the caption's words for it can mean
    mentions: dict[str, frozenset[int]] = field(default_factory=dict)
    unparsed: list[str] = field(default_factory=list)

    @property
    def mentioned(self) -> list[str]:
        return [f for f in FEATURES if f in self.mentions]


def tokens(caption: str) -> list[str]:
    return re.sub(r"[^a-z0-9\- ]+", " ", caption.lower()).split()


def _hue_role(words: list[str], start: int, end: int) -> str | None:
    after = words[end] if end < len(words) else ""
    if after == "floor":
        return "floor_hue"
    if after == "wall":
        return "wall_hue"
    if after in HEAD_NOUNS:
        return "object_hue"
    before = words[max(0, start - 4) : start]
    if before[-1:] == ["on"]:
        return "floor_hue"
    if before[-4:] == ["in", "front", "of", "a"] or before[-3:] == ["in", "front", "of"]:
        return "wall_hue"
    if before[-1:] == ["is"]:
        return "object_hue"
    return None


HUE_FEATURES = ("floor_hue", "wall_hue", "object_hue")


def _unique_hue_role(target: int | None, hue: int) -> str | None:
    """The one hue feature of the target with this hue, or None (none, or several)."""
    if target is None:
        return None
    f = factors(target)
    having = [name for name in HUE_FEATURES if f[FEATURES.index(name)] == hue]
    return having[0] if len(having) == 1 else None


def parse(caption: str, target: int | None = None) -> Parsed:
    """The features `caption` mentions; `target` (a scene id) places a colour word that its
    position does not."""
    words = tokens(caption)
    out = Parsed()
    i = 0
    while i < len(words):
        for phrase, feature, values in PHRASES:
            n = len(phrase)
            if tuple(words[i : i + n]) == phrase:
                if feature == "hue":
                    feature = _hue_role(words, i, i + n) or _unique_hue_role(target, next(iter(values)))
                    if feature is None:
                        out.unparsed += words[i : i + n]
                        break
                out.mentions[feature] = out.mentions.get(feature, frozenset()) | values
                break
        else:
            n = 1
            if words[i] not in FUNCTION_WORDS:
                out.unparsed.append(words[i])
        i += n
    return out
