"""`proctor sts ...`: the Standardised Test Suite's commands (TaskKind.cli)."""

from __future__ import annotations

import json
import os

import click

from app.commands import half_width_option, input_file, json_option, read_file


@click.group("sts")
def sts() -> None:
    """Standardised Test Suite tools."""


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _interval(e: dict) -> str:
    """An estimate's 95% interval, or what stands in its place: its note ("too few: n = 3"), or
    n/a (the reason is printed under the table)."""
    if e.get("mean") is None:
        return "n/a"
    if e.get("note"):
        return e["note"]
    return f"[{_pct(e['low'])}, {_pct(e['high'])}]"


def _ttc(t: dict) -> str:
    if t["median"] is None:
        return "-"
    return f"{t['median']:g} " + (f"[{t['low']:g}, {t['high']:g}]" if t["low"] is not None else "(too few)")


def _plan(plan: dict) -> str:
    """'168 of 2000', 'all 300 (±w out of reach)', or '-' where the pilot cannot say."""
    if "reason" in plan:
        return "-"
    if not plan["reachable"]:
        return f"all {plan['of']} (wider)"
    return f"{plan['people']} of {plan['of']}"


def _ppi_table(result: dict, keys: tuple[str, str, str, str, str], plan: str | None, note: str) -> None:
    """One row per agent: people's share, the judge's agreement with people, the PPI estimate
    and its interval, the counts and what it is worth (and, for the judge, the plan's column).
    `keys`: the estimate's key, the agreement's, their headers, what stands for no interval."""
    est, agree, agree_head, est_head, no_interval = keys
    wide = max(len(agree_head), 13)
    click.echo("")
    click.echo(
        f"{'agent':<24} {'people':>8} {agree_head:>{wide}} {est_head:>10} {'95% interval':>18} "
        f"{'people':>7} {'judged':>7} {'worth':>7}" + (f" {plan:>14}" if plan else "")
    )
    for name, a in result["agents"].items():
        p, g = a[est], a[agree]
        worth = "-" if p["effective_n"] is None else f"{p['effective_n']:.0f}"
        shown = _interval(p) if p["low"] is not None else no_interval
        click.echo(
            f"{name:<24} {_pct(a['success']):>8} {_pct(g['mean'] if g else None):>{wide}} {_pct(p['mean']):>10} "
            f"{shown:>18} {p['n_human']:>7} {p['n_judge']:>7} {worth:>7}" + (f" {_plan(a['plan']):>14}" if plan else "")
        )
    click.echo(note)


@sts.command("score")
@input_file(
    "--annotations",
    "path",
    required=True,
    help="JSONL, one marker a line: annotator, agent, scenario, continuation, category, "
    "marker (success|failure), step, reference (true|false), label (reference only).",
)
@input_file(
    "--judge",
    "judge_path",
    help="JSONL, an automatic judge's verdict on every continuation (people's or not): agent, "
    "scenario, continuation, success (true|false). Adds each agent's agreement with people "
    "and the PPI++ share from both (docs/statistics.md).",
)
@half_width_option(
    "With --judge: plan for a PPI++ interval of ± this (on the 0-1 share): how many of each "
    "agent's continuations people must mark, at random, these marks taken as the pilot."
)
@input_file(
    "--learned-judge",
    "learned_path",
    help="JSONL, what every continuation (people's or not) shows without people: agent, scenario, "
    "continuation, features (a list of numbers). Adds per agent a success predictor learned from "
    "people's outcomes, cross-fitted, its agreement with held-out people and the "
    "cross-prediction-powered share (docs/statistics.md).",
)
@json_option("Print one JSON object instead of tables.")
def sts_score(path: str, judge_path: str | None, half_width: float, learned_path: str | None, as_json: bool) -> None:
    """Score an annotations file offline: each agent's success share (with its standard error and
    95% Wilson interval, per category and per scenario), the share corrected for the annotators'
    measured sensitivity and specificity (Rogan-Gladen, bootstrap interval), the time to
    completion of each successful continuation (median, interval) and each annotator's
    sensitivity, specificity and balanced accuracy on reference episodes. The leaderboard's
    STS section shows the same numbers for the same annotations."""
    from tqdm import tqdm

    from app.errors import InputError
    from app.kinds.sts.score import read_features, read_judge, read_markers, score

    judge = None if judge_path is None else read_file(judge_path, read_judge)
    learned = None if learned_path is None else read_file(learned_path, read_features)

    with (
        open(path, encoding="utf-8-sig") as f,
        tqdm(total=os.path.getsize(path), unit="B", unit_scale=True, desc="reading", disable=None, leave=False) as bar,
    ):

        def lines():
            for raw in f:
                bar.update(len(raw.encode()))
                yield raw

        try:
            result = score(read_markers(lines()), judge=judge, half_width=half_width, learned=learned)
        except InputError as exc:  # a verdict the judge's file lacks is that file's fault
            blame = {"judge": judge_path, "learned": learned_path}.get(exc.field or "", path)
            raise click.ClickException(f"{blame}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise click.ClickException(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if as_json:
        click.echo(json.dumps(result, indent=None, sort_keys=False))
        return
    click.echo(
        f"{'agent':<24} {'n':>6} {'success':>8} {'se':>7} {'95% interval':>18} {'corrected':>10} "
        f"{'its interval':>18} {'ttc median [95%]':>18} {'timed':>6}"
    )
    for name, a in result["agents"].items():
        c = a["corrected"]
        click.echo(
            f"{name:<24} {a['n']:>6} {_pct(a['success']):>8} {_pct(a['se']):>7} {_interval(a):>18} "
            f"{_pct(c['mean']):>10} {_interval(c):>18} {_ttc(a['ttc']):>18} {a['ttc']['n']:>6}"
        )
        for cat, e in a["per_category"].items():
            click.echo(f"  {cat:<22} {e['n']:>6} {_pct(e['success']):>8} {_pct(e['se']):>7} {_interval(e):>18}")
    if judge is not None:
        _ppi_table(
            result,
            ("ppi", "judge_agreement", "judge agrees", "PPI++", "too few people"),
            f"for ±{half_width:g}",
            "PPI++: people's outcomes on their (random) sample and the judge's on every continuation; "
            "'worth': how many people's continuations its interval is worth; 'for ±w': how many of "
            "the agent's continuations people must mark, at random, for an interval that wide "
            "(these marks as the pilot).",
        )
    if learned is not None:
        _ppi_table(
            result,
            ("learned", "learned_agreement", "learned agrees", "cross-PPI", "-"),
            None,
            "Learned: a logistic regression of people's outcomes on the features, cross-fitted over 5 folds "
            "of people's continuations (agreement: with people it was not trained on); cross-PPI: "
            "cross-prediction-powered inference from both ('-': too few people or nothing to add).",
        )
    reasons = {c["reason"] for a in result["agents"].values() if (c := a["corrected"]).get("reason")}
    for reason in sorted(reasons):
        click.echo(f"corrected n/a: {reason}")
    click.echo("")
    click.echo(f"{'annotator':<24} {'reference':>9} {'sensitivity':>11} {'specificity':>11} {'balanced':>9}")
    for who, a in result["annotators"].items():
        click.echo(
            f"{who:<24} {a['n_reference']:>9} {_pct(a['sensitivity']):>11} "
            f"{_pct(a['specificity']):>11} {_pct(a['balanced_accuracy']):>9}"
        )
