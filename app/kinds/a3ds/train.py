"""`proctor train a3ds-captioner` (TaskKind.train_commands): the learned captioner. The body is
workers/a3ds/train.py (the app never imports torch until the command runs). With --agent-id it
is queued as the job `a3ds.train` instead, for a worker (the GPU's, when one serves the
"models" queue), and the trained captioner becomes a new version of that agent's model."""

from __future__ import annotations

import click

from app.agents.training import train_here_or_queue


@click.command("a3ds-captioner")
@click.option(
    "--with-distractor",
    is_flag=True,
    help="The captioner sees the distractor too and learns the contrastive speaker's captions "
    "(default: the target alone, the literal speaker's).",
)
@click.option(
    "--pairs",
    default=1000,
    show_default=True,
    type=click.IntRange(10, 200_000),
    help="Training pairs (scenes drawn: about twice as many).",
)
@click.option(
    "--dev-pairs",
    default=200,
    show_default=True,
    type=click.IntRange(1, 20_000),
    help="Held-out pairs the metrics are reported on.",
)
@click.option("--epochs", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--embed", default=32, show_default=True, type=click.IntRange(1, 512))
@click.option("--hidden", default=64, show_default=True, type=click.IntRange(1, 1024))
@click.option("--channels", default=16, show_default=True, type=click.IntRange(1, 256))
@click.option("--batch", default=32, show_default=True, type=click.IntRange(1, 4096))
@click.option("--lr", default=3e-3, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option(
    "--speaker",
    default=None,
    type=click.Choice(["literal", "short", "contrastive", "minimal"]),
    help="The built-in speaker whose captions it learns (default: contrastive with the distractor, literal without).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Pairs, weights and shuffling.")
@click.option(
    "--out",
    default="var/models",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for <name>.safetensors + <name>.json (the upload format) and <name>-quality.json.",
)
@click.option("--name", default="captioner", show_default=True, help="File name stem.")
@click.option("--device", default=None, help="cpu or cuda (default: cuda when available).")
@click.option(
    "--agent-id",
    default=None,
    type=click.IntRange(1, 2**31 - 1),
    help="Queue the training as a job instead (a worker runs it) and upload the result as a new "
    "version of this A3DS agent's model.",
)
def a3ds_captioner(out, name, device, agent_id, **options) -> None:
    """Train the built-in A3DS captioner on rendered scenes, with or without the distractor as
    input, and report the pragmatic metrics of its captions on held-out pairs beside the
    speaker it learned from."""
    # `options`: every training option (all but where files go and where it runs), given as
    # they are to the training here or to the job.
    train_here_or_queue(
        "a3ds", "A3DS", "workers.a3ds.train:run_training", agent_id, options, device, out=out, name=name
    )


def train_commands() -> list[click.Command]:
    return [a3ds_captioner]
