"""The STS simulator interface and BabyAI behind it (app/kinds/sts/env.py)."""

import gymnasium as gym
import numpy as np
import pytest

from app.kinds.sts.env import (
    ACTIONS,
    CATEGORIES,
    LEVELS,
    ActionError,
    BabyAISimulator,
    EpisodeEnded,
    Simulator,
    SimulatorError,
    action_index,
    get_simulator,
    mission_category,
)
from tests.conftest import untraced

SIM = BabyAISimulator()


def test_supported_levels_are_registered_and_each_resets():
    assert isinstance(SIM, Simulator) and SIM.levels() == tuple(LEVELS)
    for level in SIM.levels():
        assert level in gym.registry, level
        ep = SIM.reset(level, 1)
        obs = ep.observation()
        assert obs["image"].shape == (7, 7, 3) and obs["image"].dtype == np.uint8
        assert obs["direction"] in range(4) and obs["mission"] == ep.mission and ep.mission
        assert ep.max_steps > 0 and ep.steps == 0 and not ep.done
        family = SIM.category_of(level, ep.mission)
        assert family in CATEGORIES
        if LEVELS[level] is not None:
            assert family == LEVELS[level] == SIM.category_of(level)


def test_every_family_has_levels():
    assert {SIM.category_of(lv, "go to the red ball") for lv in SIM.levels()} == set(CATEGORIES)


def test_mixed_levels_take_the_mission_family():
    assert SIM.category_of("BabyAI-Synth-v0", "put the red ball next to a key") == "put next to"
    assert mission_category("pick up a purple ball and open a red door") == "sequence"
    assert mission_category("open the yellow door, then open the red door") == "sequence"
    assert mission_category("go to a box after you pick up the key behind you") == "sequence"
    assert mission_category("go to the grey key on your left") == "go to"
    with pytest.raises(SimulatorError, match="mixes families"):
        SIM.category_of("BabyAI-Synth-v0")
    with pytest.raises(SimulatorError, match="unknown level"):
        SIM.category_of("BabyAI-Nope-v0")


def test_actions_are_minigrids_ints_and_names():
    from minigrid.core.actions import Actions

    assert ACTIONS == tuple(a.name for a in Actions)
    assert [action_index(n) for n in ACTIONS] == [int(a) for a in Actions] == list(range(7))
    assert action_index(np.int64(5)) == 5
    for bad, said in (
        (7, "action 7 is out of range 0-6"),
        (-1, "action -1 is out of range"),
        ("jump", "unknown action 'jump'"),
        (True, "True is neither"),
        (2.0, "2.0 is neither"),
    ):
        with pytest.raises(ActionError, match=said):
            action_index(bad)


def test_step_refuses_a_bad_action_and_any_after_the_end():
    ep = SIM.reset("BabyAI-GoToLocal-v0", 3)
    with pytest.raises(ActionError, match="action 9"):
        ep.step(9)
    assert ep.steps == 0  # a refused action does not count
    while not ep.done:
        ep.step(ep.expert_action())
    assert ep.success
    with pytest.raises(EpisodeEnded, match=f"ended at step {ep.steps}"):
        ep.step("left")


def test_reset_refuses_unknown_levels_and_bad_seeds():
    with pytest.raises(SimulatorError, match="unknown level 'BabyAI-KeyInBox-v0'"):
        SIM.reset("BabyAI-KeyInBox-v0", 0)  # registered, but the expert cannot solve it: not supported
    for seed in (-1, 2**31, 1.5, True, "3"):
        with pytest.raises(SimulatorError, match="seed"):
            SIM.reset("BabyAI-GoToLocal-v0", seed)


def test_same_seed_same_episode_across_instances():
    a, b = SIM.reset("BabyAI-PutNextLocal-v0", 11), get_simulator("babyai").reset("BabyAI-PutNextLocal-v0", 11)
    assert a.mission == b.mission and a.max_steps == b.max_steps
    assert np.array_equal(a.frame(4), b.frame(4))
    for action in ("left", "forward", "forward", "right", "forward"):
        ra, rb = a.step(action), b.step(action)
        assert np.array_equal(ra.observation["image"], rb.observation["image"])
        assert ra.observation["direction"] == rb.observation["direction"]
    assert a.frame(4).tobytes() == b.frame(4).tobytes()
    assert SIM.reset("BabyAI-PutNextLocal-v0", 12).frame(4).tobytes() != a.frame(4).tobytes()


