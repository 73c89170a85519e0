"""The behavioural-cloning baseline (`proctor train sts-policy`): our built-in policy
(policy.FilmPolicy) trained with cross-entropy on the expert's actions.

Data: BabyAIBot (recordings.expert_recording) plays each chosen level from seeds 0..N-1; every
state it passes through, replayed, gives one (observation, expert action) pair. Held-out seeds
(HELD_OUT_SEEDS onwards) never meet the training ones. Quality, on the held-out seeds: the
share of the expert's actions the policy ranks first (action accuracy), and the share of
episodes it completes from the start when it acts alone, its actions sampled from its
probabilities as in continuations (rollout.rollout_batched), beside the random policy's.

The policy sees one observation at a time (it is stateless, as rollouts require), so where the
expert acts on what it remembers (a door it saw, a room it explored) the policy can only guess.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.kinds.sts.env import ACTIONS, ExpertError, Simulator, get_simulator
from app.kinds.sts.observations import encode_missions
from app.kinds.sts.recordings import Replayable, expert_recording, replay
from app.kinds.sts.rollout import Job, random_policy, rollout_batched
from app.kinds.sts.train import TRAINING
from workers.sts.policy import FilmPolicy, TorchPolicy
from workers.training import Adam, Recipe, descend, save_model, seed_all

HELD_OUT_SEEDS = 1_000_000  # held-out episodes are seeds 1000000.. of each level; training ones 0..
DEFAULT_LEVELS = ("BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0", "BabyAI-OpenDoor-v0")
Progress = Callable[[int], None]  # called with the number of units just done


@dataclass
class Demonstrations:
    """(observation, expert action) pairs, as arrays."""

    image: np.ndarray  # uint8 [N, 7, 7, 3]
    direction: np.ndarray  # int64 [N]
    mission: np.ndarray  # int64 [N, L] (observations.encode_missions)
    action: np.ndarray  # int64 [N]
    episodes: int
    skipped: list[str] = field(default_factory=list)  # "level seed" where the expert failed

    def __len__(self) -> int:
        return len(self.action)


def demonstrations(
    levels: Sequence[str], seeds: Sequence[int], simulator: Simulator | None = None, progress: Progress | None = None
) -> Demonstrations:
    sim = simulator or get_simulator()
    images, directions, missions, actions, skipped = [], [], [], [], []
    episodes = 0
    for level in levels:
        for seed in seeds:
            try:
                rec = expert_recording(level, seed, simulator=sim)
            except ExpertError:  # the bot gives up on a few layouts: left out, and counted
                skipped.append(f"{level} {seed}")
            else:
                steps = replay(rec, sim, frames=False).steps
                for s, a in zip(steps, rec.actions):
                    images.append(s.observation["image"])
                    directions.append(s.observation["direction"])
                    missions.append(s.observation["mission"])
                    actions.append(a)
                episodes += 1
            if progress:
                progress(1)
    if not actions:
        raise ValueError("the expert succeeded on none of the episodes: no demonstrations")
    return Demonstrations(
        np.stack(images).astype(np.uint8),
        np.array(directions, dtype=np.int64),
        encode_missions(missions),
        np.array(actions, dtype=np.int64),
        episodes,
        skipped,
    )


def _batch(data: Demonstrations, index: np.ndarray, dev: torch.device):
    mission = data.mission[index]
    mission = mission[:, : max(1, int((mission != 0).sum(1).max()))]
    return (
        torch.from_numpy(data.image[index]).to(dev),
        torch.from_numpy(data.direction[index]).to(dev),
        torch.from_numpy(mission).to(dev),
        torch.from_numpy(data.action[index]).to(dev),
    )


def train_policy(
    data: Demonstrations,
    *,
    device: str | torch.device = "cpu",
    progress: Callable[[int, float], None] | None = None,
    **recipe: Any,
) -> FilmPolicy:
    """Cross-entropy on the expert's actions; `progress(epoch, mean loss)` after each epoch.
    The same seed gives the same weights (on the CPU; CUDA's GRU kernels may differ in the
    last bits). `recipe`: the sizes and schedule (Recipe)."""
    r = Recipe.of(TRAINING, recipe)
    seed_all(r.seed)
    dev = torch.device(device)
    model = FilmPolicy(r.embed, r.channels, r.hidden).to(dev).train()
    opt = Adam(model.parameters(), lr=r.lr)
    order = np.random.default_rng(r.seed)
    for epoch in range(r.epochs):
        perm = order.permutation(len(data))
        total = 0.0
        for start in range(0, len(perm), r.batch):
            image, direction, mission, action = _batch(data, perm[start : start + r.batch], dev)
            loss = torch.nn.functional.cross_entropy(model.act(image, direction, mission), action)
            total += descend(opt, loss, model.parameters()) * len(action)
        if progress:
            progress(epoch + 1, total / len(data))
    return model.eval().cpu()


@torch.no_grad()
def action_accuracy(
    model: FilmPolicy, data: Demonstrations, device: str | torch.device = "cpu", batch: int = 512
) -> float:
    """The share of the expert's actions that the policy ranks first."""
    dev = torch.device(device)
    model = model.to(dev).eval()
    right = 0
    for start in range(0, len(data), batch):
        image, direction, mission, action = _batch(data, np.arange(start, min(start + batch, len(data))), dev)
        right += int((model.act(image, direction, mission).argmax(-1) == action).sum())
    model.cpu()
    return right / len(data)


