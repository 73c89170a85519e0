"""The STS simulator: one small interface (`Simulator`, `Episode`) and BabyAI behind it.

The kind only ever talks to `Simulator` and `Episode`, so another simulator can be added by
writing one more pair of classes. What the kind relies on:

- Determinism: `reset(level, seed)` followed by the same actions gives the same observations,
  frames and outcome, in any process. State is never snapshotted: a state is restored by
  replaying (level, seed, actions) (see `recordings.replay`).
- The simulator's own outcome: `StepResult.success` is the simulator's verdict, never a guess
  from the reward.
- The agent's observation (what uploaded policies see, documented in `observation()`).

BabyAI (the `minigrid` package): levels are the gymnasium ids `BabyAI-*-v0` in `LEVELS`. A
mission is given with the first observation, before any action: in BabyAI "the step the mission
is given" is step 0, the same as the first step. Success is decided by the level's verifier
(`RoomGridLevel.step`): on "success" it ends the episode (`terminated`) with reward
`1 - 0.9 * step_count / max_steps`, which is at least 0.1; on "failure" it ends it with reward 0;
reaching `max_steps` truncates it. So success == terminated and reward > 0, exactly.
"""

from __future__ import annotations

import contextlib
import copy
import io
import pickle
import threading
import types
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# minigrid.core.actions.Actions, in its order: the ints are minigrid's own.
ACTIONS: tuple[str, ...] = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
ACTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(ACTIONS)}
# Seeds are stored in 32-bit integer columns.
MAX_SEED = 2**31 - 1
# redirect_stdout swaps sys.stdout for the whole process: two threads resetting at once (the web
# app's sync routes run in a pool) could leave it pointing at a dead buffer, so resets take turns.
_RESET_LOCK = threading.Lock()

CATEGORIES: tuple[str, ...] = ("go to", "pick up", "open", "put next to", "sequence")

# Level id -> family (the scenario's default category). Levels whose missions mix families map
# to None: their category comes from the mission (`mission_category`).
LEVELS: dict[str, str | None] = {
    "BabyAI-GoToRedBallGrey-v0": "go to",
    "BabyAI-GoToRedBall-v0": "go to",
    "BabyAI-GoToObj-v0": "go to",
    "BabyAI-GoToLocal-v0": "go to",
    "BabyAI-GoToDoor-v0": "go to",
    "BabyAI-GoToObjMaze-v0": "go to",
    "BabyAI-GoTo-v0": "go to",
    "BabyAI-PickupDist-v0": "pick up",
    "BabyAI-PickupLoc-v0": "pick up",
    "BabyAI-Pickup-v0": "pick up",
    # The "Debug" levels are strict: taking a wrong object or opening a wrong door is the
    # simulator's own failure, which ends the episode (elsewhere only the step limit does).
    "BabyAI-PickupDistDebug-v0": "pick up",
    "BabyAI-OpenDoor-v0": "open",
    "BabyAI-OpenDoorColor-v0": "open",
    "BabyAI-OpenDoorLoc-v0": "open",
    "BabyAI-OpenRedDoor-v0": "open",
    "BabyAI-Open-v0": "open",
    "BabyAI-OpenDoorDebug-v0": "open",
    "BabyAI-PutNextLocal-v0": "put next to",
    "BabyAI-PutNextS5N1-v0": "put next to",
    "BabyAI-PutNextS6N3-v0": "put next to",
    "BabyAI-PutNextS7N4-v0": "put next to",
    "BabyAI-GoToSeq-v0": "sequence",
    "BabyAI-SynthSeq-v0": "sequence",
    "BabyAI-MiniBossLevel-v0": "sequence",
    "BabyAI-BossLevelNoUnlock-v0": "sequence",
    "BabyAI-BossLevel-v0": "sequence",
    # One instruction of any family per episode ("Synth" = union of GoTo, Pickup, Open, PutNext).
    "BabyAI-Synth-v0": None,
    "BabyAI-SynthLoc-v0": None,
}


class SimulatorError(ValueError):
    """A request the simulator cannot honour: unknown level, bad seed or action, a finished episode."""


class ActionError(SimulatorError):
    """An action that is neither one of `ACTIONS` nor its index."""


class EpisodeEnded(SimulatorError):
    """An action after the episode ended (success, failure or time out)."""


class ExpertError(RuntimeError):
    """The expert cannot suggest an action from this state (the bot gave up or failed)."""


def action_index(value) -> int:
    """The int of an action given as its int or its name; ActionError naming the value otherwise."""
    if isinstance(value, str):
        if value in ACTION_INDEX:
            return ACTION_INDEX[value]
        raise ActionError(f"unknown action {value!r}: use one of {', '.join(ACTIONS)} or 0-{len(ACTIONS) - 1}")
    # bool is an int to Python, but `true` in a file is not an action.
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if 0 <= int(value) < len(ACTIONS):
            return int(value)
        raise ActionError(f"action {int(value)} is out of range 0-{len(ACTIONS) - 1} ({', '.join(ACTIONS)})")
    raise ActionError(f"action {value!r} is neither an action name nor a whole number")


