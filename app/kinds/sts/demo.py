"""The demo suite: expert recordings on four BabyAI level families, each a scenario taken over
two steps in (fewer when the expert is done sooner), continued by the expert (the skyline) and by a random policy, plus reference
episodes with known labels. Deterministic, made in a second or two."""

from __future__ import annotations

import json

import numpy as np

from app.kinds.sts.env import ACTIONS, get_simulator

LEVELS = ("BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0", "BabyAI-OpenDoor-v0", "BabyAI-PutNextLocal-v0")
SEEDS = (1, 2)
REFERENCE_SEEDS = (11,)
TAKEOVER = 2
CONTINUATIONS = 2  # per scenario and agent (the paper uses ten)
LENGTH = 40  # the agent's own steps at most


def _episode(sim, level: str, seed: int, context: list[int], policy, length: int) -> list[int]:
    """The context forced, then `policy(episode)` for up to `length` steps or the episode's end."""
    ep = sim.reset(level, seed)
    for a in context:
        ep.step(a)
    actions = list(context)
    while not ep.done and len(actions) - len(context) < length:
        a = policy(ep)
        ep.step(a)
        actions.append(a)
    return actions


def _expert_context(sim, level: str, seed: int) -> tuple[str, list[int]]:
    """The mission and the expert's first TAKEOVER actions (fewer when it succeeds sooner: the
    agent must have something left to do)."""
    ep = sim.reset(level, seed)
    actions = []
    while not ep.done:
        a = ep.expert_action()
        ep.step(a)
        actions.append(a)
    return ep.mission, actions[:min(TAKEOVER, len(actions) - 1)]


def demo_lines() -> list[dict]:
    sim = get_simulator()
    lines = []
    for level in LEVELS:
        for seed in SEEDS + REFERENCE_SEEDS:
            mission, context = _expert_context(sim, level, seed)
            reference = seed in REFERENCE_SEEDS
            scenario = f"{level.removeprefix('BabyAI-').removesuffix('-v0')}-{seed}"
            for c in range(CONTINUATIONS if not reference else 1):
                rng = np.random.default_rng([seed, c])
                agents = {"expert": lambda ep: ep.expert_action(),
                          "random": lambda ep, rng=rng: int(rng.integers(0, len(ACTIONS) - 1))}
                for agent, policy in agents.items():
                    actions = _episode(sim, level, seed, context, policy, LENGTH)
                    line = {"scenario": scenario, "agent": agent, "continuation": c, "level": level,
                            "seed": seed, "mission": mission, "actions": actions, "takeover": len(context)}
                    if reference:  # labelled by the simulator's own outcome
                        line.update(reference=True, id=f"reference/{scenario}/{agent}")
                    lines.append(line)
    return lines


def demo_continuations() -> bytes:
    return "\n".join(json.dumps(x) for x in demo_lines()).encode()
