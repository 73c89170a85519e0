"""`proctor hexagons ...`: the Hexagons commands (TaskKind.cli)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from app.commands import blaming, echo_judged, half_width_option, input_file, json_option, read_file

SPLITS = ("train", "dev", "test")


@click.group("hexagons")
def hexagons() -> None:
    """Hexagons tools: score executions, recompute the dataset's statistics, run the paper's
    rule-based baseline."""


def _f(x) -> str:
    return "-" if x is None else f"{100 * x:6.2f}"


def _table(title: str, groups: dict) -> None:
    from app.kinds.hexagons.metrics import KEYS, LABELS

    click.echo(f"\n{title:<24} {'steps':>6} " + " ".join(f"{LABELS[k]:>9}" for k in KEYS))
    for name, g in groups.items():
        click.echo(f"{str(name)[:24]:<24} {g['n']:>6} " + " ".join(f"{_f(g[k]):>9}" for k in KEYS))


@hexagons.command("score")
@input_file("--gold", required=True, help="Gold procedures: the released JSONL (any split).")
@input_file(
    "--predictions",
    help='JSONL, one step a line: {"index", "step", "board": [180 colour codes], '
    '"previous": [180] (optional; default the gold board before the step)}.',
)
@click.option("--no-action", is_flag=True, help="Score the baseline that paints nothing instead.")
@click.option(
    "--partial", is_flag=True, help="Score only the predicted steps (default: every gold step must have a prediction)."
)
@input_file(
    "--judge",
    "judge_path",
    help="A model executor's boards on every gold procedure (the --predictions format), as an automatic "
    "judge beside people's executions of a sample of whole procedures in --predictions: adds their "
    "board F1 agreement and the PPI++ board F1 from both (docs/statistics.md).",
)
@half_width_option(
    "With --judge: plan for a PPI++ interval of ± this (board F1, 0-1): how many procedures people "
    "must execute, at random, these executions taken as the pilot."
)
@json_option("Print one JSON object: per_step and mean.")
def hex_score(
    gold: str,
    predictions: str | None,
    no_action: bool,
    partial: bool,
    judge_path: str | None,
    half_width: float,
    as_json: bool,
) -> None:
    """Action- and board-based precision, recall, F1 and exact match, averaged over steps
    (in percent in the tables): overall, per category, per step position and per agreement tag.
    With --judge, people's board F1 and a model executor's together (PPI++), over every
    procedure and per instructor."""
    from app.kinds.hexagons.formats import parse_predictions, parse_procedures
    from app.kinds.hexagons.score import judged, no_action as baseline, procedure_means, score_predictions

    if bool(predictions) == no_action:
        raise click.UsageError("give --predictions FILE or --no-action")
    if judge_path is not None and no_action:
        raise click.UsageError("--judge goes with --predictions (people's executions), not --no-action")
    procedures = read_file(gold, parse_procedures)
    n_steps = {p.index: len(p.steps) for p in procedures}
    judge = None
    if no_action:
        result = baseline(procedures)
    else:
        preds = read_file(predictions, parse_predictions, n_steps)
        with blaming(predictions):  # steps without a prediction; beside a judge, people executed a sample
            result = score_predictions(procedures, preds, partial=partial or judge_path is not None)
            human = procedure_means(result, procedures) if judge_path is not None else {}
    if judge_path is not None:
        machine = score_predictions(procedures, read_file(judge_path, parse_predictions, n_steps), partial=True)
        with blaming(judge_path):
            judge = judged(procedures, human, procedure_means(machine, procedures), half_width)
    if as_json:
        out = {"per_step": result["per_step"], "mean": result["mean"], "estimates": result["estimates"]}
        click.echo(json.dumps(out | ({"judged": judge} if judge is not None else {})))
        return
    _table("overall", {"all": {"n": result["n"], **result["mean"]}})
    click.echo("95% intervals (procedures resampled as units; the leaderboard's):")
    for k, e in result["estimates"].items():
        click.echo(f"  {k:<16} {_f(e['mean'])} [{_f(e['low'])}, {_f(e['high'])}]  {e['method']}")
    _table("category", result["by_category"])
    _table("step position", result["by_position"])
    _table("agreement tag", result["by_tag"])
    if judge is not None:
        _judged(judge, half_width)


def _judged(judge: dict, half_width: float) -> None:
    """People's board F1 and the judge's together: every procedure, then per instructor."""
    click.echo("")
    echo_judged(
        "board F1, per procedure", 24, {"all procedures": judge, **judge.get("by_instructor", {})}, _f, half_width
    )
    click.echo(
        "In percent. PPI++: people's board F1 on their (random) sample of procedures and the judge's on "
        "every one; 'worth': how many procedures executed by people its interval is worth; 'for ±w': how "
        "many procedures people must execute, at random, for an interval that wide ('!': even all give a "
        "wider one)."
    )


@hexagons.command("stats")
@click.option(
    "--data",
    "folder",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="The folder with the released train.jsonl, dev.jsonl and test.jsonl (those present).",
)
@json_option("Print one JSON object.")
def hex_stats(folder: str, as_json: bool) -> None:
    """The paper's dataset statistics (Tables 1 and 6, the verifiers' agreement) recomputed
    from the released files, beside the paper's figures."""
    from app.kinds.hexagons.formats import parse_procedures
    from app.kinds.hexagons.stats import dataset_stats

    splits = {
        name: read_file(str(Path(folder) / f"{name}.jsonl"), parse_procedures)
        for name in SPLITS
        if (Path(folder) / f"{name}.jsonl").is_file()
    }
    if not splits:
        raise click.ClickException(f"{folder}: none of {', '.join(s + '.jsonl' for s in SPLITS)} is there")
    s = dataset_stats(splits)
    if as_json:
        click.echo(json.dumps(s))
        return
    paper = s["paper"]
    click.echo("Splits (paper Table 6: procedures, steps, agreed procedures, agreed steps; ours | paper)")
    click.echo(
        f"{'split':<7} {'procs':>11} {'steps':>11} {'agreed procs':>22} {'agreed steps %':>16} {'untagged':>8}  tags"
    )
    for name, v in s["splits"].items():
        p = paper["splits"].get(name)
        ref = (lambda i: f" | {p[i]}") if p else (lambda i: "")
        click.echo(
            f"{name:<7} {v['procedures']:>5}{ref(0):>6} {v['steps']:>5}{ref(1):>6} "
            f"{v['agreed_procedures']:>4} ({v['agreed_procedures_pct']}%){ref(3):>8} "
            f"{v['agreed_steps_pct']:>7}{ref(4):>9} {v['untagged_procedures']:>8}  "
            + " ".join(f"{t}:{n}" for t, n in v["tags"].items())
        )
    click.echo("\nRounds (paper Table 1: steps, procedures, tokens, unique images; ours | paper)")
    for r, v in s["rounds"].items():
        p = paper["rounds"].get(r, ("", "", "", ""))
        click.echo(
            f"{v['name']:<26} {v['steps']:>5} | {p[0]:<5} {v['procedures']:>4} | {p[1]:<4} "
            f"{v['tokens']:>6} | {p[2]:<4} {v['unique_images']:>4} ({v['base_images']}) | {p[3]}"
        )
    p = paper["rounds"]["total"]
    click.echo(
        f"{'Total':<26} {s['splits']['total']['steps']:>5} | {p[0]:<5} "
        f"{s['splits']['total']['procedures']:>4} | {p[1]:<4} {s['tokens']:>6} | {p[2]:<4} "
        f"{s['images']:>4} ({s['base_images']}) | {p[3]}"
    )
    click.echo(
        f"Images in brackets: redrawn images counted as their base image (procedures "
        f"{', '.join(s['redrawn']) or 'none'} have an id ending in a letter)."
    )
    click.echo("\nCategories (the abstraction mechanism the image was designed to elicit)")
    for c, v in s["categories"].items():
        click.echo(
            f"{c:<24} {v['procedures']:>4} procedures {v['steps']:>5} steps {v['images']:>4} images "
            f"{v['mean_steps']:>6} steps each, {v['agreed_steps_pct']}% agreed steps"
        )
    v = s["verifiers"]
    click.echo(
        f"\nVerifiers against the instructor over {v['steps']} tagged steps (section 5; paper: Max "
        f"Mean-F1 circa {paper['max_mean_f1']})"
    )
    for m in ("f1", "em"):
        click.echo(f"  {m.upper():<3} mean {v[m]['mean']}  max {v[m]['max']}  min {v[m]['min']}")
    c = s["tag_consistency"]
    click.echo(
        f"\nTags against the scores they imply (A: both I-V scores 1; V1/V2: that one; VV: V1-V2 only): "
        f"{c['inconsistent']} of {c['steps']} steps disagree"
    )
    for t, v in c["by_tag"].items():
        click.echo(f"  {t:<3} {v['steps']:>5} steps {v['inconsistent']:>4} disagree  {' '.join(v['examples'])}")
    click.echo("\nAgreed procedures under other definitions (ours: last step agreed; paper Table 6)")
    for name, d in s["agreed_definitions"].items():
        click.echo(f"  {name:<6} " + "  ".join(f"{k} {n}" for k, n in d.items()))


