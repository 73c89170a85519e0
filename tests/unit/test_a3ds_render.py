"""The A3DS scenes as pictures: every factor shows (changing any one changes the picture), the
same id always gives the same bytes, and the blob store keeps what was drawn."""

from __future__ import annotations

import numpy as np
import pytest

from app.images import encode_png
from app.kinds.a3ds import render
from app.kinds.a3ds.scenes import FEATURES, SIZES, factors, scene_id
from app.storage import LocalBlobStore

BASE = (0, 2, 6, 0, 1, 5)  # image 12500


def _png_rgb(data: bytes, size: int) -> np.ndarray:
    import zlib

    # Our PNGs: one IDAT, the Up filter (type 2) on every line: a line adds the one above it.
    start = data.index(b"IDAT") + 4
    length = int.from_bytes(data[start - 8 : start - 4], "big")
    raw = np.frombuffer(zlib.decompress(data[start : start + length]), np.uint8).reshape(size, 1 + 3 * size)
    assert (raw[:, 0] == 2).all()
    return np.cumsum(raw[:, 1:], axis=0, dtype=np.uint8).reshape(size, size, 3)


@pytest.mark.parametrize("feature", FEATURES)
def test_every_single_factor_change_changes_the_picture(feature):
    i = FEATURES.index(feature)
    base = render.render(scene_id(list(BASE)), 64)
    for value in range(SIZES[i]):
        if value == BASE[i]:
            continue
        other = list(BASE)
        other[i] = value
        changed = np.abs(render.render(scene_id(other), 64).astype(int) - base).sum(-1) > 0
        # A visible change, not a stray pixel.
        assert changed.sum() >= 8, (feature, value, int(changed.sum()))


def test_the_same_id_gives_the_same_bytes_at_both_sizes():
    for scene in (12500, 0, 479999, 234567):
        for size in render.SIZES:
            a, b = encode_png(render.render(scene, size)), encode_png(render.render(scene, size))
            assert a == b
            assert _png_rgb(a, size).shape == (size, size, 3)


def test_pictures_are_kept_in_the_blob_store(tmp_path):
    store = LocalBlobStore(tmp_path / "blobs", "k")
    first = render.scene_png(12500, 256, store=store)
    assert store.exists(render.scene_key(12500, 256))
    assert render.scene_png(12500, 256, store=store) == first
    assert first == encode_png(render.render(12500, 256))
    # The floor shows its hue (red) at the bottom, the object its own (medium blue) in the middle.
    rgb = _png_rgb(first, 256).astype(int)
    r, g, b = rgb[250, 128]
    assert r > 150 and g < 90 and b < 90
    r, g, b = rgb[150, 128]
    assert b > 120 and r < 60
    with pytest.raises(ValueError):
        render.scene_png(12500, 100, store=store)
    assert factors(12500) == BASE
