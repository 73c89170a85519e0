"""`proctor a3ds ...`: the A3DS reference game's commands (TaskKind.cli)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from app.commands import blaming, echo_judged, half_width_option, input_file, json_option, read_file


@click.group("a3ds")
def a3ds() -> None:
    """A3DS reference game tools: score captions with the pragmatic metrics."""


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


@a3ds.command("score")
@input_file(
    "--pairs",
    "pairs_path",
    required=True,
    help='JSONL, one pair a line: {"target": id, "distractor": id, "caption": str}.',
)
@input_file(
    "--people",
    "people_path",
    help='With --judge: people\'s picks on a random sample of the captions, JSONL {"id": pair id, '
    '"right": true|false} a line (several lines of one id: several people).',
)
@click.option(
    "--judge",
    type=click.Choice(["literal"]),
    default=None,
    help="A built-in model listener that picks on every caption: with --people, PPI++ listener accuracy per "
    "captioner (people and the listener together).",
)
@half_width_option("With --judge: plan for a PPI++ interval of ± this: how many captions people must answer.", 0.5)
@json_option("Print one JSON object: per_pair and mean (and judged).")
def score_cmd(pairs_path: str, people_path: str | None, judge: str | None, half_width: float, as_json: bool) -> None:
    """Discriminativity, contrastive efficiency, relevance (undefined when the scenes differ in
    all six features), optimal discriminativity and the features mentioned, per caption and
    their means (paper section 2.2; DESIGN.md section 6). With --people and --judge, per
    captioner the listener accuracy people would give over every caption, from people's picks
    and a model listener's (PPI++; docs/kinds/a3ds.md)."""
    from app.kinds.a3ds.formats import parse_pairs
    from app.kinds.a3ds.metrics import means, score_caption

    if (people_path is None) != (judge is None):
        raise click.UsageError("--people and --judge go together")
    pairs = read_file(pairs_path, parse_pairs)
    together = None
    if people_path is not None and judge is not None:
        from app.kinds.a3ds.judge import judged, people_values

        with blaming(people_path):
            people = people_values(pairs, Path(people_path).read_bytes())
        together = judged(pairs, people, judge, half_width)
    scores = [score_caption(p.pair.target, p.pair.distractor, p.caption) for p in pairs]
    mean = means(scores)
    if as_json:
        out = {"per_pair": [s.as_dict() for s in scores], "mean": mean}
        click.echo(json.dumps(out | ({"judged": together} if together is not None else {})))
        return
    if together is not None:
        echo_judged("listener accuracy", 18, together, _f, half_width)
        click.echo("")
    click.echo(
        f"{'pair':>6} {'z':>2} {'c':>2} {'k':>2} {'disc':>5} {'eff':>6} {'rel':>6} {'opt':>4}  "
        "mentioned / false / unparsed"
    )
    for p, s in zip(pairs, scores):
        rel = "undef" if s.relevance is None else _f(s.relevance)
        click.echo(
            f"{p.id[:6]:>6} {s.z:>2} {s.c:>2} {s.k:>2} {s.discriminative:>5} "
            f"{_f(s.contrastive_efficiency):>6} {rel:>6} {s.optimal:>4}  "
            f"{','.join(s.mentioned) or '-'} / {','.join(s.false) or '-'} / {' '.join(s.unparsed) or '-'}"
        )
    click.echo(
        f"\nmean over {mean['n']} pairs: discriminativity {_f(mean['discriminative'])}, "
        f"contrastive efficiency {_f(mean['contrastive_efficiency'])} "
        f"(over {mean['n_contrastive_efficiency']} discriminative), relevance {_f(mean['relevance'])} "
        f"(over {mean['n_relevance']}; undefined for {mean['relevance_undefined']} with z = 6), "
        f"optimal discriminativity {_f(mean['optimal'])}, features mentioned {_f(mean['mentioned'])}, "
        f"false {_f(mean['false'])}; {mean['unparsed']} captions with unparsed words"
    )
