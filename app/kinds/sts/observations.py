"""What an uploaded STS policy is given (docs/kinds/sts-policies.md): the observation as
tensors, and the fixed mission vocabulary. numpy only: the web side checks configs against
VOCAB_VERSION without importing torch, and the worker side (workers/sts) builds its tensors here.

- image: uint8 [B, 7, 7, 3], minigrid's symbolic egocentric view, indexed [x, y, channel]:
  column x 0..6 left to right, row y 0..6 far to near; the agent is at x 3, y 6, facing
  towards y 0; channels are (object, colour, state) indices (OBJECTS, COLOURS, STATES).
- direction: int64 [B], 0 east, 1 south, 2 west, 3 north.
- mission: int64 [B, L], the mission's words as indices into WORDS, padded with PAD on the
  right; L is the longest mission in the batch (at least 1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

# Bump the version with any change to WORDS or to tokenize(): a policy declares the version it
# was trained for, and one trained on another would read other words.
VOCAB_VERSION = "proctor.sts.vocab/1"
PAD, UNK = 0, 1
# Every word BabyAI's mission generator can write (minigrid/envs/babyai/core/verifier.py, the
# `surface` methods): the four verbs, the sequence joiners, object descriptions ("the", "a",
# colour, type or "object", location), in that grammar's order. The order is the index: never
# reorder or insert, only append under a new version.
WORDS: tuple[str, ...] = (
    "<pad>",
    "<unk>",
    "go",
    "to",
    "pick",
    "up",
    "open",
    "put",
    "next",  # GoTo, Pickup, Open, PutNext
    "then",
    "after",
    "you",
    "and",  # ", then", " after you ", " and "
    "the",
    "a",  # one matching object or several
    "red",
    "green",
    "blue",
    "purple",
    "yellow",
    "grey",  # minigrid COLOR_TO_IDX order
    "box",
    "ball",
    "key",
    "door",
    "object",  # OBJ_TYPES, and no type given
    "in",
    "front",
    "of",
    "behind",
    "on",
    "your",
    "left",
    "right",  # LOC_NAMES' phrases
)
INDEX: dict[str, int] = {w: i for i, w in enumerate(WORDS)}
MAX_TOKENS = 96  # longer missions are cut; BabyAI's longest (four PutNext with locations) is 68 words

# The view's channels: minigrid.core.constants (OBJECT_TO_IDX, COLOR_TO_IDX, STATE_TO_IDX).
OBJECTS: tuple[str, ...] = ("unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava", "agent")
COLOURS: tuple[str, ...] = ("red", "green", "blue", "purple", "yellow", "grey")
STATES: tuple[str, ...] = ("open", "closed", "locked")
N_DIRECTIONS = 4
VIEW = 7

_WORD = re.compile(r"[a-z]+")


def tokenize(mission: str) -> list[str]:
    """Lower-case words; punctuation (the comma of ", then") is dropped."""
    return _WORD.findall(mission.lower())


def mission_ids(mission: str) -> list[int]:
    return [INDEX.get(w, UNK) for w in tokenize(mission)][:MAX_TOKENS]


def encode_missions(missions: Sequence[str], cache: dict[str, list[int]] | None = None) -> np.ndarray:
    """int64 [B, L]: each mission's word ids, right-padded with PAD to the longest (L >= 1)."""
    ids = []
    for m in missions:
        if cache is not None:
            if m not in cache:
                cache[m] = mission_ids(m)
            ids.append(cache[m])
        else:
            ids.append(mission_ids(m))
    out = np.zeros((len(ids), max([1, *map(len, ids)])), dtype=np.int64)
    for i, row in enumerate(ids):
        out[i, : len(row)] = row
    return out