def mission_category(mission: str) -> str:
    """The family of a BabyAI mission from its surface form (verifier.py's `surface` methods):
    sequences join two instructions with ", then", " after you " or " and "; single ones start
    with their verb. Object descriptions ("the red ball behind you") never contain these."""
    if ", then " in mission or " after you " in mission or " and " in mission:
        return "sequence"
    for prefix, family in (("go to ", "go to"), ("pick up ", "pick up"), ("open ", "open"), ("put ", "put next to")):
        if mission.startswith(prefix):
            return family
    raise SimulatorError(f"mission {mission!r} is not one of the BabyAI families")


@dataclass(frozen=True)
class StepResult:
    observation: dict  # as `Episode.observation()`
    done: bool  # the episode has ended: success, failure or time out; no further action is taken
    success: bool  # the simulator's own verdict that the mission is accomplished
    truncated: bool  # ended by the step limit (`max_steps`) rather than by the mission
    step: int  # actions taken so far in the episode, this one included


class Episode(ABC):
    """One episode: the mission, the state after the actions taken so far, and stepping."""

    level: str
    seed: int
    mission: str
    max_steps: int  # the simulator truncates the episode after this many actions
    steps: int  # actions taken so far
    done: bool
    success: bool
    expert_error: str | None = None  # why the expert gave up in this episode, once it has

    @abstractmethod
    def step(self, action) -> StepResult:
        """Take one action (int or name). ActionError if it is not an action, EpisodeEnded if
        the episode is over."""

    @abstractmethod
    def observation(self) -> dict:
        """What the agent observes now."""

    @abstractmethod
    def frame(self, tile_size: int = 8) -> np.ndarray:
        """The whole scene, for people to watch: RGB uint8 [H, W, 3]."""

    @abstractmethod
    def expert_action(self) -> int:
        """The scripted expert's action from the current state; ExpertError if it has none."""

    def reset_expert(self) -> None:  # noqa: B027 - optional: an expert without a plan keeps none
        """Forget the expert's plan and any failure: the next `expert_action` plans afresh."""

    def snapshot(self) -> Callable[[], Episode]:
        """A function that returns, at each call, a new independent episode in this one's
        present state (expert included): C continuations of one scenario start from one
        forced context instead of C level generations. A simulator may do it faster."""
        frozen = copy.deepcopy(self)
        return lambda: copy.deepcopy(frozen)


class Simulator(ABC):
    """A family of levels, each reset by a seed into an `Episode`."""

    name: str
    actions: tuple[str, ...] = ACTIONS

    @abstractmethod
    def levels(self) -> tuple[str, ...]:
        """Supported level ids, in a stable order."""

    @abstractmethod
    def category_of(self, level: str, mission: str | None = None) -> str:
        """The level's family (a scenario's default category)."""

    @abstractmethod
    def reset(self, level: str, seed: int) -> Episode:
        """A new episode of `level` from `seed`. SimulatorError for an unknown level or bad seed."""

    def check_level(self, level) -> str:
        if not isinstance(level, str) or level not in self.levels():
            raise SimulatorError(f"unknown level {level!r} for {self.name}: use one of {', '.join(self.levels())}")
        return level

    @staticmethod
    def check_seed(seed) -> int:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
            raise SimulatorError(f"seed {seed!r} must be a whole number from 0 to {MAX_SEED}")
        return int(seed)


