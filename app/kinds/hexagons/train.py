"""`proctor train hex-executor` (TaskKind.train_commands): the learned executor baseline. The
body is workers/hexagons/train.py (the app never imports torch until the command runs). With
--agent-id it is queued as the job `hexagons.train` instead, for a worker (the GPU's, when one
serves the "models" queue), and the trained executor becomes a new version of that agent's model."""

from __future__ import annotations

import click

from app.agents.training import model_files, seed_and_device, sizes, training_command
from app.commands import number_option

# The executor's sizes and schedule unless given (the job's and workers/hexagons/train.py's too).
TRAINING = {"epochs": 6, "embed": 32, "hidden": 64, "channels": 48, "batch": 32, "lr": 2e-3}


@training_command("hex-executor", "workers.hexagons.train:run_training", queue=("hexagons", "Hexagons"))
@click.option(
    "--data",
    default=None,
    type=click.Path(file_okay=False),
    help="Folder of the released train/dev/test.jsonl (default: HEXAGONS_DATA, else "
    "../shared/data/hexagons beside the checkout).",
)
@model_files("the built-in executor's upload format", "executor")
@sizes(**TRAINING)
@number_option("--min-count", 2, click.IntRange(1, 1000), "A training token seen fewer times is <unk>.")
@number_option(
    "--change-weight", 4.0, click.FloatRange(min=1), "The loss's weight on the tiles a step changes (1 for the others)."
)
@seed_and_device("Weights and shuffling: the same seed, the same executor (on the CPU).")
def hex_executor() -> None:
    """Train the built-in Hexagons executor on the train split and report its dev and test
    action/board F1 and EM, from the gold previous board (oracle) and its own (predicted),
    beside "no action"."""


def train_commands() -> list[click.Command]:
    return [hex_executor]
