"""The core's PNG encoder (app/images.py), shared by the kinds that draw pictures: what it
writes reads back pixel for pixel, the same array always gives the same bytes, and anything
but an RGB uint8 array is refused."""

from __future__ import annotations

import numpy as np
import pytest

from app.images import decode_png, encode_png


def test_a_picture_reads_back_pixel_for_pixel_and_its_bytes_are_stable():
    rgb = np.random.default_rng(1).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    png = encode_png(rgb)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png == encode_png(rgb.copy())
    back = decode_png(png)
    assert back.shape == (7, 5, 3) and (back == rgb).all()


def test_what_is_not_an_rgb_byte_array_is_refused():
    for bad in (
        np.zeros((4, 4, 3), dtype=np.float32),
        np.zeros((4, 4), dtype=np.uint8),
        np.zeros((4, 4, 4), dtype=np.uint8),
    ):
        with pytest.raises(ValueError, match="uint8"):
            encode_png(bad)
    with pytest.raises(ValueError, match="not a PNG"):
        decode_png(b"GIF89a")
