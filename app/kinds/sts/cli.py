"""`proctor sts ...`: the Standardised Test Suite's commands (TaskKind.cli)."""

from __future__ import annotations

import json
import os

import click


@click.group("sts")
def sts() -> None:
    """Standardised Test Suite tools."""


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


@sts.command("score")
@click.option("--annotations", "path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="JSONL, one marker a line: annotator, agent, scenario, continuation, category, "
                   "marker (success|failure), step, reference (true|false), label (reference only).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def sts_score(path: str, as_json: bool) -> None:
    """Score an annotations file offline: each agent's success share (with its standard error,
    per category and per scenario, and the median time to completion) and each annotator's
    sensitivity, specificity and balanced accuracy on reference episodes."""
    from tqdm import tqdm

    from app.errors import InputError
    from app.kinds.sts.score import read_markers, score

    with open(path, encoding="utf-8-sig") as f, tqdm(total=os.path.getsize(path), unit="B", unit_scale=True,
                                                     desc="reading", disable=None, leave=False) as bar:
        def lines():
            for raw in f:
                bar.update(len(raw.encode()))
                yield raw

        try:
            result = score(read_markers(lines()))
        except InputError as exc:
            raise click.ClickException(f"{path}: {exc}") from None
    if as_json:
        click.echo(json.dumps(result, indent=None, sort_keys=False))
        return
    click.echo(f"{'agent':<24} {'n':>6} {'success':>8} {'se':>7} {'ttc median':>10}")
    for name, a in result["agents"].items():
        ttc = "-" if a["ttc_median"] is None else f"{a['ttc_median']:g}"
        click.echo(f"{name:<24} {a['n']:>6} {_pct(a['success']):>8} {_pct(a['se']):>7} {ttc:>10}")
        for cat, c in a["per_category"].items():
            click.echo(f"  {cat:<22} {c['n']:>6} {_pct(c['success']):>8} {_pct(c['se']):>7}")
    click.echo("")
    click.echo(f"{'annotator':<24} {'reference':>9} {'sensitivity':>11} {'specificity':>11} {'balanced':>9}")
    for who, a in result["annotators"].items():
        click.echo(f"{who:<24} {a['n_reference']:>9} {_pct(a['sensitivity']):>11} "
                   f"{_pct(a['specificity']):>11} {_pct(a['balanced_accuracy']):>9}")