def test_frame_is_the_full_grid_in_rgb():
    ep = SIM.reset("BabyAI-GoTo-v0", 0)  # 3x3 rooms of 7 cells + walls: 22x22 cells
    f = ep.frame(4)
    assert f.shape == (22 * 4, 22 * 4, 3) and f.dtype == np.uint8
    assert not np.array_equal(f, ep.frame(4, highlight=False))  # the agent's view is shaded


def test_success_is_the_simulators_verdict():
    # Stepping until success: terminated with reward > 0 is the verifier's "success".
    ep = SIM.reset("BabyAI-PickupLoc-v0", 4)
    results = []
    while not ep.done:
        results.append(ep.step(ep.expert_action()))
    assert [r.success for r in results] == [False] * (len(results) - 1) + [True]
    assert results[-1].done and not results[-1].truncated and results[-1].step == len(results)


def test_time_out_is_not_success():
    ep = SIM.reset("BabyAI-GoToObj-v0", 0)
    r = None
    for _ in range(ep.max_steps):
        r = ep.step("left")  # spinning on the spot never reaches anything
    assert r.done and r.truncated and not r.success and ep.steps == ep.max_steps


def test_a_failure_of_the_verifier_ends_without_success():
    # Strict levels fail an episode when a wrong door is opened; only some seeds put one nearby.
    rng = np.random.default_rng(0)
    for seed in range(30):
        ep = SIM.reset("BabyAI-OpenDoorDebug-v0", seed)
        while not ep.done:
            r = ep.step(int(rng.integers(0, 7)))
        if not r.success and not r.truncated:
            assert r.done and ep.steps < ep.max_steps
            return
    pytest.fail("no seed gave a failure")


def test_expert_can_take_over_mid_episode():
    ep = SIM.reset("BabyAI-GoTo-v0", 5)
    for a in ("left", "left", "forward", "right", "forward"):
        ep.step(a)
    while not ep.done:
        ep.step(ep.expert_action())
    assert ep.success


def test_the_fast_view_is_minigrids_own_on_every_level():
    """fastobs.gen_obs must return what minigrid's gen_obs does, cell for cell: random walks
    that turn, move, pick up, drop and open on every level, from several seeds, compared at
    every step (edges of the grid, walls that hide, carried objects and open doors included)."""
    from minigrid.minigrid_env import MiniGridEnv

    from app.kinds.sts.fastobs import gen_obs

    sim = get_simulator()
    rng = np.random.default_rng(7)
    seen = {"carrying": 0, "edge": 0, "hidden": 0}
    with untraced():
        for level in LEVELS:
            for seed in (0, 1):
                ep = sim.reset(level, seed)
                env = ep._env
                assert ep.observation()["image"].tolist() == MiniGridEnv.gen_obs(env)["image"].tolist()
                for _ in range(60):
                    if ep.done:
                        break
                    ep.step(int(rng.choice([0, 1, 2, 2, 2, 3, 4, 5])))
                    ours, theirs = gen_obs(env), MiniGridEnv.gen_obs(env)
                    assert ours["image"].dtype == theirs["image"].dtype == np.uint8
                    assert ours["image"].tolist() == theirs["image"].tolist(), (level, seed, ep.steps)
                    assert (ours["direction"], ours["mission"]) == (theirs["direction"], theirs["mission"])
                    # The step's own observation is ours.
                    assert ep.observation()["image"].tolist() == theirs["image"].tolist()
                    top_x, top_y, bot_x, bot_y = env.get_view_exts()
                    seen["edge"] += not (0 <= top_x and bot_x <= env.width and 0 <= top_y and bot_y <= env.height)
                    seen["carrying"] += env.carrying is not None
                    seen["hidden"] += int((theirs["image"][:, :, 0] == 0).any())
    assert all(n > 20 for n in seen.values()), seen


