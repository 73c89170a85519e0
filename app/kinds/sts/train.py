"""`proctor train sts-policy` (TaskKind.train_commands): the behavioural-cloning baseline. The
body is workers/sts/train.py (the app never imports torch until the command runs). It runs here
only (no job), on $PROCTOR_STS_DEVICE when --device is not given."""

from __future__ import annotations

import click

from app.agents.training import model_files, seed_and_device, sizes
from app.kinds.sts.env import LEVELS


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
@click.option(
    "--episodes",
    default=200,
    show_default=True,
    type=click.IntRange(min=1),
    help="Expert episodes per level for training (seeds 0..N-1).",
)
@click.option(
    "--held-out",
    default=50,
    show_default=True,
    type=click.IntRange(min=1),
    help="Held-out episodes per level (seeds 1000000..) for accuracy and success rate.",
)
@sizes(epochs=10, embed=32, channels=64, hidden=128, batch=128, lr=1e-3)
@seed_and_device("Weights and shuffling: the same seed, the same policy (on the CPU).")
def sts_policy(
    out: str,
    name: str,
    levels: tuple[str, ...],
    episodes: int,
    held_out: int,
    epochs: int,
    embed: int,
    channels: int,
    hidden: int,
    batch: int,
    lr: float,
    seed: int,
    device: str | None,
) -> None:
    """Train the behavioural-cloning STS policy on expert demonstrations and report its held-out
    action accuracy and success rate."""
    from app.errors import InputError
    from app.kinds.sts.policies import pick_device
    from workers.sts.train import DEFAULT_LEVELS, run_training

    try:
        device = pick_device(device)
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint="--device") from None
    run_training(
        levels=levels or DEFAULT_LEVELS,
        episodes=episodes,
        held_out=held_out,
        epochs=epochs,
        embed=embed,
        channels=channels,
        hidden=hidden,
        batch=batch,
        lr=lr,
        seed=seed,
        device=device,
        out=out,
        name=name,
        echo=click.echo,
    )


def train_commands() -> list[click.Command]:
    return [sts_policy]
