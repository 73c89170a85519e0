"""Plan a study before launch (issue 29.1): simulate it and score each simulated study through
the statistics core the leaderboard uses, so the plan says what the leaderboard will say.

The model, kind-free: each agent has a true score p (the share of items it gets right). An item's
truth for an agent is right with probability p, independently across items and agents (agents
that succeed on the same items would be easier to separate: independence is the cautious
case). Each of the item's ``annotations`` workers judges it right or wrong and flips the truth
with probability ``error``; the item's score is the majority of its annotations, a tie going to
the first annotation (`stats.majority_vote`'s rule). Then, per simulated study:

* each agent's score: `stats.mean_interval` over its items (Wilson for 0/1 scores), whose
  half-width (high - low) / 2 is averaged over the studies;
* two agents on the same items: `stats.paired_effect` (Bonett-Price for 0/1 pairs, the interval
  the leaderboards show for a paired difference); the power is the share of studies whose
  interval excludes 0;
* with an automatic judge that agrees with people's majority with probability
  ``judge_agreement`` on every item, and people on a random ``people`` of the items:
  `stats.ppi_mean` (PPI++) per agent, its half-width and `effective_n`; and
  `stats.ppi_people_needed` with simulated studies' items as pilots: how many items people need
  beside the judge for the normal half-width people alone would get on their ``people`` items.
  The power is then people's own paired interval on their ``people`` items.

Annotators' error shrinks what people see: with majority error q an agent's observed score is
p (1 - q) + (1 - p) q, and a difference d shows as d (1 - 2 q). The plan reports these expected
observed values beside the half-widths.

Cost = items people judge x agents x annotations per item x payment per annotation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.errors import InputError
from app.leaderboards import stats

#: Most simulated studies one plan runs (the page's and the API's cap; the CLI allows more).
MAX_STUDIES = 20_000
MAX_ITEMS = 100_000
MAX_AGENTS = 50
MAX_ANNOTATIONS = 50
#: Judgements drawn for one simulated study at most (agents x items x annotations, one byte each).
MAX_JUDGEMENTS = 10_000_000
#: The page's and the API's budget of scored (study, agent) pairs: a plan answers in seconds
#: (about 0.5 ms a pair, 10 ms beside a judge, whose PPI++ runs per pair).
MAX_SCORED = 10_000
MAX_SCORED_JUDGED = 1_000


@dataclass(frozen=True)
class PlanInput:
    """What the researcher enters. ``scores`` are the agents' expected true scores in [0, 1];
    ``difference`` the gap to separate (None: the closest pair of ``scores``); ``error`` the
    chance a worker's judgement is flipped, in [0, 0.5]; ``people`` (with a judge only) how many
    items people judge, the rest only the judge (None: half of them)."""

    scores: tuple[float, ...]
    items: int
    annotations: int = 3
    error: float = 0.0
    difference: float | None = None
    judge_agreement: float | None = None
    people: int | None = None
    payment: float | None = None
    studies: int = 1000
    seed: int = 0


def _number(value: Any, field: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{value!r} is not a number", field=field) from None
    if not math.isfinite(x):
        raise InputError(f"{value!r} is not a finite number", field=field)
    return x


def _whole(value: Any, field: str, low: int, high: int) -> int:
    x = _number(value, field)
    if not x.is_integer():
        raise InputError(f"{value!r} is not a whole number", field=field)
    if not low <= x <= high:
        raise InputError(f"must be between {low} and {high}, got {int(x)}", field=field)
    return int(x)


def parse_scores(text: str | Sequence[Any], field: str = "scores") -> tuple[float, ...]:
    """Agents' expected scores from "0.8, 0.7" (or a list): each in [0, 1]."""
    parts = [p for p in (text.replace(";", ",").split(",") if isinstance(text, str) else text)]
    parts = [p.strip() if isinstance(p, str) else p for p in parts]
    parts = [p for p in parts if p != ""]
    if not parts:
        raise InputError("give at least one agent's expected score, e.g. 0.8,0.7", field=field)
    scores = tuple(_number(p, field) for p in parts)
    if any(not 0.0 <= s <= 1.0 for s in scores):
        raise InputError("each score is a share of items, between 0 and 1", field=field)
    return scores


