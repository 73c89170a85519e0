"""The 3DShapes scenes (Burgess & Kim 2018) that A3DS annotates: six factors, their values'
words, the image index, and target/distractor pairs chosen by a study design.

The words are the A3DS grammar's terminals (tests/unit/test_a3ds.py checks them against the
released table in ../shared/data/a3ds, which is not copied here: it has no licence)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.errors import InputError

FEATURES = ("floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation")
HUES = ("red", "orange", "yellow", "green", "light green", "cyan", "medium blue", "dark blue", "purple", "pink")
WORDS: dict[str, tuple[str, ...]] = {
    "floor_hue": HUES,
    "wall_hue": HUES,
    "object_hue": HUES,
    "scale": ("tiny", "small", "medium-sized", "middle-sized", "big", "large", "huge", "giant"),
    "shape": ("block", "cylinder", "ball", "pill"),
    # Orientation -30 to 30 degrees in 15 steps; the middle phrases name two or three values.
    "orientation": (
        "in the right corner",
        "on the right",
        "close to the right side",
        "near the right corner",
        "close to the middle",
        "nearly in the middle",
        "in the middle",
        "in the middle",
        "in the middle",
        "nearly in the middle",
        "close to the middle",
        "near the left corner",
        "close to the left side",
        "on the left",
        "in the left corner",
    ),
}
SIZES = tuple(len(WORDS[f]) for f in FEATURES)  # 10, 10, 10, 8, 4, 15
N_SCENES = 1
for _n in SIZES:
    N_SCENES *= _n  # 480,000
SCALES = tuple(0.75 + 0.5 * k / 7 for k in range(8))
ORIENTATIONS = tuple(-30.0 + 60.0 * k / 14 for k in range(15))  # degrees


def check_id(scene_id: object, field: str = "id") -> int:
    if isinstance(scene_id, bool) or not isinstance(scene_id, int):
        raise InputError(f"a scene id is a whole number, not {scene_id!r}", field=field)
    if not 0 <= scene_id < N_SCENES:
        raise InputError(f"scene id {scene_id} is out of range: 0 to {N_SCENES - 1}", field=field)
    return scene_id


def scene_id(factors) -> int:
    """idx = ((((floor*10 + wall)*10 + object)*8 + scale)*4 + shape)*15 + orientation."""
    if len(factors) != 6:
        raise InputError(f"a scene has 6 factors, not {len(factors)}", field="factors")
    idx = 0
    for name, size, value in zip(FEATURES, SIZES, factors):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
            raise InputError(f"{name} is an index from 0 to {size - 1}, not {value!r}", field=name)
        idx = idx * size + value
    return idx


def factors(scene: int) -> tuple[int, ...]:
    """The six factor indices of a scene id (the formula backwards)."""
    check_id(scene)
    out = []
    for size in reversed(SIZES):
        scene, k = divmod(scene, size)
        out.append(k)
    return tuple(reversed(out))


def describe(scene: int) -> dict[str, str]:
    return {f: WORDS[f][k] for f, k in zip(FEATURES, factors(scene))}


@dataclass(frozen=True)
class Pair:
    target: int
    distractor: int

    @property
    def contrastive(self) -> tuple[str, ...]:
        """C = {i : t_i != d_i}, in factor order."""
        t, d = factors(self.target), factors(self.distractor)
        return tuple(f for f, a, b in zip(FEATURES, t, d) if a != b)

    @property
    def z(self) -> int:
        return len(self.contrastive)


def pair_differing_in(rng: random.Random, features: tuple[str, ...] | list[str]) -> Pair:
    """A random target and a distractor that differs from it in exactly these features."""
    t = [rng.randrange(n) for n in SIZES]
    d = list(t)
    for f in features:
        i = FEATURES.index(f)
        d[i] = rng.choice([v for v in range(SIZES[i]) if v != t[i]])
    return Pair(scene_id(t), scene_id(d))


def random_pair(rng: random.Random) -> Pair:
    """Two distinct scenes drawn uniformly (any z from 1 to 6)."""
    t = rng.randrange(N_SCENES)
    d = rng.randrange(N_SCENES - 1)
    return Pair(t, d + (d >= t))


def design_pairs(design: dict, seed: int) -> list[tuple[str, Pair]]:
    """Pairs by a study design, (how chosen, pair), deterministic given the seed:

    {"random": n, "z": {"1": n1, ..., "6": n6}, "named": [{"features": [...], "count": n}]}
    """
    unknown = set(design) - {"random", "z", "named"}
    if unknown:
        raise InputError(
            f"unknown design entry {sorted(unknown)[0]!r}: use random, z or named", field=f"pairs.{sorted(unknown)[0]}"
        )
    # The whole plan is checked, its total included, before any pair is drawn: many entries
    # each under the cap must not add up to a study nobody could annotate.
    plan: list[tuple[str, list[str] | None, int]] = [("random", None, _count(design.get("random", 0), "pairs.random"))]
    z_counts = design.get("z", {})
    if not isinstance(z_counts, dict):
        raise InputError("z is an object: number of differing features -> count", field="pairs.z")
    for key, n in sorted(z_counts.items()):
        if str(key) not in {"1", "2", "3", "4", "5", "6"}:
            raise InputError(f"z is 1 to 6, not {key!r}", field=f"pairs.z.{key}")
        plan.append((f"z={int(key)}", int(key), _count(n, f"pairs.z.{key}")))
    named = design.get("named", [])
    if not isinstance(named, list):
        raise InputError("named is a list of {features, count}", field="pairs.named")
    for k, entry in enumerate(named):
        feats = entry.get("features") if isinstance(entry, dict) else None
        if (
            not isinstance(feats, list)
            or not feats
            or len(set(map(str, feats))) != len(feats)
            or any(f not in FEATURES for f in feats)
        ):
            raise InputError(f"features: distinct names from {', '.join(FEATURES)}", field=f"pairs.named.{k}.features")
        plan.append(("named:" + "+".join(feats), feats, _count(entry.get("count", 0), f"pairs.named.{k}.count")))
    total = sum(n for _, _, n in plan)
    if total > MAX_PAIRS:
        raise InputError(f"the design asks for {total} pairs in all; at most {MAX_PAIRS}", field="pairs")
    rng = random.Random(seed)
    out: list[tuple[str, Pair]] = []
    for label, spec, n in plan:
        for _ in range(n):
            if spec is None:
                out.append((label, random_pair(rng)))
            elif isinstance(spec, int):  # z: which features differ is drawn per pair
                out.append((label, pair_differing_in(rng, rng.sample(FEATURES, spec))))
            else:
                out.append((label, pair_differing_in(rng, spec)))
    return out


MAX_PAIRS = 20000


def _count(n: object, field: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_PAIRS:
        raise InputError(f"a count is a whole number from 0 to {MAX_PAIRS}, not {n!r}", field=field)
    return n
