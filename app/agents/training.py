"""`proctor train <model> --agent-id N`: the command's training queued as the kind's job
`<kind>.train` (TaskKind.jobs), for a worker of the "models" queue (the GPU's, when one serves
it); the job uploads what it trains as a new version of the agent's model."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

# The options every trainer's network takes, with one range each (a kind gives the defaults).
SIZES: dict[str, click.ParamType[Any]] = {
    "epochs": click.IntRange(1, 1000),
    "embed": click.IntRange(1, 512),
    "hidden": click.IntRange(1, 1024),
    "channels": click.IntRange(1, 512),
    "batch": click.IntRange(1, 4096),
    "lr": click.FloatRange(min=0, min_open=True),
}


def queue_training(kind: str, title: str, agent_id: int, options: dict[str, Any], device: str | None) -> int:
    """Queue `<kind>.train` with every training option the command was given (those left
    unset are left out, so the job's defaults are the command's); returns the job's id."""
    from app import jobs
    from app.agents.models import Agent
    from app.db import get_sessionmaker

    with get_sessionmaker()() as s:
        agent = s.get(Agent, agent_id)
        if agent is None or agent.kind != kind:
            raise click.BadParameter(f"no {title} agent {agent_id}", param_hint="--agent-id")
        params = {
            "agent_id": agent.id,
            **{k: v for k, v in options.items() if v is not None},
            **({"device": device} if device else {}),
        }
        job = jobs.create_job(s, f"{kind}.train", owner_id=agent.owner_id, **params)
        jobs.submit(s, job)
        click.echo(f"queued job {job.id} ({kind}.train): follow it with GET /api/v1/jobs/{job.id}")
        return job.id


def train_here_or_queue(
    kind: str, title: str, trainer: str, agent_id: int | None, options: dict[str, Any], device: str | None, **where: Any
) -> None:
    """A `proctor train ...` command's work: with an agent id, the training queued as a job
    (queue_training); else `trainer` ("module:function") run here on `device` (cpu, cuda; by
    default CUDA when there is one), with `where` (out, name) and its progress echoed. A file
    it cannot find is a refusal of the --data option, not a traceback."""
    import importlib

    if device not in (None, "cpu", "cuda"):
        raise click.BadParameter("cpu or cuda", param_hint="--device")
    if agent_id is not None:
        queue_training(kind, title, agent_id, options, device)
        return
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise click.BadParameter("no CUDA device here", param_hint="--device")
    module, _, name = trainer.partition(":")
    run = getattr(importlib.import_module(module), name)
    try:
        run(**options, device=device or ("cuda" if torch.cuda.is_available() else "cpu"), echo=click.echo, **where)
    except FileNotFoundError as exc:
        raise click.BadParameter(str(exc), param_hint="--data") from None


def sizes(**defaults: float) -> Callable[[F], F]:
    """The network's size and schedule options named (of SIZES), each with this trainer's default."""

    def decorate(f: F) -> F:
        for key in reversed(list(defaults)):
            f = click.option(f"--{key}", default=defaults[key], show_default=True, type=SIZES[key])(f)
        return f

    return decorate


def model_files(
    made: str, stem: str | None, stem_help: str = "File name stem.", quality: bool = True
) -> Callable[[F], F]:
    """--out and --name: where the trained model's upload files go (`made`: whose upload format
    they are in), and their stem (None: the trainer names them)."""
    also = " and <name>-quality.json" if quality else ""

    def decorate(f: F) -> F:
        f = click.option("--name", default=stem, show_default=stem is not None, help=stem_help)(f)
        return click.option(
            "--out",
            default="var/models",
            show_default=True,
            type=click.Path(file_okay=False),
            help=f"Folder for <name>.safetensors + <name>.json ({made}){also}.",
        )(f)

    return decorate


def seed_and_device(seed_help: str | None) -> Callable[[F], F]:
    """--seed (what it fixes: `seed_help`) and --device."""

    def decorate(f: F) -> F:
        f = click.option("--device", default=None, help="cpu or cuda (default: cuda when available).")(f)
        return click.option("--seed", default=0, show_default=True, type=int, help=seed_help)(f)

    return decorate


def training_command(
    name: str, trainer: str, *, queue: tuple[str, str] | None = None, **fixed: Any
) -> Callable[[Callable[..., None]], click.Command]:
    """`proctor train <name>` from a function that declares only its own options (and --out,
    --name, --seed, --device through the decorators above) and says in its docstring what it
    trains: its body is never run. The command runs `trainer` ("module:function") with every
    option, `fixed` added (e.g. the role), through train_here_or_queue; with `queue` = (kind,
    title) it also takes --agent-id, which queues the training as `<kind>.train` instead."""

    def decorate(declared: Callable[..., None]) -> click.Command:
        kind, title = queue or ("", "")

        def run(out: str, name: str | None, device: str | None, agent_id: int | None = None, **options: Any) -> None:
            # `options`: every training option (all but where files go and where it runs), given
            # as they are to the training here or to the job.
            train_here_or_queue(kind, title, trainer, agent_id, options, device, out=out, name=name, **fixed)

        run.__click_params__ = list(getattr(declared, "__click_params__", []))  # type: ignore[attr-defined]
        if queue is not None:
            run = click.option(
                "--agent-id",
                default=None,
                type=click.IntRange(1, 2**31 - 1),
                help="Queue the training as a job instead (a worker runs it) and upload the result as a new "
                f"version of this {title} agent's model.",
            )(run)
            params = run.__click_params__  # type: ignore[attr-defined]
            params.insert(0, params.pop())  # listed last in --help (click lists them reversed)
        return click.command(name, help=inspect.getdoc(declared))(run)

    return decorate
