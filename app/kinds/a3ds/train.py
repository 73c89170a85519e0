"""`proctor train a3ds-captioner` (TaskKind.train_commands): the learned captioner. The body is
workers/a3ds/train.py (the app never imports torch until the command runs). With --agent-id it
is queued as the job `a3ds.train` instead, for a worker (the GPU's, when one serves the
"models" queue), and the trained captioner becomes a new version of that agent's model."""

from __future__ import annotations

import click

from app.agents.training import model_files, seed_and_device, sizes, training_command
from app.commands import number_option

# The captioner's sizes and schedule unless given (the job's and workers/a3ds/train.py's too).
TRAINING = {"epochs": 10, "embed": 32, "hidden": 64, "channels": 16, "batch": 32, "lr": 3e-3}


@training_command("a3ds-captioner", "workers.a3ds.train:run_training", queue=("a3ds", "A3DS"))
@click.option(
    "--with-distractor",
    is_flag=True,
    help="The captioner sees the distractor too and learns the contrastive speaker's captions "
    "(default: the target alone, the literal speaker's).",
)
@number_option("--pairs", 1000, click.IntRange(10, 200_000), "Training pairs (scenes drawn: about twice as many).")
@number_option("--dev-pairs", 200, click.IntRange(1, 20_000), "Held-out pairs the metrics are reported on.")
@sizes(**TRAINING)
@click.option(
    "--speaker",
    default=None,
    type=click.Choice(["literal", "short", "contrastive", "minimal"]),
    help="The built-in speaker whose captions it learns (default: contrastive with the distractor, literal without).",
)
@seed_and_device("Pairs, weights and shuffling.")
@model_files("the upload format", "captioner")
def a3ds_captioner() -> None:
    """Train the built-in A3DS captioner on rendered scenes, with or without the distractor as
    input, and report the pragmatic metrics of its captions on held-out pairs beside the
    speaker it learned from."""


def train_commands() -> list[click.Command]:
    return [a3ds_captioner]
