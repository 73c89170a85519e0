"""What an annotator watches: every frame of a continuation's episode (context and
continuation) side by side in one PNG strip, stored once in the blob store under a key made
from its content, so the page loads one image and scrubs by moving it (no video codec, no
per-frame requests, and identical episodes share one file)."""

from __future__ import annotations

import hashlib

import numpy as np

from app.images import encode_png

# Steps a strip may hold: BabyAI episodes end within a few hundred steps; a longer upload is
# refused before anything is rendered.
MAX_FRAMES = 1024


def strip(frames: list[np.ndarray]) -> np.ndarray:
    """Frames of one size, left to right."""
    if not frames:
        raise ValueError("no frames")
    if len(frames) > MAX_FRAMES:
        raise ValueError(f"{len(frames)} frames; at most {MAX_FRAMES}")
    return np.concatenate(frames, axis=1)


def strip_key(level: str, seed: int, actions: list[int], tile: int) -> str:
    """The blob key of an episode's strip: the same episode always renders the same frames."""
    digest = hashlib.sha256(f"{level}|{seed}|{tile}|{','.join(map(str, actions))}".encode()).hexdigest()
    return f"sts/frames/{digest[:2]}/{digest}.png"


def ensure_strip(recording, tile: int) -> str:
    """The blob key of a recording's strip, rendered by replaying it the first time it is asked
    for (the same episode always gives the same frames, so a stored strip is kept). ValueError
    for an episode longer than a strip holds."""
    from app.kinds.sts.recordings import replay
    from app.storage import get_store

    key = strip_key(recording.level, recording.seed, list(recording.actions), tile)
    if len(recording.actions) + 1 > MAX_FRAMES:
        raise ValueError(f"{len(recording.actions) + 1} frames; at most {MAX_FRAMES}")
    store = get_store()
    if not store.exists(key):
        frames = [s.frame for s in replay(recording, frames=True, tile_size=tile, check_all=False).steps]
        store.put(key, encode_png(strip(frames)), content_type="image/png")
    return key
