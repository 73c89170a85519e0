"""A3DS reference game speed: scenes rendered per second (cold: drawn and stored; cached: read
back from the blob store) at both sizes, and captions scored per second (parse + metrics) for
each built-in speaker. Prints figures; never asserts on time."""

from __future__ import annotations

import random
import tempfile
import time

from app.kinds.a3ds import render
from app.kinds.a3ds.metrics import score_caption
from app.kinds.a3ds.scenes import N_SCENES, design_pairs
from app.kinds.a3ds.speakers import SPEAKERS, speak
from app.storage import LocalBlobStore

rng = random.Random(0)
with tempfile.TemporaryDirectory() as folder:
    store = LocalBlobStore(folder, "bench")
    for size, n in ((64, 200), (256, 40)):
        ids = rng.sample(range(N_SCENES), n)
        t = time.perf_counter()
        for s in ids:
            render.scene_png(s, size, store=store)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        for s in ids:
            render.scene_png(s, size, store=store)
        warm = time.perf_counter() - t
        print(f"render {size}x{size}: cold {n / cold:8.1f} scenes/s   cached {n / warm:8.1f} scenes/s")

pairs = [p for _, p in design_pairs({"z": {str(z): 500 for z in range(1, 7)}}, seed=0)]
for speaker in SPEAKERS:
    captions = [speak(speaker, p, 0) for p in pairs]
    t = time.perf_counter()
    for p, c in zip(pairs, captions):
        score_caption(p.target, p.distractor, c)
    dt = time.perf_counter() - t
    print(f"score {speaker:<12} {len(pairs) / dt:10.0f} captions/s")
