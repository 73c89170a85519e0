"""A side-by-side (pairwise) study, whatever the kind (issue 30): two agents' outputs on the same
unit (an STS scenario, a navigation path), anonymised as "A" and "B" with the sides drawn per
pair, judged against each other ("a", "b" or "tie", with an optional reason), and the agents
rated with Davidson's model (pairwise.py).

A kind declares what a pair is (a `Pairing`: the unit, what the agents and their outputs are
called, what a side's length counts) and stores each pair item's reference as

    {"mode": "pairs", <pairing.unit>: unit id, "a": {"agent", "length"?, ...}, "b": {...},
     "better": "a" | "b" | None}

("better": a reference pair's known answer, which measures judges). Everything else is here:
the drawn sides, the verdict's checks, the judgements read back, which pair next under
adaptive allocation, and the leaderboard's tables (ratings with intervals and rank intervals,
optionally controlled for length, the win-rate matrix, and the single-study ranking beside
them with the Spearman correlation of the two).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.errors import InputError
from app.leaderboards import stats
from app.leaderboards.pairwise import N_BOOT, Judgement, pairwise_ratings, score as pairwise_score

if TYPE_CHECKING:
    from app.studies.models import Study

MODE = "pairs"
SIDES = ("a", "b")
WINNERS = ("a", "b", "tie")
MAX_REASON = 500
#: Levels of closeness an item's priority takes (its unit's order breaks ties within a level).
LEVELS = 100
PRIORITY_BOOT = 200


@dataclass(frozen=True, slots=True)
class Pairing:
    """What a kind's pair is, in its words."""

    unit: str  # the reference key of the unit both sides share, and its noun ("scenario", "path")
    agent: str  # what is rated ("agent", "speaker")
    outputs: str  # what the two sides are ("continuations", "instructions")
    length: str  # what a side's length counts ("steps", "words")
    table: str  # the leaderboard tables' key prefix ("sts_pair", "navigation_pair")


@dataclass(frozen=True, slots=True)
class SingleRanking:
    """The same agents ranked by the kind's single-output study, shown beside the ratings:
    per agent {"rank": rank cell, "value": estimate cell}; `key`, `label` and `help` name the
    value's column."""

    study_id: int
    measure: str  # "success share"
    key: str
    label: str
    help: str
    rows: dict[str, dict[str, Any]]


class Verdict(BaseModel):
    """Which side did better, or a tie, and why (optional)."""

    winner: Literal["a", "b", "tie"]
    reason: str = Field(default="", max_length=MAX_REASON)


def is_pair(payload: dict[str, Any] | None) -> bool:
    return bool(payload) and (payload or {}).get("mode") == MODE


def is_pair_study(settings: dict[str, Any] | None) -> bool:
    return (settings or {}).get("mode") == MODE


def single_study(session: Session, study: Study, fits: Callable[[Study], bool]) -> Study | None:
    """The newest study of a pair study's kind and owner that is not side by side itself (no
    "mode") and that `fits` (the kind's test: the same speakers, the same suite version): its
    single-output ranking is the one shown beside the ratings (SingleRanking). None if none."""
    from app.studies.models import Study

    for other in session.scalars(
        select(Study)
        .where(Study.kind == study.kind, Study.owner_id == study.owner_id, Study.id != study.id)
        .order_by(Study.id.desc())
    ):
        if not (other.kind_settings or {}).get("mode") and fits(other):
            return other
    return None


def drawn_swap(namespace: str, pair_id: str) -> bool:
    """Whether the pair's second output is shown as A: a bit of the hash of the pair's id (a
    fair coin per pair that does not depend on which agent is first), so that a re-import
    shows each pair the same way."""
    return bool(hashlib.sha256(f"{namespace}:{pair_id}".encode()).digest()[0] & 1)


def parse_verdict(data: dict[str, Any], model: type[BaseModel] = Verdict) -> dict[str, Any]:
    """A judge's answer checked against `model` (Verdict or a kind's extension of it), the
    reason stripped; InputError naming the first bad field."""
    try:
        parsed = model.model_validate(data).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], field=".".join(str(p) for p in err["loc"]) or None) from None
    parsed["reason"] = parsed["reason"].strip()
    return parsed


