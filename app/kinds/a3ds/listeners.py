"""Built-in model listeners: the A3DS kind's automatic judge (issue 28.1). A listener reads a
caption and picks one of the two scenes, as a person does; its pick is scored as a person's
(right when it is the target, "can't tell" wrong), and its picks over every caption of a study
are the judge beside people in the leaderboard's "People and the model listeners together".

`literal`: the caption's mentions (captions.parse, a colour word placed by each scene in turn)
checked against each scene's features: a mention the scene has counts +1, one it contradicts
-1; the scene with the higher count is picked, a tie is "can't tell". No model: a literal
listener in the sense of the paper's literal speaker (it reads words, not intentions)."""

from __future__ import annotations

from app.kinds.a3ds.captions import parse
from app.kinds.a3ds.scenes import FEATURES, factors

LISTENERS = ("literal",)


def _fit(caption: str, scene: int) -> int:
    have = factors(scene)
    mentions = parse(caption, scene).mentions
    return sum(1 if have[FEATURES.index(f)] in values else -1 for f, values in mentions.items())


def pick(listener: str, caption: str, scenes: list[int]) -> str:
    """ "1" or "2" (the scene shown first or second) or "none"."""
    if listener not in LISTENERS:
        raise ValueError(f"unknown listener {listener!r}: use {', '.join(LISTENERS)}")
    first, second = _fit(caption, scenes[0]), _fit(caption, scenes[1])
    return "1" if first > second else "2" if second > first else "none"