def make_input(
    *,
    scores: str | Sequence[Any],
    items: Any,
    annotations: Any = 3,
    agents: Any = None,
    error: Any = None,
    accuracy: Any = None,
    difference: Any = None,
    judge_agreement: Any = None,
    people: Any = None,
    payment: Any = None,
    studies: Any = 1000,
    seed: Any = 0,
    max_studies: int = MAX_STUDIES,
    budget: bool = True,
) -> PlanInput:
    """A checked `PlanInput` from raw values (form fields, CLI options, JSON), blank or None
    meaning "not given"; an `InputError` naming the field otherwise. One score with ``agents``
    K > 1 means a baseline and K - 1 agents each ``difference`` below the one before.
    ``budget`` (the page and the API) caps the simulated work at `MAX_SCORED` (study, agent)
    pairs, `MAX_SCORED_JUDGED` beside a judge; the command line runs what it is given."""

    def given(v: Any) -> bool:
        return v is not None and not (isinstance(v, str) and not v.strip())

    base = parse_scores(scores)
    d = _number(difference, "difference") if given(difference) else None
    if d is not None and not 0.0 < d <= 1.0:
        raise InputError("the difference to separate lies in (0, 1]", field="difference")
    if given(agents):
        k = _whole(agents, "agents", 1, MAX_AGENTS)
        if len(base) == 1 and k > 1:
            if d is None:
                raise InputError("with one baseline score, give the difference between agents", field="difference")
            base = tuple(max(0.0, base[0] - i * d) for i in range(k))
        elif len(base) != k:
            raise InputError(f"{len(base)} scores for {k} agents", field="agents")
    if len(base) > MAX_AGENTS:
        raise InputError(f"at most {MAX_AGENTS} agents", field="scores")
    if given(error) and given(accuracy):
        raise InputError("give the annotators' error or their accuracy, not both", field="accuracy")
    e = 0.0
    if given(error):
        e = _number(error, "error")
        if not 0.0 <= e <= 0.5:
            raise InputError("a worker's error rate lies in [0, 0.5] (0.5: a coin)", field="error")
    elif given(accuracy):
        a = _number(accuracy, "accuracy")
        if not 0.5 <= a <= 1.0:
            raise InputError("a worker's accuracy lies in [0.5, 1] (0.5: a coin)", field="accuracy")
        e = 1.0 - a
    n = _whole(items, "items", 2, MAX_ITEMS)
    j = _number(judge_agreement, "judge_agreement") if given(judge_agreement) else None
    if j is not None and not 0.5 <= j <= 1.0:
        raise InputError("the judge's agreement with people lies in [0.5, 1]", field="judge_agreement")
    p = None
    if given(people):
        if j is None:
            raise InputError("people judge a sample only beside an automatic judge", field="people")
        p = _whole(people, "people", stats.MIN_PPI_HUMAN, n - 1)
    elif j is not None:
        p = n // 2
        if p < stats.MIN_PPI_HUMAN:
            raise InputError(
                f"with a judge, people need at least {stats.MIN_PPI_HUMAN} items of their own", field="items"
            )
    pay = _number(payment, "payment") if given(payment) else None
    if pay is not None and pay < 0:
        raise InputError("a payment is not negative", field="payment")
    m = _whole(annotations, "annotations", 1, MAX_ANNOTATIONS)
    if len(base) * n * m > MAX_JUDGEMENTS:
        raise InputError(
            f"{len(base)} agents x {n} items x {m} annotations is over {MAX_JUDGEMENTS:,} judgements a study",
            field="items",
        )
    s = _whole(studies, "studies", 10, max_studies)
    cap = MAX_SCORED_JUDGED if j is not None else MAX_SCORED
    if budget and s * len(base) > cap:
        raise InputError(
            f"at most {cap // len(base):,} simulated studies for {len(base)} agents here "
            f"({cap:,} agent-studies; `proctor plan` runs more)",
            field="studies",
        )
    return PlanInput(
        scores=base,
        items=n,
        annotations=m,
        error=e,
        difference=d,
        judge_agreement=j,
        people=p,
        payment=pay,
        studies=s,
        seed=_whole(seed, "seed", 0, 2**32 - 1),
    )


