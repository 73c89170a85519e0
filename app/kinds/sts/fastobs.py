"""Three of BabyAI's hot paths, computed the same way without minigrid's per-cell overhead.

The agent's view, without minigrid's intermediate grids:

minigrid builds the 7x7 egocentric view by slicing the grid into a new Grid, rotating it
(agent_dir + 1) times into new Grids, masking what walls hide and encoding the result, with
an assertion-checked get/set per cell at every stage: about 85% of a step's time (a step was
~780 us, which capped what batching the policy could gain). This module computes the same
array from a precomputed cell map per direction, reading the grid's cell list directly: the
same slice, rotation, occlusion pass and encoding, so the result is identical
(tests/unit/test_sts_env.py compares the two on every level).

The verifier's object search (`ObjDesc.find_matching_objs`): run on every reset and after
every drop, it scans the whole grid through the assertion-checked `Grid.get` (a 22 x 22
level: 484 calls, ~0.35 ms, more than the rest of a step). `find_matching_objs` below scans
the cell list directly, in the same column-major order, with the same filters, so it builds
the same lists; `install()` puts it on the class (tests/unit/test_sts_env.py compares).

The frame people watch (`full_frame`, what `get_frame` draws from above): minigrid recomputes
the agent's view through the slow path above to shade it, and compares every cell's position
with the agent's through `np.array_equal` (~7 ms a frame of a 22 x 22 level, ~3 ms of an 8 x 8
one: most of rendering a study's strips). `full_frame` shades the cells of the fast view and
gathers minigrid's own tiles in one numpy step: the same pixels (the test compares)."""

from __future__ import annotations

from functools import lru_cache
from itertools import chain

import numpy as np
from minigrid.core.constants import DIR_TO_VEC, OBJECT_TO_IDX
from minigrid.core.world_object import Wall

EMPTY = (OBJECT_TO_IDX["empty"], 0, 0)
UNSEEN = (OBJECT_TO_IDX["unseen"], 0, 0)  # a hidden cell
_WALL = Wall()  # what lies beyond the grid's edge (never changed, so one serves every view)


@lru_cache(maxsize=None)
def view_map(size: int, direction: int) -> tuple[tuple[int, int], ...]:
    """For each cell (i, j) of the final view, in the order i * size + j, the cell of the
    unrotated slice it shows: `Grid.rotate_left` maps (i, j) to (j, height - 1 - i), applied
    direction + 1 times."""
    cells = [[(i, j) for j in range(size)] for i in range(size)]
    for _ in range(direction + 1):
        turned = [[None] * size for _ in range(size)]
        for i in range(size):
            for j in range(size):
                turned[j][size - 1 - i] = cells[i][j]
        cells = turned
    return tuple(c for row in cells for c in row)


@lru_cache(maxsize=None)
def _flat_offsets(size: int, direction: int, width: int) -> tuple[int, ...]:
    """view_map as offsets into the grid's cell list from the slice's top-left cell."""
    return tuple(sj * width + si for si, sj in view_map(size, direction))


