"""The frame strips annotators scrub: valid PNGs (read back by an independent decoder), the
same episode always under the same key, and a cap on their length."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from app.images import MIN_PAD, decode_png, encode_png
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
    assert (
        len(
            {
                key,
                strip_key("BabyAI-GoToLocal-v0", 4, [2, 2, 1], 8),
                strip_key("BabyAI-GoToLocal-v0", 3, [2, 2, 0], 8),
                strip_key("BabyAI-GoToLocal-v0", 3, [2, 2, 1], 16),
            }
        )
        == 4
    )
    assert key.startswith("sts/frames/") and key.endswith(".png")


def test_bad_frames_are_refused():
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((4, 4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=f"at most {MAX_FRAMES}"):
        strip([np.zeros((1, 1, 3), dtype=np.uint8)] * (MAX_FRAMES + 1))
    with pytest.raises(ValueError, match="no frames"):
        strip([])


def test_a_padded_strip_is_the_same_picture_in_exactly_the_bytes_asked_for():
    """Padded inside the compressed stream with empty deflate blocks: the file and its IDAT
    chunk grow by exactly what was asked, for every size from the least that fits."""
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(3)]
    picture = strip(frames)
    png = encode_png(picture)
    least = len(png) + MIN_PAD + 8
    for size in range(least, least + 12):  # every residue of the 5-byte blocks, and more
        padded = encode_png(picture, size)
        assert len(padded) == size
        assert struct.unpack(">I", padded[33:37])[0] == size - 57  # the IDAT chunk's own length
        assert (decode_png(padded) == picture).all()
    pygame = pytest.importorskip("pygame")  # another inflater reads the empty blocks too
    assert pygame.image.load(io.BytesIO(encode_png(picture, least + 3))).get_size() == (24, 8)
    with pytest.raises(ValueError, match="compress to"):
        encode_png(picture, len(png))  # no room for the padding


def test_pictures_of_one_size_are_each_read_back_as_they_were():
    """A held state (repeated frames) compresses far better than moving ones; encoded together
    both come out the same length, the least they fit in, and decode to themselves."""
    from app.images import encode_pngs_of_one_size

    rng = np.random.default_rng(2)
    moving = strip([rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(4)])
    held = strip([moving[:, :8]] * 4)
    pngs = encode_pngs_of_one_size([moving, held])
    assert len(pngs[0]) == len(pngs[1])
    assert len(encode_png(held)) < len(encode_png(moving)) - 50
    assert len(pngs[0]) <= len(encode_png(moving)) + MIN_PAD + 6  # the flush costs at most 6 bytes
    assert [(decode_png(p) == m).all() for p, m in zip(pngs, (moving, held))] == [True, True]
