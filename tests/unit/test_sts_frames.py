"""The frame strips annotators scrub: valid PNGs (read back by an independent decoder), the
same episode always under the same key, and a cap on their length."""

from __future__ import annotations

import io

import numpy as np
import pytest

from app.images import decode_png, encode_png, pad_png
from app.kinds.sts.frames import MAX_FRAMES, strip, strip_key


def test_a_strip_is_a_png_another_decoder_reads_pixel_for_pixel():
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(5)]
    png = encode_png(strip(frames))
    assert (decode_png(png) == np.concatenate(frames, axis=1)).all()
    pygame = pytest.importorskip("pygame")  # installed with minigrid
    surface = pygame.image.load(io.BytesIO(png))
    assert surface.get_size() == (40, 8)
    assert tuple(surface.get_at((17, 3)))[:3] == tuple(int(v) for v in frames[2][3, 1])


def test_the_key_names_the_episode_and_nothing_else():
    key = strip_key("BabyAI-GoToLocal-v0", 3, [2, 2, 1], 8)
    assert key == strip_key("BabyAI-GoToLocal-v0", 3, [2, 2, 1], 8)
    assert len({key, strip_key("BabyAI-GoToLocal-v0", 4, [2, 2, 1], 8),
                strip_key("BabyAI-GoToLocal-v0", 3, [2, 2, 0], 8),
                strip_key("BabyAI-GoToLocal-v0", 3, [2, 2, 1], 16)}) == 4
    assert key.startswith("sts/frames/") and key.endswith(".png")


def test_bad_frames_are_refused():
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((4, 4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=f"at most {MAX_FRAMES}"):
        strip([np.zeros((1, 1, 3), dtype=np.uint8)] * (MAX_FRAMES + 1))
    with pytest.raises(ValueError, match="no frames"):
        strip([])


def test_a_padded_strip_is_the_same_picture_in_exactly_the_bytes_asked_for():
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(3)]
    png = encode_png(strip(frames))
    padded = pad_png(png, len(png) + 100)
    assert len(padded) == len(png) + 100 and padded.endswith(png[-12:])  # IEND stays last
    assert (decode_png(padded) == decode_png(png)).all()
    pygame = pytest.importorskip("pygame")  # another decoder skips the private chunk too
    assert pygame.image.load(io.BytesIO(padded)).get_size() == (24, 8)
    with pytest.raises(ValueError, match="cannot be padded"):
        pad_png(png, len(png) + 11)  # no room for the chunk itself