def score(reference: dict[str, Any] | None, response: dict[str, Any]) -> float | None:
    """1 where a reference pair's known better side was picked, else 0 (a tie is wrong)."""
    if not reference or not reference.get("better"):
        return None
    return 1.0 if response.get("winner") == reference["better"] else 0.0


def score_details(reference: dict[str, Any] | None, response: dict[str, Any]) -> dict[str, Any] | None:
    if not reference or not reference.get("better"):
        return None
    return {"better": reference["better"], "winner": response.get("winner")}


def control_length(settings: dict[str, Any] | None) -> bool:
    """The study option `control_length` (off by default)."""
    return bool((settings or {}).get("control_length"))


# --- reading the answers ---------------------------------------------------------------------


def judgements(session: Session, study: Any, pairing: Pairing) -> list[Judgement]:
    """The study's valid answers on non-reference pairs as judgements of agents (the item: the
    unit, which the ratings' intervals resample), the sides resolved to their agents and, where
    the reference keeps them, their lengths."""
    from app.auth.models import User
    from app.studies.models import Annotation, Item

    out = []
    for reference, response, who in session.execute(
        select(Item.reference, Annotation.response, User.pseudonym)
        .join(Item, Item.id == Annotation.item_id)
        .join(User, User.id == Annotation.worker_id)
        .where(and_(Annotation.study_id == study.id, Annotation.excluded.is_(False), Annotation.is_gold.is_(False)))
        .order_by(Annotation.id)
    ):
        reference, response = reference or {}, response or {}
        if reference.get("mode") != MODE or response.get("winner") not in WINNERS:
            continue
        a, b = reference["a"], reference["b"]
        out.append(
            Judgement(
                judge=who or "?",
                item=str(reference[pairing.unit]),
                a=str(a["agent"]),
                b=str(b["agent"]),
                winner=response["winner"],
                a_length=a.get("length"),
                b_length=b.get("length"),
            )
        )
    return out


# --- which pair next -------------------------------------------------------------------------


def item_priorities(session: Session, study: Any, pairing: Pairing) -> dict[int, float]:
    """Per non-gold item: LEVELS / (1 + s) rounded down, plus its unit's order in [0, 1), where
    s is how far apart its two agents' ratings are: |difference| / the half-width of its 95%
    bootstrap interval (0 before the pair has an interval; a pair of agents never compared,
    or compared on too few units, is the least separated). The least separated pairs come
    first; within a level, units come in a fixed random order (adaptive.unit_orders)."""
    from app.leaderboards.adaptive import unit_orders
    from app.studies.models import Item

    rows = session.execute(
        select(Item.id, Item.reference, Item.cluster, Item.position).where(
            Item.study_id == study.id, Item.is_gold.is_(False)
        )
    ).all()
    found = judgements(session, study, pairing)
    fit = None
    if found:
        try:
            fit = pairwise_ratings(
                found,
                n_boot=PRIORITY_BOOT,
                seed=study.id,
                control_length=control_length(study.kind_settings),
            )
        except InputError:  # agents in groups never compared (or no lengths): every pair is open
            fit = None
    separation: dict[tuple[str, str], float] = {}

    def apart(a: str, b: str) -> float:
        key = (min(a, b), max(a, b))
        if key not in separation:
            s = 0.0
            if fit is not None and a in fit.agents and b in fit.agents and fit.draws is not None:
                d = fit.difference(*key)
                half = (d.high - d.low) / 2
                s = abs(d.mean) / half if half > 0 else float("inf")
            separation[key] = s
        return separation[key]

    orders = unit_orders((r.id, r.cluster, r.position) for r in rows)
    out = {}
    for r in rows:
        ref = r.reference or {}
        if ref.get("mode") != MODE:
            continue
        s = apart(str(ref["a"]["agent"]), str(ref["b"]["agent"]))
        level = 0 if s == float("inf") else int(LEVELS / (1.0 + s))
        out[r.id] = float(level) + orders[r.id]
    return out


