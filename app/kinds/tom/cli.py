"""`proctor tom ...`: Common-ToM's commands (TaskKind.cli)."""

from __future__ import annotations

import sys

import click


@click.group("tom")
def tom() -> None:
    """Common-ToM tools."""


@tom.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def tom_check(files: tuple[str, ...]) -> None:
    """Recompute every question's answer from its labels and report disagreements."""
    from app.kinds.tom.check import check_files

    sys.exit(check_files(list(files)))
