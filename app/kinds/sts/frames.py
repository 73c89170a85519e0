"""What an annotator watches: every frame of a continuation's episode (context and
continuation) side by side in one PNG strip, stored once in the blob store under a key made
from its content, so the page loads one image and scrubs by moving it (no video codec, no
per-frame requests, and identical episodes share one file).

A study's strips must not tell a worker the answer before they watch: every continuation of a
scenario shows the same number of frames (an episode that ended sooner holds its last state
to the scenario's length, `held_frames`), and the strips of one scenario are encoded in one
byte size (`store_strips`), so neither the strip's width nor its size (the file's, or any of
its chunks') says where the episode ended (docs/kinds/sts.md, "What a worker can tell before watching")."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

from app.images import encode_png, encode_pngs_of_one_size

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


def held_frames(recording, tile: int, n_frames: int) -> list[np.ndarray]:
    """The episode's frames, its last state repeated up to `n_frames` (the scenario's
    length): BabyAI ends an episode at success, so the agent cannot act on, and a strip that
    stopped there would show how it ended by its width."""
    from app.kinds.sts.recordings import replay

    if n_frames > MAX_FRAMES:
        raise ValueError(f"{n_frames} frames; at most {MAX_FRAMES}")
    frames = [s.frame for s in replay(recording, frames=True, tile_size=tile, check_all=False).steps]
    if len(frames) > n_frames:
        raise ValueError(f"the episode has {len(frames)} frames, more than the {n_frames} its scenario shows")
    return frames + [frames[-1]] * (n_frames - len(frames))


def _episode(recording, n_frames: int) -> tuple:
    """What a strip's pixels depend on (besides the tile size)."""
    return (recording.level, recording.seed, tuple(recording.actions), n_frames)


# A scenario's encoded strips, by what their bytes depend on (its unique episodes and the tile:
# each is padded to the group's largest): a study made again from the same continuations (a
# suite version's studies, the demo's, the tests') renders and encodes none of them. Bounded by
# the bytes held, least recently used first out.
ENCODED_CACHE_BYTES = 32 << 20
_encoded: OrderedDict[tuple[int, frozenset[tuple]], dict[tuple, bytes]] = OrderedDict()
_encoded_lock = threading.Lock()


def _cached_group(key: tuple[int, frozenset[tuple]]) -> dict[tuple, bytes] | None:
    with _encoded_lock:
        got = _encoded.get(key)
        if got is not None:
            _encoded.move_to_end(key)
        return got


def _keep_group(key: tuple[int, frozenset[tuple]], pngs: dict[tuple, bytes]) -> None:
    def size(group: dict[tuple, bytes]) -> int:
        return sum(map(len, group.values()))

    with _encoded_lock:
        _encoded[key] = pngs
        held = sum(size(g) for g in _encoded.values())
        while held > ENCODED_CACHE_BYTES and len(_encoded) > 1:
            _, dropped = _encoded.popitem(last=False)
            held -= size(dropped)


def store_strips(episodes: list[tuple[object, int, str]], tile: int) -> list[str]:
    """The blob keys of (recording, n_frames, scenario) strips, in order. A scenario's strips
    are PNGs of one byte size: a held last state compresses well, so the compressed data's
    length (the file's, or its IDAT chunk's) would tell ended episodes from running ones; each
    is padded inside its compressed stream (images.encode_pngs_of_one_size). Keys are the
    bytes' own hash.
    One scenario's strips are in memory at a time."""
    from app.storage import get_store

    groups: dict[str, list[int]] = {}
    for i, (_, _, scenario) in enumerate(episodes):
        groups.setdefault(scenario, []).append(i)
    store, keys = get_store(), [""] * len(episodes)
    for members in groups.values():
        # Identical episodes (an agent's continuation uploaded twice, a scenario's reference
        # beside it) render and encode once: padding to the largest size gives them the same bytes.
        same = {i: _episode(*episodes[i][:2]) for i in members}
        unique = {episode: i for i, episode in reversed(same.items())}
        group = (tile, frozenset(unique))
        png_of = _cached_group(group)
        if png_of is None:
            pngs = encode_pngs_of_one_size(
                [strip(held_frames(episodes[i][0], tile, episodes[i][1])) for i in unique.values()]
            )
            png_of = dict(zip(unique, pngs))
            _keep_group(group, png_of)
        for i in members:
            png = png_of[same[i]]
            digest = hashlib.sha256(png).hexdigest()
            keys[i] = f"sts/frames/{digest[:2]}/{digest}.png"
            if not store.exists(keys[i]):
                store.put(keys[i], png, content_type="image/png")
    return keys