class BabyAIEpisode(Episode):
    def __init__(self, level: str, seed: int):
        import gymnasium as gym
        import minigrid  # noqa: F401  (registers the BabyAI-* ids with gymnasium)

        from app.kinds.sts.fastobs import gen_obs, install

        install()
        self.level, self.seed = level, seed

        # The bare environment: gymnasium's wrappers only check call order, and cost per step.
        self._env = gym.make(level, disable_env_checker=True).unwrapped
        # The same observation minigrid computes, in a fifth of the time (fastobs.py).
        self._env.gen_obs = types.MethodType(gen_obs, self._env)
        # Level generation prints each rejected layout ("Sampling rejected: ..."); keep stdout clean
        # for CLI output.
        with _RESET_LOCK, contextlib.redirect_stdout(io.StringIO()):
            self._obs, _ = self._env.reset(seed=seed)
        self.mission = self._env.mission
        self.max_steps = int(self._env.max_steps)
        self.steps = 0
        self.done = self.success = self.truncated = False
        self._last_action: int | None = None
        self.reset_expert()

    def reset_expert(self) -> None:
        self._bot = None
        self.expert_error = None
        self._bot_at = -1  # `steps` when the bot last planned
        self._bot_suggested: int | None = None

    def snapshot(self) -> Callable[[], BabyAIEpisode]:
        """Pickled once, unpickled per call: 0.4-1 ms against 1-5 ms for a level generation.
        The fast view is a bound method on the environment: set again on each copy."""
        from app.kinds.sts.fastobs import gen_obs

        fast = self._env.__dict__.pop("gen_obs")
        try:
            data = pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            self._env.gen_obs = fast

        def restore() -> BabyAIEpisode:
            episode = pickle.loads(data)
            episode._env.gen_obs = types.MethodType(gen_obs, episode._env)
            return episode

        return restore

    def step(self, action) -> StepResult:
        a = action_index(action)
        if self.done:
            raise EpisodeEnded(f"the episode ended at step {self.steps}; no action can follow")
        self._obs, reward, terminated, truncated, _ = self._env.step(a)
        self.steps += 1
        self._last_action = a
        self.success = bool(terminated and reward > 0)
        self.truncated = bool(truncated and not terminated)
        self.done = bool(terminated or truncated)
        return StepResult(self.observation(), self.done, self.success, self.truncated, self.steps)

    def observation(self) -> dict:
        """The documented agent observation: `image` uint8 [7, 7, 3], the egocentric symbolic
        view (object type, colour, state per cell; the agent sits at the bottom middle, facing
        up); `direction` 0-3 (0 east, 1 south, 2 west, 3 north); `mission` the instruction."""
        return {"image": self._obs["image"], "direction": int(self._obs["direction"]), "mission": self.mission}

    def frame(self, tile_size: int = 8, highlight: bool = True) -> np.ndarray:
        """The full grid seen from above; `highlight` shades the cells the agent sees. Minigrid's
        `get_frame`, computed faster (fastobs.full_frame)."""
        from app.kinds.sts.fastobs import full_frame

        return full_frame(self._env, tile_size, highlight)

    def expert_action(self) -> int:
        """BabyAIBot's next action. The bot is built at the first call, from the current state,
        and kept while it is asked before every step; if steps were taken without asking it, it
        is built afresh (its memory of what it saw would be stale). An action other than its
        suggestion is passed to it, so it replans around it (BabyAI's advisor mode: how the
        expert follows a forced context, see rollout.start). Once the bot fails it stays failed
        until `reset_expert`."""
        from minigrid.utils.baby_ai_bot import BabyAIBot

        if self.done:
            raise EpisodeEnded(f"the episode ended at step {self.steps}")
        if self.expert_error is not None:
            raise ExpertError(self.expert_error)
        if self._bot is not None and self._bot_at == self.steps:
            return self._bot_suggested  # asked twice at one step: replanning again would drift
        try:
            if self._bot is None or self._bot_at != self.steps - 1:
                self._bot = BabyAIBot(self._env)
                taken = None
            else:
                # None tells the bot its suggestion was taken; another action makes it replan.
                taken = None if self._last_action == self._bot_suggested else self._last_action
            suggested = int(self._bot.replan(taken))
        except Exception as exc:  # the bot asserts on states it cannot handle
            self.expert_error = f"the expert gave up at step {self.steps}: {type(exc).__name__} {exc}".rstrip()
            raise ExpertError(self.expert_error) from None
        self._bot_at, self._bot_suggested = self.steps, suggested
        return suggested


class BabyAISimulator(Simulator):
    name = "babyai"

    def __init__(self):
        from minigrid.envs.babyai.core import verifier

        # BABYAI_DONE_ACTIONS changes when missions succeed (only on `done`): recordings made
        # under one setting would not replay under the other.
        if verifier.use_done_actions:
            raise SimulatorError(
                "BABYAI_DONE_ACTIONS is set: unset it, recordings assume missions succeed without the done action"
            )

    def levels(self) -> tuple[str, ...]:
        return tuple(LEVELS)

    def category_of(self, level: str, mission: str | None = None) -> str:
        family = LEVELS[self.check_level(level)]
        if family is not None:
            return family
        if mission is None:
            raise SimulatorError(f"{level} mixes families: its category comes from the mission")
        return mission_category(mission)

    def reset(self, level: str, seed: int) -> BabyAIEpisode:
        return BabyAIEpisode(self.check_level(level), self.check_seed(seed))


_SIMULATORS: dict[str, type[Simulator]] = {"babyai": BabyAISimulator}


def get_simulator(name: str = "babyai") -> Simulator:
    """The simulator registered under `name`."""
    if name not in _SIMULATORS:
        raise SimulatorError(f"unknown simulator {name!r}: use one of {', '.join(_SIMULATORS)}")
    return _SIMULATORS[name]()
