"""`proctor train sts-policy` (TaskKind.train_commands): the behavioural-cloning baseline. The
body is workers/sts/train.py (the app never imports torch until the command runs). It runs here
only (no job), on $PROCTOR_STS_DEVICE when --device is not given."""

from __future__ import annotations

from typing import Any

import click

from app.agents.training import model_files, seed_and_device, sizes
from app.commands import number_option
from app.kinds.sts.env import LEVELS

# The policy's sizes and schedule unless given (workers/sts/train.py's too).
TRAINING = {"epochs": 10, "embed": 32, "channels": 64, "hidden": 128, "batch": 128, "lr": 1e-3}
TRAINER = "workers.sts.train"


def _levels(_ctx, _param, values: tuple[str, ...]) -> tuple[str, ...]:
    """--levels A,B --levels C: names with or without the BabyAI- prefix and -v0 suffix."""
    out = []
    for value in values:
        for name in filter(None, (v.strip() for v in value.split(","))):
            level = name if name in LEVELS else f"BabyAI-{name}-v0"
            if level not in LEVELS:
                raise click.BadParameter(f"unknown level {name!r}: use one of {', '.join(LEVELS)}")
            out.append(level)
    return tuple(dict.fromkeys(out))


@click.command("sts-policy")
@model_files("the built-in policy's upload format", "policy")
@click.option(
    "--levels",
    multiple=True,
    callback=_levels,
    help="BabyAI levels to imitate, comma-separated or repeated (GoToLocal or BabyAI-GoToLocal-v0); "
    "default: GoToObj, GoToLocal, PickupLoc, OpenDoor.",
)
@number_option("--episodes", 200, click.IntRange(min=1), "Expert episodes per level for training (seeds 0..N-1).")
@number_option(
    "--held-out",
    50,
    click.IntRange(min=1),
    "Held-out episodes per level (seeds 1000000..) for accuracy and success rate.",
)
@sizes(**TRAINING)
@seed_and_device("Weights and shuffling: the same seed, the same policy (on the CPU).")
def sts_policy(levels: tuple[str, ...], device: str | None, **options: Any) -> None:
    """Train the behavioural-cloning STS policy on expert demonstrations and report its held-out
    action accuracy and success rate."""
    import importlib

    from app.errors import InputError
    from app.kinds.sts.policies import pick_device

    try:
        device = pick_device(device)
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint="--device") from None
    # Named, as training_command names the other kinds' trainers: the trainer reads TRAINING here.
    trainer = importlib.import_module(TRAINER)
    trainer.run_training(levels=levels or trainer.DEFAULT_LEVELS, device=device, echo=click.echo, **options)


def train_commands() -> list[click.Command]:
    return [sts_policy]
