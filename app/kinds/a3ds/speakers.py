"""Built-in speakers (captioners) from the A3DS grammars (paper section 2.1): each captions the
target of a pair, deterministically given a seed.

- literal: an exhaustive caption (all six features), a sentence of the exhaustive grammar;
- short: a short caption (two or three features), one of the 27 the short grammar makes;
- contrastive: names just the features that tell the target from the distractor (all of
  them), in the exhaustive grammar's word order;
- minimal: names one feature that tells them apart (the paper's optimal discriminativity).

The grammars' rules are written out here as code; tests/unit/test_a3ds.py checks the short
ones against the 27 released captions of image 12500."""

from __future__ import annotations

import hashlib
import random

from app.kinds.a3ds.scenes import FEATURES, Pair, describe

SPEAKERS = ("literal", "short", "contrastive", "minimal")


def _loc_orders(w: dict) -> list[str]:
    """The exhaustive grammar's four LOC rules."""
    o, wall, floor = w["orientation"], w["wall_hue"], w["floor_hue"]
    return [
        f"{o} in front of a {wall} wall on {floor} floor",
        f"{o} on {floor} floor in front of a {wall} wall",
        f"on {floor} floor {o} in front of a {wall} wall",
        f"on {floor} floor in front of a {wall} wall {o}",
    ]


def exhaustive_captions(scene: int) -> list[str]:
    """Every sentence of the exhaustive grammar for the scene (S's eight rules)."""
    w = describe(scene)
    s, h, sh = w["scale"], w["object_hue"], w["shape"]
    o, wall, floor = w["orientation"], w["wall_hue"], w["floor_hue"]
    nps = [f"a {s} {h} {sh} {loc}" for loc in _loc_orders(w)]
    standing = f"a {s} {h} {sh} standing"
    return (
        nps
        + [f"the picture shows {np}" for np in nps]
        + [
            f"{standing} {o} in front of a {wall} wall on {floor} floor",
            f"{standing} {o} on {floor} floor in front of a {wall}",
            f"{standing} on {floor} floor {o} in front of a {wall} wall",
            f"{standing} on {floor} floor in front of a {wall} wall {o}",
        ]
        + [f"the {s} {sh} {loc} is {h}" for loc in _loc_orders(w)]
        + [f"the {h} {sh} {loc} is {s}" for loc in _loc_orders(w)]
    )


def short_captions(scene: int) -> list[str]:
    """The short grammar's 27 sentences, in the order nltk's generate() gives them."""
    w = describe(scene)
    s, h, sh = w["scale"], w["object_hue"], w["shape"]
    locs = [w["orientation"], f"in front of a {w['wall_hue']} wall", f"on {w['floor_hue']} floor"]
    n_obj = (
        [f"{s} {sh}", f"{h} {sh}"]
        + [f"{sh} {loc}" for loc in locs]
        + [f"{s} {sh} {loc}" for loc in locs]
        + [f"{h} {sh} {loc}" for loc in locs]
    )
    return (
        [f"there is a {n}" for n in n_obj]
        + [f"a {n}" for n in n_obj]
        + [f"the {sh} is {loc}" for loc in locs]
        + [f"the {sh} is {s}", f"the {sh} is {h}"]
    )


def telling_features(pair: Pair) -> list[str]:
    """Contrastive features whose words differ (orientations that share a phrase do not)."""
    t, d = describe(pair.target), describe(pair.distractor)
    return [f for f in pair.contrastive if t[f] != d[f]]


def caption_of(scene: int, features: list[str] | tuple[str, ...]) -> str:
    """A caption of the scene that names exactly these features, in the exhaustive grammar's
    order; "object" stands for the shape when the shape is not named."""
    w = describe(scene)
    head = " ".join(
        [w[f] for f in ("scale", "object_hue") if f in features] + [w["shape"] if "shape" in features else "object"]
    )
    tail = []
    if "orientation" in features:
        tail.append(w["orientation"])
    if "wall_hue" in features:
        tail.append(f"in front of a {w['wall_hue']} wall")
    if "floor_hue" in features:
        tail.append(f"on {w['floor_hue']} floor")
    article = "an" if head[0] in "aeiou" else "a"
    return " ".join([article, head] + tail)


def _rng(seed: int, pair: Pair, speaker: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}|{pair.target}|{pair.distractor}|{speaker}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def speak(speaker: str, pair: Pair, seed: int = 0) -> str:
    rng = _rng(seed, pair, speaker)
    if speaker == "literal":
        return rng.choice(exhaustive_captions(pair.target))
    if speaker == "short":
        return rng.choice(short_captions(pair.target))
    telling = telling_features(pair)
    if speaker == "contrastive":
        # Nothing tells them apart in words: the speaker can only describe the target fully.
        return caption_of(pair.target, telling or FEATURES)
    if speaker == "minimal":
        return caption_of(pair.target, [rng.choice(telling)] if telling else FEATURES)
    raise ValueError(f"unknown speaker {speaker!r}: use {', '.join(SPEAKERS)}")
