"""3DShapes scenes drawn server-side (the original images are not available offline): a room
corner with the floor and the walls in their hues and the object (block: a cube, cylinder,
ball: a sphere, pill: a capsule lying down) in its hue and scale, the whole room turned by the
orientation. A small ray caster in numpy: each pixel's ray meets the floor, the two walls and
the object analytically; the object is lit by one light (Lambert). Deterministic: the same id
and size always give the same bytes (no randomness; float64 throughout).

Pictures are kept in the blob store under a key naming the renderer's version, the size and
the id, so each is drawn once."""

from __future__ import annotations

import colorsys
import math

import numpy as np

from app.images import encode_png
from app.kinds.a3ds.scenes import ORIENTATIONS, SCALES, factors

VERSION = 1
SIZES = (64, 256)  # the dataset's size, and the worker's page's
# Rays per pixel side: smooth edges at 64 x 64; the large picture needs none.
SUPERSAMPLE = {64: 2, 256: 1}

CAMERA = np.array([0.0, 1.45, -4.2])
LOOK_AT = np.array([0.0, 0.75, 0.0])
FOV = math.radians(46.0)
CORNER = 3.2  # distance of the room's corner behind the object
LIGHT = np.array([-0.45, 0.85, -0.55]) / np.linalg.norm([-0.45, 0.85, -0.55])


def hue_rgb(h: float, s: float = 1.0, v: float = 1.0) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(h, s, v))


def _rays(n: int) -> np.ndarray:
    forward = LOOK_AT - CAMERA
    forward /= np.linalg.norm(forward)
    right = np.cross(np.array([0.0, 1.0, 0.0]), forward)
    right /= np.linalg.norm(right)
    up = np.cross(forward, right)
    half = math.tan(FOV / 2)
    c = (np.arange(n) + 0.5) / n * 2 - 1
    u, v = np.meshgrid(c * half, -c * half)
    d = forward + u[..., None] * right + v[..., None] * up
    return (d / np.linalg.norm(d, axis=-1, keepdims=True)).reshape(-1, 3)


def _turn(x: np.ndarray, degrees: float) -> np.ndarray:
    """Rotate vectors about the vertical axis."""
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    return np.stack([c * x[..., 0] + s * x[..., 2], x[..., 1], -s * x[..., 0] + c * x[..., 2]], axis=-1)


