"""`proctor a3ds ...`: the A3DS reference game's commands (TaskKind.cli)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.group("a3ds")
def a3ds() -> None:
    """A3DS reference game tools: score captions with the pragmatic metrics."""


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


@a3ds.command("score")
@click.option(
    "--pairs",
    "pairs_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help='JSONL, one pair a line: {"target": id, "distractor": id, "caption": str}.',
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: per_pair and mean.")
def score_cmd(pairs_path: str, as_json: bool) -> None:
    """Discriminativity, contrastive efficiency, relevance (undefined when the scenes differ in
    all six features), optimal discriminativity and the features mentioned, per caption and
    their means (paper section 2.2; DESIGN.md section 6)."""
    from app.errors import InputError
    from app.kinds.a3ds.formats import parse_pairs
    from app.kinds.a3ds.metrics import means, score_caption

    try:
        pairs = parse_pairs(Path(pairs_path).read_bytes())
    except InputError as exc:
        raise click.ClickException(f"{pairs_path}: {exc}") from None
    scores = [score_caption(p.pair.target, p.pair.distractor, p.caption) for p in pairs]
    mean = means(scores)
    if as_json:
        click.echo(json.dumps({"per_pair": [s.as_dict() for s in scores], "mean": mean}))
        return
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