def majority_error(error: float, annotations: int) -> float:
    """The chance the majority of `annotations` judgements is wrong when each is flipped with
    probability `error` independently; a tie (even counts) goes to the first judgement, which
    is wrong with probability `error`."""
    m = annotations
    from scipy.stats import binom  # here: scipy.stats costs every command ~0.5 s to import

    wrong_majority = float(binom.sf(m // 2, m, error))  # more than half wrong
    if m % 2 == 0:
        wrong_majority += float(binom.pmf(m // 2, m, error)) * error  # a tie: the first decides
    return wrong_majority


def _majority(truth: np.ndarray, flips: np.ndarray) -> np.ndarray:
    """Majority of each item's judgements (flips: ... x annotations of 0/1), tie to the first."""
    m = flips.shape[-1]
    wrong = flips.sum(-1)
    first = flips[..., 0]
    wrong_majority = (2 * wrong > m) | ((2 * wrong == m) & (first == 1))
    return np.where(wrong_majority, 1 - truth, truth)


def simulate_scores(
    plan: PlanInput, rng: np.random.Generator, scores: Sequence[float], items: int | None = None
) -> np.ndarray:
    """One simulated study: agents x items (default `plan.items`) of people's majority scores."""
    n = plan.items if items is None else items
    p = np.asarray(scores, dtype=float)[:, None]
    truth = (rng.random((len(scores), n)) < p).astype(np.int8)
    flips = (rng.random((len(scores), n, plan.annotations)) < plan.error).astype(np.int8)
    return _majority(truth, flips)


def _pair(plan: PlanInput) -> tuple[float, float] | None:
    """The two agents whose separation the power is for: the first score and one `difference`
    below it, or (no difference given) the closest two of the scores."""
    if plan.difference is not None:
        high = plan.scores[0]
        low = high - plan.difference
        if low < 0.0:
            high, low = min(1.0, plan.difference), 0.0
        return high, low
    if len(plan.scores) < 2:
        return None
    ordered = sorted(plan.scores, reverse=True)
    gaps = [(ordered[i] - ordered[i + 1], i) for i in range(len(ordered) - 1)]
    _, i = min(gaps)
    return ordered[i], ordered[i + 1]


def _half(low: float | None, high: float | None) -> float:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return math.nan
    return (high - low) / 2.0


def _mean(values: Sequence[float]) -> float | None:
    ok = [v for v in values if not math.isnan(v)]
    return math.fsum(ok) / len(ok) if ok else None


def run_plan(plan: PlanInput) -> dict[str, Any]:
    """Simulate `plan.studies` studies with a generator seeded by `plan.seed` and report
    {agents: [{score, observed, half_width, ...}], power, cost, ...} (module docstring)."""
    rng = np.random.default_rng(plan.seed)
    q = majority_error(plan.error, plan.annotations)
    k = len(plan.scores)
    judged = plan.judge_agreement is not None
    people = plan.people if judged else plan.items
    assert people is not None  # make_input sets it beside a judge
    halves: list[list[float]] = [[] for _ in range(k)]
    means: list[list[float]] = [[] for _ in range(k)]
    ppi_halves: list[list[float]] = [[] for _ in range(k)]
    effective: list[list[float]] = [[] for _ in range(k)]
    needed: list[int] = []
    target = stats.Z95 * math.sqrt(_observed(plan.scores[0], q) * (1 - _observed(plan.scores[0], q)) / people)
    pair = _pair(plan)
    separated = 0
    for study in range(plan.studies):
        scored = simulate_scores(plan, rng, plan.scores)
        if judged:
            assert plan.judge_agreement is not None
            disagree = rng.random(scored.shape) >= plan.judge_agreement
            judge = np.where(disagree, 1 - scored, scored)
            sample = rng.permutation(plan.items)[:people]
            rest = np.setdiff1d(np.arange(plan.items), sample)
        for a in range(k):
            if judged:
                human = scored[a, sample].astype(float).tolist()
                est = stats.mean_interval(human)
                r = stats.ppi_mean(
                    human, judge[a, sample].astype(float).tolist(), judge[a, rest].astype(float).tolist()
                )
                ppi_halves[a].append(_half(r["low"], r["high"]))
                effective[a].append(math.nan if r["effective_n"] is None else float(r["effective_n"]))
                if a == 0 and study < PILOTS and target > 0:
                    # Every item of the study, people's and the judge's, as a pilot of the plan.
                    need = stats.ppi_people_needed(
                        scored[0].astype(float).tolist(), judge[0].astype(float).tolist(), plan.items, target
                    )
                    if "people" in need:
                        needed.append(int(need["people"]))
            else:
                est = stats.mean_interval(scored[a].astype(float).tolist())
            halves[a].append(_half(est.low, est.high))
            means[a].append(est.mean)
        if pair is not None:
            two = simulate_scores(plan, rng, pair, people)  # people's items: the leaderboard's pair
            diff = stats.paired_effect(two[0].astype(float).tolist(), two[1].astype(float).tolist())["difference"]
            separated += int(diff.low > 0.0 or diff.high < 0.0)
    agents = []
    for a, p in enumerate(plan.scores):
        row: dict[str, Any] = {
            "score": p,
            "observed": _observed(p, q),
            "mean_estimate": _mean(means[a]),
            "half_width": _mean(halves[a]),
        }
        if judged:
            row["ppi_half_width"] = _mean(ppi_halves[a])
            row["effective_n"] = _mean(effective[a])
        agents.append(row)
    power = separated / plan.studies if pair is not None else None
    annotations_total = people * k * plan.annotations
    out: dict[str, Any] = {
        "agents": agents,
        "items": plan.items,
        "annotations": plan.annotations,
        "error": plan.error,
        "majority_error": q,
        "studies": plan.studies,
        "seed": plan.seed,
        "power": None
        if pair is None
        else {
            "high": pair[0],
            "low": pair[1],
            "difference": pair[0] - pair[1],
            "observed_difference": (pair[0] - pair[1]) * (1 - 2 * q),
            "power": power,
            "mc_se": math.sqrt(max(power or 0.0, 1e-12) * (1 - (power or 0.0)) / plan.studies),
            "method": stats.BONETT_PRICE,
        },
        "annotations_total": annotations_total,
        "payment": plan.payment,
        "cost": None if plan.payment is None else annotations_total * plan.payment,
        "methods": {"agent": stats.WILSON, "difference": stats.BONETT_PRICE},
    }
    if judged:
        out["judge"] = _judge_summary(plan, people, needed, target)
    clean: dict[str, Any] = _finite(out)
    return clean


def _finite(value: Any) -> Any:
    """`nan` as None all through (JSON has no NaN; the API and `--json` print this)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: Simulated studies whose items serve as pilots of `stats.ppi_people_needed` (the median is kept).
PILOTS = 25


def _observed(p: float, q: float) -> float:
    """The share people's majority calls right, for a true share p and a majority error q."""
    return p * (1 - q) + (1 - p) * q


def _judge_summary(plan: PlanInput, people: int, needed: list[int], target: float) -> dict[str, Any]:
    """How many of the people's items the judge saves: `stats.ppi_people_needed` (the median over
    the first `PILOTS` simulated studies, each read as a pilot of all its items) for the normal
    half-width people alone would get on their `people` items (the first agent's score)."""
    out: dict[str, Any] = {"agreement": plan.judge_agreement, "people": people, "of": plan.items}
    if not needed:
        out["reason"] = "people's items had no spread: nothing to plan for"
        return out
    need = int(np.median(needed))
    saved = max(0, people - need)
    out.update(
        target_half_width=target,
        people_needed=need,
        items_saved=saved,
        annotations_saved=saved * len(plan.scores) * plan.annotations,
        cost_saved=None if plan.payment is None else saved * len(plan.scores) * plan.annotations * plan.payment,
    )
    return out


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The plan as a few readable lines (the CLI's output without --json)."""
    lines = [
        f"{result['items']} items, {result['annotations']} annotations each, worker error "
        f"{result['error']:.3g} (the majority's: {result['majority_error']:.3g}); "
        f"{result['studies']} simulated studies, seed {result['seed']}",
    ]
    for i, a in enumerate(result["agents"], 1):
        line = (
            f"agent {i}: true score {a['score']:.3f}, people see {a['observed']:.3f}, "
            f"95% interval ±{_fmt(a['half_width'])} ({result['methods']['agent']})"
        )
        if "ppi_half_width" in a:
            line += f"; with the judge ±{_fmt(a['ppi_half_width'])}, worth {_fmt(a['effective_n'], 0)} people's items"
        lines.append(line)
    pw = result["power"]
    if pw is None:
        lines.append("power: give two agents' scores or a difference")
    else:
        lines.append(
            f"power to separate {pw['high']:.3f} from {pw['low']:.3f} (difference {pw['difference']:.3f}, "
            f"people see {pw['observed_difference']:.3f}): {pw['power']:.1%} ± {pw['mc_se']:.1%} "
            f"of simulated studies' paired intervals exclude 0"
        )
    cost = result["cost"]
    lines.append(
        f"annotations: {result['annotations_total']:,}"
        + (f"; cost {cost:,.2f} at {result['payment']:g} per annotation" if cost is not None else "")
    )
    judge = result.get("judge")
    if judge is not None:
        if "reason" in judge:
            lines.append(f"judge: {judge['reason']}")
        else:
            lines.append(
                f"judge agreeing {judge['agreement']:.0%}: people judge {judge['people']} of {judge['of']} items; "
                f"for ±{judge['target_half_width']:.3f} people alone need those {judge['people']}, beside the "
                f"judge {judge['people_needed']}: it saves {judge['items_saved']} items "
                f"({judge['annotations_saved']:,} annotations"
                + (f", {judge['cost_saved']:,.2f}" if judge["cost_saved"] is not None else "")
                + ")"
            )
    return lines


def _fmt(x: float | None, places: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{places}f}"