# --- the leaderboard -------------------------------------------------------------------------


def _rating_cell(agent: dict[str, Any], units: int, pairing: Pairing) -> dict[str, Any]:
    return {
        "n": agent["n"],
        "mean": agent["rating"],
        "low": agent["low"],
        "high": agent["high"],
        "method": f"bootstrap over {pairing.unit}s (percentile)",
        "units": units,
        "unit": pairing.unit,
    }


def _ratings_title(pairing: Pairing, controlled: bool) -> str:
    return f"Rating per {pairing.agent} from side-by-side judgements (Davidson, log-odds)" + (
        ", controlled for length" if controlled else ""
    )


def section(
    session: Session, study: Any, pairing: Pairing, single: SingleRanking | None = None
) -> dict[str, Any] | None:
    """A side-by-side study's tables: the agents' Davidson ratings with intervals and rank
    intervals (controlled for length where the study asks), the single-study ranking of the
    same agents beside them where the kind found one, the win-rate matrix, and the Spearman
    correlation of the two rankings with its interval."""
    from app.leaderboards.rows import p_text, rank_interval_column

    found = judgements(session, study, pairing)
    if not found:
        return None
    controlled = control_length(study.kind_settings)
    unit, agent_noun = pairing.unit, pairing.agent
    try:
        fit = pairwise_score(found, n_boot=N_BOOT, seed=0, control_length=controlled)
    except InputError as exc:  # agents never compared with each other, or no lengths: say why
        return {
            "tables": [
                {
                    "key": f"{pairing.table}_ratings",
                    "title": _ratings_title(pairing, controlled),
                    "note": f"No ratings yet: {exc}.",
                    "columns": [{"key": "agent", "label": agent_noun.capitalize(), "help": f"The {agent_noun}."}],
                    "rows": [],
                }
            ]
        }
    shares = single.rows if single is not None else {}
    units = fit["items"]
    rows = []
    for name, a in fit["agents"].items():
        rank = (
            {"text": "—", "reason": f"{units} {unit}s: fewer than {stats.MIN_RANK_UNITS} rank nobody"}
            if a["rank_low"] is None or units < stats.MIN_RANK_UNITS
            else stats.rank_label((a["rank_low"], a["rank_high"]))
        )
        row = {"agent": name, "judgements": a["n"], "rank": rank, "rating": _rating_cell(a, units, pairing)}
        if single is not None and name in shares:
            row["single_rank"] = shares[name]["rank"]
            row[single.key] = shares[name]["value"]
        rows.append(row)
    ties = fit["ties"]
    beside = bool(shares)
    controlled_words = (
        " Controlled for length: the normalised difference of the two sides' lengths "
        f"({pairing.length}) is a covariate of the fit (LMArena's style control), so a rating is what is left "
        "once the judges' taste for length is taken out."
        if controlled
        else ""
    )
    columns = [
        {
            "key": "agent",
            "label": agent_noun.capitalize(),
            "help": f"The {agent_noun} whose {pairing.outputs} were judged side by side.",
        },
        {
            "key": "judgements",
            "label": "Judgements",
            "help": f"Pairwise judgements (count) of the {agent_noun}'s {pairing.outputs}.",
        },
        rank_interval_column("Davidson rating", f"the {unit}s", N_BOOT),
        {
            "key": "rating",
            "label": "Rating (log-odds)",
            "help": f"Davidson (Bradley-Terry with ties) rating in log-odds units, centred on the {agent_noun}s' "
            f"mean: a rating 1 higher wins about 73% of decisive comparisons; 95% percentile interval resampling "
            f"{unit}s." + (" Controlled for length." if controlled else ""),
        },
    ]
    if beside and single is not None:
        columns += [
            {
                "key": "single_rank",
                "label": "Single rank (95%)",
                "help": f"Rank by {single.measure} in the single study {single.study_id}, 95% interval "
                f"resampling {unit}s.",
            },
            {"key": single.key, "label": single.label, "help": single.help},
        ]
    length = fit["length"]
    length_words = ""
    if length is not None:
        interval = "" if length["low"] is None else f" [{length['low']:.2f}, {length['high']:.2f}]"
        length_words = (
            f" Length effect: a judge adds {length['coefficient']:.2f}{interval} log-odds for the side longer by "
            f"{length['scale']:.3f} in (len_a - len_b) / (len_a + len_b)."
        )
    tables = [
        {
            "key": f"{pairing.table}_ratings",
            "title": _ratings_title(pairing, controlled),
            "note": (
                f"{fit['judgements']} judgements by {fit['judges']} judges on {units} {unit}s. Davidson's "
                "Bradley-Terry model with ties, fitted by penalised maximum likelihood; 95% intervals and rank "
                f"intervals from {N_BOOT} bootstrap resamples of the {unit}s. Ties: {ties['observed']:.0%} of "
                f"judgements; two equally strong {agent_noun}s tie with probability "
                f"{ties['share_if_equal']:.2f}. Reference pairs are left out (they measure judges)."
                + controlled_words
                + length_words
                + (
                    f" Beside: the same {agent_noun}s' single ranking (study {single.study_id}, {single.measure})."
                    if beside and single is not None
                    else f" No single study of the same {agent_noun}s to show beside it."
                )
            ),
            "columns": columns,
            "rows": rows,
        }
    ]
    matrix = fit["win_matrix"]
    names = list(fit["agents"])
    tables.append(
        {
            "key": f"{pairing.table}_wins",
            "title": f"Win rate of the row {agent_noun} against the column {agent_noun} (share 0-1)",
            "note": f"(wins + ties / 2) / judgements of the two {agent_noun}s' matched {pairing.outputs}; n: "
            "judgements; no interval. Blank: never compared.",
            "columns": [{"key": "agent", "label": agent_noun.capitalize(), "help": f"The row {agent_noun}."}]
            + [
                {
                    "key": f"v:{b}",
                    "label": f"vs {b}",
                    "help": f"Share (0-1) of the row {agent_noun}'s judgements against {b} it won, a tie "
                    "counting half.",
                }
                for b in names
            ],
            "rows": [
                {
                    "agent": a,
                    **{
                        f"v:{b}": (
                            None
                            if b == a or matrix[a][b]["share"] is None
                            else f"{matrix[a][b]['share']:.3f} (n = {matrix[a][b]['n']})"
                        )
                        for b in names
                    },
                }
                for a in names
            ],
        }
    )
    if beside and single is not None:
        both = [n for n in names if n in shares]
        corr = stats.spearman_interval(
            [fit["agents"][n]["rating"] for n in both], [shares[n]["value"]["mean"] for n in both]
        )
        rho_cell = (
            {"text": "—", "reason": corr["reason"]}
            if corr["rho"] is None
            else (
                f"{corr['rho']:.3f} [{corr['low']:.3f}, {corr['high']:.3f}]"
                if corr["low"] is not None
                else {"text": f"{corr['rho']:.3f}", "reason": f"no interval: {corr['reason']}"}
            )
        )
        tables.append(
            {
                "key": f"{pairing.table}_correlation",
                "title": "Spearman rank correlation (-1 to 1) of the pairwise and single rankings",
                "note": (
                    f"Spearman's rho between the {agent_noun}s' Davidson ratings and their single-study "
                    f"{single.measure}, with a 95% Fisher z interval (variance 1.06/(n-3), Fieller, Hartley and "
                    f"Pearson 1957; at least 4 {agent_noun}s) and its two-sided p (exact over every ordering up "
                    "to 9)."
                ),
                "columns": [
                    {"key": "agents", "label": f"{agent_noun.capitalize()}s", "help": "Ranked both ways (count)."},
                    {
                        "key": "rho",
                        "label": "Spearman rho (95%)",
                        "help": "Rank correlation (-1 to 1) of the two rankings, with a 95% Fisher z interval "
                        f"over {agent_noun}s.",
                    },
                    {"key": "p", "label": "p", "help": "Two-sided p of rho (exact up to 9)."},
                ],
                "rows": [{"agents": len(both), "rho": rho_cell, "p": p_text(corr["p"])}],
            }
        )
    return {"tables": tables}