def episode_jobs(
    levels: Sequence[str], seeds: Sequence[int], simulator: Simulator | None = None, seed: int = 0
) -> list[Job]:
    """Whole episodes as continuations: no context (takeover 0), as long as the level allows.
    Each samples with its own seed (`seed` + its index), so any policy meets the same draws."""
    sim = simulator or get_simulator()
    jobs = []
    for level in levels:
        for s in seeds:
            ep = sim.reset(level, s)
            jobs.append(Job(Replayable(level, s, ep.mission, [], "agent"), 0, ep.max_steps, seed + len(jobs)))
    return jobs


def success_rate(
    policy, jobs: Sequence[Job], simulator: Simulator | None = None, batch_size: int = 64, progress=None
) -> dict:
    """The share of jobs the policy completes, overall and per level (batched rollout)."""
    results = rollout_batched(list(jobs), policy, simulator, batch_size=batch_size, progress=progress)
    per: dict[str, list[bool]] = {}
    for job, c in zip(jobs, results):
        per.setdefault(job.recording.level, []).append(c.success_step is not None)
    wins = [w for v in per.values() for w in v]
    return {
        "episodes": len(wins),
        "success": sum(wins) / len(wins),
        "per_level": {lv: sum(v) / len(v) for lv, v in per.items()},
    }


def save_policy(model: FilmPolicy, folder: str | Path, name: str = "policy") -> tuple[Path, Path]:
    """The policy's upload files (save_model)."""
    return save_model(model, folder, name)


def load_policy(weights: str | Path | bytes, config: dict) -> FilmPolicy:
    """What uploaded_policy builds from the two files (never a pickle)."""
    from workers.sts.loading import load_bytes

    data = weights if isinstance(weights, bytes) else Path(weights).read_bytes()
    return load_bytes("safetensors", data, config)


def run_training(
    *,
    levels: Sequence[str] = DEFAULT_LEVELS,
    episodes: int = 200,
    held_out: int = 50,
    device: str = "cpu",
    out: str | Path = "var/models",
    name: str = "policy",
    echo: Callable[[str], None] = print,
    **recipe: Any,
) -> dict:
    """The whole command: demonstrations, training, held-out quality, files. Progress bars on
    stderr (tqdm), results through `echo`."""
    from tqdm import tqdm

    r = Recipe.of(TRAINING, recipe)
    sim = get_simulator()
    levels = list(levels)
    with tqdm(total=len(levels) * (episodes + held_out), desc="expert episodes", unit="episode") as bar:
        train = demonstrations(levels, range(episodes), sim, progress=bar.update)
        test = demonstrations(levels, range(HELD_OUT_SEEDS, HELD_OUT_SEEDS + held_out), sim, progress=bar.update)
    echo(
        f"{len(train)} expert steps from {train.episodes} training episodes, {len(test)} from "
        f"{test.episodes} held-out ones"
        + (
            f" (the expert failed on {len(train.skipped) + len(test.skipped)}, left out)"
            if train.skipped or test.skipped
            else ""
        )
    )
    with tqdm(total=r.epochs, desc="training", unit="epoch") as bar:

        def epoch(_n: int, loss: float) -> None:
            bar.set_postfix_str(f"loss {loss:.3f}")
            bar.update(1)

        model = train_policy(train, **asdict(r), device=device, progress=epoch)
    accuracy = action_accuracy(model, test, device)
    train_accuracy = action_accuracy(model, train, device)
    chance = float(np.bincount(test.action, minlength=len(ACTIONS)).max() / len(test))
    jobs = episode_jobs(levels, range(HELD_OUT_SEEDS, HELD_OUT_SEEDS + held_out), sim, seed=r.seed)
    rates = {}
    for label, policy in (("policy", TorchPolicy(model.to(device), device)), ("random", random_policy())):
        with tqdm(total=len(jobs), desc=f"held-out episodes ({label})", unit="episode") as bar:
            rates[label] = success_rate(policy, jobs, sim, progress=lambda d, _t: bar.update(d - bar.n))
    model.cpu()
    echo(
        f"held-out action accuracy: {accuracy:.1%} (training {train_accuracy:.1%}; the most common "
        f"expert action alone: {chance:.1%})"
    )
    echo(
        f"held-out success rate over {len(jobs)} episodes, actions sampled: {rates['policy']['success']:.1%} "
        f"(random policy: {rates['random']['success']:.1%})"
    )
    for level in levels:
        echo(f"  {level}: {rates['policy']['per_level'][level]:.1%} (random {rates['random']['per_level'][level]:.1%})")
    weights, config = save_policy(model, out, name)
    echo(f"wrote {weights} and {config}")
    report = {
        "levels": levels,
        "episodes": episodes,
        "held_out": held_out,
        "epochs": r.epochs,
        "seed": r.seed,
        **model.config(),
        "train_steps": len(train),
        "held_out_steps": len(test),
        "skipped": train.skipped + test.skipped,
        "action_accuracy": accuracy,
        "train_action_accuracy": train_accuracy,
        "majority_action_accuracy": chance,
        "success_rate": rates["policy"],
        "random_success_rate": rates["random"],
    }
    (Path(out) / f"{name}-quality.json").write_text(json.dumps(report, indent=1))
    return report
