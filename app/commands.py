"""What the `proctor` commands share, the core's and the kinds' alike (TaskKind.cli): the
options that read a file or plan a PPI++ interval, a file's refusal named by its path, and the
table of people's measure and a judge's together."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from app.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


def input_file(*names: str, help: str | None = None, required: bool = False) -> Callable[[F], F]:
    """An option naming a file that must be there (its flag, and its parameter where it differs)."""
    return click.option(
        *names, required=required, default=None, type=click.Path(exists=True, dir_okay=False), help=help
    )


def half_width_option(help: str, most: float = 1) -> Callable[[F], F]:
    """--half-width: the PPI++ interval a plan is for (± this, on a 0 to `most` scale)."""
    return click.option(
        "--half-width",
        default=0.05,
        show_default=True,
        type=click.FloatRange(min=0, max=most, min_open=True),
        help=help,
    )


def json_option(help: str) -> Callable[[F], F]:
    """--json: one JSON object instead of the tables (`help` says what it holds)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


@contextmanager
def blaming(path: str | Path) -> Iterator[None]:
    """An InputError inside is the file's: the command stops with a message that names it."""
    try:
        yield
    except InputError as exc:
        raise click.ClickException(f"{path}: {exc}") from None


def read_file(path: str | Path, parse: Callable[..., Any], *args: Any) -> Any:
    """`parse` of the file's bytes (and `args`); a refusal names the file."""
    with blaming(path):
        return parse(Path(path).read_bytes(), *args)


def echo_judged(
    title: str, width: int, rows: dict[str, dict[str, Any]], f: Callable[[float | None], str], half_width: float
) -> None:
    """People's measure and a judge's together (PPI++), one row per name (at most `width`
    characters): the judge's, its agreement with people, the PPI++ estimate and its interval,
    the counts, what it is worth and how many people's answers ±half-width needs ('!': even
    all give a wider one); then why an estimate is missing."""
    click.echo(
        f"{title:<{width}} {'judge':>6} {'agrees':>7} {'PPI++':>7} {'95% interval':>17} "
        f"{'people':>7} {'judge only':>10} {'worth':>6} {f'for ±{half_width:g}':>10}"
    )
    for name, j in rows.items():
        p, plan = j["ppi"], j["plan"]
        agrees = f((j["judge_agreement"] or {}).get("mean"))
        shown = f"[{f(p['low'])}, {f(p['high'])}]" if p["low"] is not None else "-"
        worth = "-" if p["effective_n"] is None else f"{p['effective_n']:.0f}"
        need = "-" if "reason" in plan else f"{plan['people']}/{plan['of']}" + ("" if plan["reachable"] else "!")
        click.echo(
            f"{str(name)[:width]:<{width}} {f(j['judge']):>6} {agrees:>7} {f(p['mean']):>7} {shown:>17} "
            f"{p['n_human']:>7} {p['n_judge']:>10} {worth:>6} {need:>10}"
        )
    for reason in sorted({r for j in rows.values() if (r := j["ppi"].get("reason"))}):
        click.echo(f"PPI++ n/a: {reason}")


def number_option(flag: str, default: float, kind: click.ParamType[Any], help: str) -> Callable[[F], F]:
    """An option with a number of the range `kind`, its default shown in --help."""
    return click.option(flag, default=default, show_default=True, type=kind, help=help)