def test_the_fast_frame_is_minigrids_own_on_every_level():
    """fastobs.full_frame must draw what minigrid's get_frame does, pixel for pixel, shaded and
    not, at two tile sizes: random walks that turn, move, pick up, drop and open on every
    level (the agent at the grid's edge, walls hiding cells, carried objects, open doors)."""
    from minigrid.minigrid_env import MiniGridEnv

    from app.kinds.sts.fastobs import full_frame

    sim = get_simulator()
    rng = np.random.default_rng(11)
    seen = {"frames": 0, "carrying": 0, "hidden": 0}
    with untraced():
        for level in LEVELS:
            ep = sim.reset(level, 0)
            env = ep._env
            for step in range(14):
                for tile, highlight in ((16, True), (16, False), (8, True)) if step % 5 == 0 else ((16, True),):
                    theirs = MiniGridEnv.get_frame(env, highlight=highlight, tile_size=tile, agent_pov=False)
                    ours = full_frame(env, tile, highlight)
                    assert ours.dtype == theirs.dtype == np.uint8 and ours.shape == theirs.shape
                    assert ours.tobytes() == theirs.tobytes(), (level, ep.steps, tile, highlight)
                    seen["frames"] += 1
                seen["carrying"] += env.carrying is not None
                seen["hidden"] += int((ep.observation()["image"][:, :, 0] == 0).any())
                if ep.done:
                    break
                ep.step(int(rng.choice([0, 1, 2, 2, 3, 3, 4, 5])))
            assert ep.frame(16).tobytes() == full_frame(env, 16).tobytes()  # the episode's frame is ours
    assert seen["frames"] > 400 and seen["carrying"] > 10 and seen["hidden"] > 100, seen


def test_the_fast_object_search_is_minigrids_own_on_every_level():
    """fastobs.find_matching_objs (installed on ObjDesc) must build the lists minigrid's does,
    in the same order: every description of every mission, with and without location, after
    random walks that pick up and drop (what moves objects) on every level."""
    from minigrid.envs.babyai.core.verifier import ObjDesc

    from app.kinds.sts.fastobs import find_matching_objs, original_find_matching_objs

    sim = get_simulator()
    original = original_find_matching_objs()
    sim.reset(next(iter(LEVELS)), 0)
    assert ObjDesc.find_matching_objs is find_matching_objs  # installed by the simulator's episodes
    rng = np.random.default_rng(3)
    compared = located = 0

    def descriptions(instr):
        for attr in ("instr_a", "instr_b"):
            if hasattr(instr, attr):
                yield from descriptions(getattr(instr, attr))
        for attr in ("desc", "desc_move", "desc_fixed"):
            if hasattr(instr, attr):
                yield getattr(instr, attr)

    with untraced():
        for level in LEVELS:
            for seed in (0, 1):
                ep = sim.reset(level, seed)
                env = ep._env
                for _ in range(25):
                    for desc in descriptions(env.instrs):
                        for use_location in (True, False):
                            before = (list(desc.obj_set), list(desc.obj_poss))
                            ours = [list(x) for x in find_matching_objs(desc, env, use_location)]
                            desc.obj_set, desc.obj_poss = list(before[0]), list(before[1])
                            theirs = [list(x) for x in original(desc, env, use_location)]
                            assert [[id(o) for o in ours[0]], ours[1]] == [[id(o) for o in theirs[0]], theirs[1]], (
                                level,
                                seed,
                                use_location,
                            )
                            desc.obj_set, desc.obj_poss = before
                            compared += 1
                            located += use_location and desc.loc is not None
                    if ep.done:
                        break
                    ep.step(int(rng.choice([0, 1, 2, 2, 3, 4])))
    assert compared > 1000 and located > 20, (compared, located)


def test_a_snapshot_behaves_as_the_episode_it_was_taken_from():
    """Continuations of one scenario start from copies of one forced context (rollout._Starts):
    each copy must step, see and succeed exactly as the original, the expert included."""
    sim = get_simulator()
    rng = np.random.default_rng(0)
    for level in LEVELS:
        ep = sim.reset(level, 4)
        for a in rng.integers(0, 6, 4):
            if not ep.done:
                ep.step(int(a))
        if ep.done:
            continue
        ep.expert_action()
        restore = ep.snapshot()
        runs = []
        actions = rng.integers(0, 7, 30)
        for e in (ep, restore(), restore()):
            seen = []
            for a in actions:
                if e.done:
                    break
                r = e.step(int(a))
                seen.append((r.observation["image"].tolist(), r.observation["direction"], r.done, r.success))
            seen.append(None if e.done else e.expert_action())
            runs.append(seen)
        assert runs[0] == runs[1] == runs[2], level
