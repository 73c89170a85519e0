"""`proctor train hex-executor` (TaskKind.train_commands): the learned executor baseline. The
body is workers/hexagons/train.py (the app never imports torch until the command runs). With
--agent-id it is queued as the job `hexagons.train` instead, for a worker (the GPU's, when one
serves the "models" queue), and the trained executor becomes a new version of that agent's model."""

from __future__ import annotations

import click

from app.agents.training import train_here_or_queue


@click.command("hex-executor")
@click.option(
    "--data",
    default=None,
    type=click.Path(file_okay=False),
    help="Folder of the released train/dev/test.jsonl (default: HEXAGONS_DATA, else "
    "../shared/data/hexagons beside the checkout).",
)
@click.option(
    "--out",
    default="var/models",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for <name>.safetensors + <name>.json (the built-in executor's upload format) and <name>-quality.json.",
)
@click.option("--name", default="executor", show_default=True, help="File name stem.")
@click.option("--epochs", default=6, show_default=True, type=click.IntRange(1, 1000))
@click.option("--embed", default=32, show_default=True, type=click.IntRange(1, 512))
@click.option("--hidden", default=64, show_default=True, type=click.IntRange(1, 1024))
@click.option("--channels", default=48, show_default=True, type=click.IntRange(1, 512))
@click.option("--batch", default=32, show_default=True, type=click.IntRange(1, 4096))
@click.option("--lr", default=2e-3, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option(
    "--min-count",
    default=2,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="A training token seen fewer times is <unk>.",
)
@click.option(
    "--change-weight",
    default=4.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="The loss's weight on the tiles a step changes (1 for the others).",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="Weights and shuffling: the same seed, the same executor (on the CPU).",
)
@click.option("--device", default=None, help="cpu or cuda (default: cuda when available).")
@click.option(
    "--agent-id",
    default=None,
    type=click.IntRange(1, 2**31 - 1),
    help="Queue the training as a job instead (a worker runs it) and upload the result as a new "
    "version of this Hexagons agent's model.",
)
def hex_executor(out, name, device, agent_id, **options) -> None:
    """Train the built-in Hexagons executor on the train split and report its dev and test
    action/board F1 and EM, from the gold previous board (oracle) and its own (predicted),
    beside "no action"."""
    # `options`: every training option (all but where files go and where it runs), given as
    # they are to the training here or to the job.
    train_here_or_queue(
        "hexagons", "Hexagons", "workers.hexagons.train:run_training", agent_id, options, device, out=out, name=name
    )


def train_commands() -> list[click.Command]:
    return [hex_executor]