@lru_cache(maxsize=None)
def _visibility_plan(size: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """`Grid.process_vis`'s passes over the flat view (index i * size + j, the agent at
    (size // 2, size - 1)) in its order: for each cell, the cells it makes visible when it is
    visible itself and does not hide what is behind it."""
    plan = []
    for j in reversed(range(size)):
        for i in range(size - 1):
            k = i * size + j
            plan.append((k, (k + size, k + size - 1, k - 1) if j > 0 else (k + size,)))
        for i in reversed(range(1, size)):
            k = i * size + j
            plan.append((k, (k - size, k - size - 1, k - 1) if j > 0 else (k - size,)))
    return tuple(plan)


def _visible(view: list, size: int) -> list[bool]:
    """`Grid.process_vis` over the flat view: the same passes in the same order."""
    clear = [cell is None or cell.see_behind() for cell in view]
    mask = [False] * (size * size)
    mask[(size // 2) * size + size - 1] = True
    for k, targets in _visibility_plan(size):
        if mask[k] and clear[k]:
            for t in targets:
                mask[t] = True
    return mask


def _view(env) -> tuple[list, list[bool]]:
    """The agent's view (its cells, flat, before what it carries is put in its own) and which
    of them it sees, as `MiniGridEnv.gen_obs_grid` computes them."""
    size = env.agent_view_size
    top_x, top_y, _, _ = env.get_view_exts(size)
    grid = env.grid
    width, height, cells = grid.width, grid.height, grid.grid
    if 0 <= top_x and top_x + size <= width and 0 <= top_y and top_y + size <= height:
        base = top_y * width + top_x
        view = [cells[base + o] for o in _flat_offsets(size, env.agent_dir, width)]
    else:  # at the edge: cells beyond it are walls
        view = [
            cells[(top_y + sj) * width + top_x + si] if 0 <= top_x + si < width and 0 <= top_y + sj < height else _WALL
            for si, sj in view_map(size, env.agent_dir)
        ]
    return view, [True] * (size * size) if env.see_through_walls else _visible(view, size)


def gen_obs(env) -> dict:
    """What `MiniGridEnv.gen_obs` returns ({"image", "direction", "mission"}), faster."""
    size = env.agent_view_size
    view, mask = _view(env)
    # The agent sees what it carries in its own cell (and nothing else there).
    view[(size // 2) * size + size - 1] = env.carrying or None
    codes = [(EMPTY if v is None else v.encode()) if seen else UNSEEN for v, seen in zip(view, mask)]
    # A bytearray keeps the array writable, as minigrid's is.
    image = np.frombuffer(bytearray(chain.from_iterable(codes)), dtype=np.uint8).reshape(size, size, 3)
    return {"image": image, "direction": env.agent_dir, "mission": env.mission}


# A tile's pixels by (object code, agent direction or None, highlighted, tile size), as uint8.
_TILES: dict[tuple, np.ndarray] = {}


def full_frame(env, tile_size: int, highlight: bool = True) -> np.ndarray:
    """What `MiniGridEnv.get_frame(highlight, tile_size, agent_pov=False)` returns, pixel for
    pixel, in about a fifth of the time: the same cells shaded (the agent's view, through
    `_view`), each tile from `Grid.render_tile` (minigrid's drawing and its cache), put
    together by one numpy gather instead of minigrid's per-cell `np.array_equal` and slice."""
    from minigrid.core.grid import Grid

    grid = env.grid
    width, height, cells = grid.width, grid.height, grid.grid
    shaded: set[int] = set()
    if highlight:  # get_full_render's mapping from the view's cells to the grid's
        size = env.agent_view_size
        _, mask = _view(env)
        (fx, fy), (rx, ry), (ax, ay) = (map(int, v) for v in (env.dir_vec, env.right_vec, env.agent_pos))
        left = ax + fx * (size - 1) - rx * (size // 2)
        top = ay + fy * (size - 1) - ry * (size // 2)
        for k, seen in enumerate(mask):
            if seen:
                i, j = divmod(k, size)
                x, y = left - fx * j + rx * i, top - fy * j + ry * i
                if 0 <= x < width and 0 <= y < height:
                    shaded.add(y * width + x)
    agent = int(env.agent_pos[1]) * width + int(env.agent_pos[0])
    tiles = []
    for k, cell in enumerate(cells):
        key = (cell.encode() if cell is not None else (), env.agent_dir if k == agent else None, k in shaded, tile_size)
        tile = _TILES.get(key)
        if tile is None:  # minigrid's tiles are floats, cast when assigned into its uint8 frame
            tile = _TILES[key] = Grid.render_tile(cell, key[1], key[2], tile_size).astype(np.uint8)
        tiles.append(tile)
    t = tile_size
    return np.stack(tiles).reshape(height, width, t, t, 3).transpose(0, 2, 1, 3, 4).reshape(height * t, width * t, 3)


_SIDES = ("left", "right", "front", "behind")


def find_matching_objs(self, env, use_location=True):
    """`ObjDesc.find_matching_objs`, the same result: with `use_location`, the objects matching
    the description (type, colour, and a side relative to the agent within its room); without,
    the new positions of the objects already tracked. Both lists in column-major grid order."""
    env = env.unwrapped
    if use_location:
        self.obj_set = []
    self.obj_poss = []
    agent_room = env.room_from_pos(*env.agent_pos)
    grid = env.grid
    width, height, cells = grid.width, grid.height, grid.grid
    tracked = None if use_location else {id(o) for o in self.obj_set}
    side = self.loc if use_location and self.loc in _SIDES else None
    if side is not None:
        ax, ay = env.agent_pos
        d1 = tuple(int(x) for x in DIR_TO_VEC[env.agent_dir])
        d2 = (-d1[1], d1[0])
    want_type, want_colour = self.type, self.color
    size = width * height
    for i in range(width):
        for k in range(i, size, width):
            cell = cells[k]
            # The same filters as minigrid's, cheapest first (most cells are walls).
            if (
                cell is None
                or (want_type is not None and cell.type != want_type)
                or (want_colour is not None and cell.color != want_colour)
                or (tracked is not None and id(cell) not in tracked)
            ):
                continue
            j = k // width
            if side is not None:
                if not agent_room.pos_inside(i, j):
                    continue
                vx, vy = i - ax, j - ay
                along, across = vx * d1[0] + vy * d1[1], vx * d2[0] + vy * d2[1]
                if not {"left": across < 0, "right": across > 0, "front": along > 0, "behind": along < 0}[side]:
                    continue
            if use_location:
                self.obj_set.append(cell)
            self.obj_poss.append((i, j))
    return self.obj_set, self.obj_poss


_original_find = None


def install() -> None:
    """Put the fast object search on minigrid's ObjDesc (once per process)."""
    global _original_find
    from minigrid.envs.babyai.core.verifier import ObjDesc

    if _original_find is None:
        _original_find = ObjDesc.find_matching_objs
        ObjDesc.find_matching_objs = find_matching_objs


def original_find_matching_objs():
    """minigrid's own search (for the test that compares)."""
    from minigrid.envs.babyai.core.verifier import ObjDesc

    return _original_find or ObjDesc.find_matching_objs