def _object_hit(shape: int, size: float, o: np.ndarray, d: np.ndarray):
    """(distance, normal) of each ray's first meeting with the object; inf where none."""
    n = d.shape[0]
    t = np.full(n, np.inf)
    normal = np.zeros((n, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        if shape == 0:  # block: a cube standing on the floor
            a = 0.5 * size
            lo, hi = np.array([-a, 0.0, -a]), np.array([a, 2 * a, a])
            t1, t2 = (lo - o) / d, (hi - o) / d
            near, far = np.minimum(t1, t2), np.maximum(t1, t2)
            tn, tf = near.max(1), far.min(1)
            hit = (tf >= np.maximum(tn, 0)) & (tn > 0)
            t = np.where(hit, tn, np.inf)
            axis = near.argmax(1)
            normal[np.arange(n), axis] = -np.sign(d[np.arange(n), axis])
        elif shape == 1:  # cylinder, upright
            r, h = 0.5 * size, 1.0 * size
            ts, met, y, across = _tube(o, d, r, axis=1)
            side = met & (y >= 0) & (y <= h)
            tc = (h - o[1]) / d[:, 1]
            px, pz = o[0] + tc * d[:, 0], o[2] + tc * d[:, 2]
            cap = (tc > 0) & (px * px + pz * pz <= r * r)
            t = np.where(side, ts, np.inf)
            normal = np.where(side[:, None], across, normal)
            use_cap = cap & (tc < t)
            t = np.where(use_cap, tc, t)
            normal[use_cap] = [0.0, 1.0, 0.0]
        elif shape == 2:  # ball
            r = 0.55 * size
            centre = np.array([0.0, r, 0.0])
            t, normal = _sphere(o, d, centre, r)
        else:  # pill: a capsule lying along the room's x axis
            r, half = 0.38 * size, 0.45 * size
            centre = np.array([0.0, r, 0.0])
            ts, met, x, across = _tube(o - centre, d, r, axis=0)
            side = met & (np.abs(x) <= half)
            t = np.where(side, ts, np.inf)
            normal = np.where(side[:, None], across, normal)
            for end in (-half, half):
                te, ne = _sphere(o, d, centre + np.array([end, 0.0, 0.0]), r)
                closer = te < t
                t = np.where(closer, te, t)
                normal = np.where(closer[:, None], ne, normal)
    return t, normal


def _tube(o, d, r, axis):
    """Each ray's meeting with the side of an endless tube of radius r about the line through
    the origin along `axis` (0: x, 1: y), o relative to that line: the distance, whether it
    meets it ahead, how far along the axis, and the normal there (nan where it misses)."""
    i, j = (k for k in range(3) if k != axis)
    a = d[:, i] ** 2 + d[:, j] ** 2
    b = 2 * (o[i] * d[:, i] + o[j] * d[:, j])
    c = o[i] ** 2 + o[j] ** 2 - r * r
    disc = b * b - 4 * a * c
    ts = (-b - np.sqrt(disc)) / (2 * a)
    p = o + ts[:, None] * d
    across = p.copy()
    across[:, axis] = 0.0
    return ts, (disc >= 0) & (ts > 0), p[:, axis], across / r


def _sphere(o, d, centre, r):
    oc = o - centre
    b = d @ oc
    c = oc @ oc - r * r
    disc = b * b - c
    with np.errstate(invalid="ignore"):
        ts = -b - np.sqrt(disc)
    hit = (disc >= 0) & (ts > 0)
    t = np.where(hit, ts, np.inf)
    p = o + np.where(hit, ts, 0)[:, None] * d
    return t, (p - centre) / r


def render(scene: int, size: int = 64) -> np.ndarray:
    """The scene as a (size, size, 3) uint8 RGB array."""
    floor, wall, obj, scale, shape, orientation = factors(scene)
    ss = SUPERSAMPLE.get(size, 1)
    n = size * ss
    # Turn the room (and the object with it) by the orientation: in the room's frame the
    # camera moves instead.
    d = _turn(_rays(n), -ORIENTATIONS[orientation])
    o = _turn(CAMERA, -ORIENTATIONS[orientation])
    with np.errstate(divide="ignore", invalid="ignore"):
        t_floor = np.where(d[:, 1] < 0, -o[1] / d[:, 1], np.inf)
        # The corner's two walls: x + z = CORNER and -x + z = CORNER.
        t_left = np.where(d[:, 0] + d[:, 2] > 0, (CORNER - o[0] - o[2]) / (d[:, 0] + d[:, 2]), np.inf)
        t_right = np.where(d[:, 2] - d[:, 0] > 0, (CORNER + o[0] - o[2]) / (d[:, 2] - d[:, 0]), np.inf)
    t_obj, normal = _object_hit(shape, SCALES[scale], o, d)
    stack = np.stack([t_floor, t_left, t_right, t_obj], 1)
    first = stack.argmin(1)
    wall_rgb, floor_rgb = hue_rgb(wall / 10, 0.8, 0.95), hue_rgb(floor / 10, 0.8, 0.95)
    img = np.empty((n * n, 3))
    # Depth darkens the floor a little, so its edge with the walls reads as a corner.
    depth = np.clip(t_floor / 12.0, 0, 1)
    img[first == 0] = floor_rgb * (1.0 - 0.35 * depth[first == 0])[:, None]
    img[first == 1] = wall_rgb * 0.9
    img[first == 2] = wall_rgb * 0.72
    lit = 0.3 + 0.7 * np.clip(normal @ LIGHT, 0, 1)
    img[first == 3] = hue_rgb(obj / 10) * lit[first == 3][:, None]
    img = img.reshape(size, ss, size, ss, 3).mean((1, 3))
    return np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)


def scene_key(scene: int, size: int) -> str:
    return f"a3ds/scenes/v{VERSION}/{size}/{scene}.png"


def scene_png(scene: int, size: int = 64, store=None, before_drawing=None) -> bytes:
    """The scene's PNG, from the blob store or drawn and kept there; `before_drawing()` is
    called before a scene not yet stored is drawn (a rate limit may refuse there)."""
    from app.storage import get_store

    if size not in SIZES:
        raise ValueError(f"size is one of {SIZES}")
    factors(scene)  # range check before touching the store
    store = store or get_store()
    key = scene_key(scene, size)
    try:
        return store.get(key)
    except KeyError:
        if before_drawing is not None:
            before_drawing()
        data = encode_png(render(scene, size))
        store.put(key, data, content_type="image/png")
        return data