@hexagons.command("rule-baseline")
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True),
    help="The folder with the released <split>.jsonl, or one procedures JSONL file.",
)
@click.option(
    "--split",
    type=click.Choice(SPLITS),
    default="test",
    show_default=True,
    help="Which split's file to read when --data is a folder (Table 7 is on test).",
)
@click.option(
    "--on",
    "on",
    type=click.Choice(("gold", "own")),
    default="gold",
    show_default=True,
    help="Execute each step on the gold board before it (oracle board-state) or on the "
    "executor's own board after the step before (predicted board-state).",
)
@json_option("Print one JSON object (means as fractions).")
def hex_rule_baseline(data: str, split: str, on: str, as_json: bool) -> None:
    """The paper's naive rule-based executor (a paint(position, colour) pattern matcher,
    rule_executor.py) on a released split, its action-based mean F1 and EM beside the paper's
    (Table 7, test: 13.15 / 5.96). Two pattern sets: every coordinate form the module reads
    ("all", the executor) and the paper's example form only ("example")."""
    from tqdm import tqdm

    from app.kinds.hexagons.formats import parse_procedures
    from app.kinds.hexagons.rule_executor import PAPER, PATTERNS, evaluate

    path = Path(data)
    if path.is_dir():
        path = path / f"{split}.jsonl"
        if not path.is_file():
            raise click.ClickException(f"{path}: no such file (the folder has no {split}.jsonl)")
    procedures = read_file(str(path), parse_procedures)
    if not procedures:
        raise click.ClickException(f"{path}: no procedures in the file")
    results = {}
    with tqdm(total=len(procedures) * len(PATTERNS), desc="rule-based executor", unit="procedure") as bar:
        for name in PATTERNS:
            results[name] = evaluate(procedures, on, progress=bar.update, patterns=name)
    steps = results["all"]["n"]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "file": str(path),
                    "on": on,
                    "procedures": len(procedures),
                    "steps": steps,
                    "rule_based": {name: r["mean"] for name, r in results.items()},
                    "paper": {"split": "test", "on": "unstated", **{k: v / 100 for k, v in PAPER.items()}},
                    "patterns": PATTERNS,
                }
            )
        )
        return
    click.echo(
        f"{path}: {len(procedures)} procedures, {steps} steps, executed on the "
        f"{'gold board before each step' if on == 'gold' else 'executor’s own board'}"
    )
    click.echo(f"\n{'executor':<44} {'Action F1':>9} {'Action EM':>9} {'Action P':>9} {'Action R':>9} {'Board F1':>9}")
    for name, r in results.items():
        m = r["mean"]
        click.echo(
            f"{'rule-based, ' + name + ' patterns':<44} {_f(m['action_f1']):>9} {_f(m['action_em']):>9} "
            f"{_f(m['action_precision']):>9} {_f(m['action_recall']):>9} {_f(m['board_f1']):>9}"
        )
    click.echo(
        f"{'paper, Table 7 (test)':<44} {PAPER['action_f1']:>9.2f} {PAPER['action_em']:>9.2f} "
        f"{'-':>9} {'-':>9} {'-':>9}"
    )
    click.echo(
        "\nPatterns: "
        + "; ".join(f"{k}: {v}" for k, v in PATTERNS.items())
        + ". In percent, means over steps (DESIGN.md section 6); docs/kinds/hexagons.md explains the gap."
    )
