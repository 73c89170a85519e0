"""Scoring STS annotations (paper 004, sections 3.3-3.4 and appendix A.4-A.5; DESIGN.md 6).

An annotation is one marker an annotator placed on one continuation: success or failure, at
the first moment of either, `step` steps after the takeover point. Reference annotations
(episodes with a known label) measure the annotators and are left out of agent scores.

- A continuation's outcome is the majority of its markers; a tie counts as half a success.
- An agent's success share p is the mean outcome over its continuations (n counts
  continuations, not annotations), with standard error sqrt(p(1-p)/n) and a 95% Wilson
  interval (a tie's half success enters the interval's count as a half); the same per
  category, and per scenario (the consistency of Figure 9). Under MIN_N continuations an
  estimate carries the note "too few: n = ...".
- Corrected: the share of success markers (per continuation, then averaged: what one
  annotator says, whose error rates the reference episodes measure) Rogan-Gladen corrected
  by the annotators' pooled sensitivity and specificity on reference episodes, with a
  bootstrap interval over the agent's scenarios and the reference episodes
  (app/leaderboards/correction.py); None with a reason when not computable.
- Time to completion (appendix A.4, Figure 8: "the particular time when an agent succeeds in a
  behavioural continuation", over "the scenarios in which they succeed"): one time per
  continuation whose outcome is a success, the median step of its success markers after the
  takeover point. `ttc` gives their median with a distribution-free 95% interval (order
  statistics) and every time; `ttc_median` the median (None when no continuation succeeded).
- An annotator's sensitivity is the share of reference episodes labelled success that they
  marked success, specificity the same for failure, balanced accuracy their mean (None unless
  the annotator saw both labels).

- With an automatic judge (`read_judge`: its success or failure on every continuation, people's
  or not): `judge_agreement`, the share of people's continuations where the judge says their
  outcome (a tie half), and `ppi`, the success share people would give over every continuation
  the judge saw, PPI++ from people's outcomes and the judge's (stats.ppi_mean; issue 28), with
  `n_human`, `n_judge` and `effective_n`. It assumes the continuations people saw are a random
  sample of them.

Every estimate has the shape {mean, low, high, n, method} (DESIGN.md section 7).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from statistics import median
from typing import Any

from app.errors import InputError
from app.leaderboards.correction import rogan_gladen_estimate
from app.leaderboards import stats
from app.leaderboards.stats import PLAN_HALF_WIDTH  # not judged's: its rows import the ORM
from app.textfiles import jsonl_objects

MARKERS = ("success", "failure")
MIN_N = 5  # fewer continuations than this: an estimate says "too few" rather than its interval
TTC_METHOD = (
    "median over successful continuations of the steps from the takeover to the success "
    "marker; 95% distribution-free interval (order statistics)"
)


@dataclass(frozen=True)
class Marker:
    """One annotation as scoring sees it."""

    annotator: str
    marker: str  # "success" | "failure"
    reference: bool
    agent: str = ""
    scenario: str = ""
    continuation: str = ""
    category: str = ""
    step: float | None = None
    label: str | None = None  # reference episodes only


def _text(value: object, line: int, field: str, required: bool = True) -> str:
    """Ids are kept as text whatever their JSON type (a number id becomes its digits)."""
    if value is None or value == "":
        if required:
            raise InputError("is missing", line=line, field=field)
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"must be a string or a number, not {type(value).__name__}", line=line, field=field)
    return value if isinstance(value, str) else json.dumps(value)


def _choice(value: object, line: int, field: str) -> str:
    if value not in MARKERS:
        raise InputError(f'must be "success" or "failure", not {json.dumps(value)}', line=line, field=field)
    return value


def parse_marker(obj: object, line: int) -> Marker:
    """One line of an annotations file; InputError names the line and the field."""
    if not isinstance(obj, dict):
        raise InputError("each line must be a JSON object", line=line)
    reference = obj.get("reference", None)
    if not isinstance(reference, bool):
        raise InputError("must be true or false", line=line, field="reference")
    marker = _choice(obj.get("marker"), line, "marker")
    step = obj.get("step")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step) or step < 0:
            raise InputError(f"must be a number of steps (0 or more), not {json.dumps(step)}", line=line, field="step")
    if reference:
        return Marker(
            annotator=_text(obj.get("annotator"), line, "annotator"),
            marker=marker,
            reference=True,
            label=_choice(obj.get("label"), line, "label"),
            agent=_text(obj.get("agent"), line, "agent", required=False),
            scenario=_text(obj.get("scenario"), line, "scenario", required=False),
            continuation=_text(obj.get("continuation"), line, "continuation", required=False),
            category=_text(obj.get("category"), line, "category", required=False),
            step=step,
        )
    if step is None:
        raise InputError("is missing (the marker's steps after the takeover point)", line=line, field="step")
    return Marker(
        annotator=_text(obj.get("annotator"), line, "annotator"),
        marker=marker,
        reference=False,
        agent=_text(obj.get("agent"), line, "agent"),
        scenario=_text(obj.get("scenario"), line, "scenario"),
        continuation=_text(obj.get("continuation"), line, "continuation"),
        category=_text(obj.get("category"), line, "category", required=False),
        step=step,
    )


def read_markers(lines: Iterable[str]) -> Iterator[Marker]:
    """Parse JSONL (blank lines skipped); a continuation given two categories is refused."""
    categories: dict[tuple, tuple[str, int]] = {}
    for n, obj in jsonl_objects(lines):
        m = parse_marker(obj, n)
        if not m.reference:
            key = (m.agent, m.scenario, m.continuation)
            seen = categories.setdefault(key, (m.category, n))
            if seen[0] != m.category:
                raise InputError(
                    f"{json.dumps(m.category)}, but line {seen[1]} gives this continuation "
                    f"the category {json.dumps(seen[0])}",
                    line=n,
                    field="category",
                )
        yield m


def _continuation_lines(
    data: bytes | str | Iterable[str],
) -> Iterator[tuple[int, tuple[str, str, str], dict[str, Any]]]:
    """A JSONL file of lines about continuations (blank lines skipped): each line's number, its
    (agent, scenario, continuation) and the line's object; InputError names a missing id."""
    text = data if isinstance(data, (bytes, str)) else "\n".join(data)
    for n, obj in jsonl_objects(text):
        key = (
            _text(obj.get("agent"), n, "agent"),
            _text(obj.get("scenario"), n, "scenario"),
            _text(obj.get("continuation"), n, "continuation"),
        )
        yield n, key, obj


def read_judge(data: bytes | str | Iterable[str]) -> dict[tuple[str, str, str], float]:
    """An automatic judge's verdicts, JSONL {"agent", "scenario", "continuation", "success":
    true|false} (blank lines skipped): (agent, scenario, continuation) -> 1.0 or 0.0.
    InputError names the line and the field; a continuation judged twice is refused."""
    out: dict[tuple[str, str, str], float] = {}
    first: dict[tuple[str, str, str], int] = {}
    for n, key, obj in _continuation_lines(data):
        success = obj.get("success")
        if not isinstance(success, bool):
            raise InputError(f"must be true or false, not {json.dumps(success)}", line=n, field="success")
        if key in first:
            raise InputError(f"this continuation is judged on line {first[key]} already", line=n, field="continuation")
        first[key], out[key] = n, 1.0 if success else 0.0
    if not out:
        raise InputError("the judge's file holds no verdicts", field="file")
    return out


def read_features(data: bytes | str | Iterable[str]) -> dict[tuple[str, str, str], list[float]]:
    """What a learned judge predicts from, JSONL {"agent", "scenario", "continuation",
    "features": [numbers]} on every continuation (people's or not; blank lines skipped), every
    line with as many numbers as the first: (agent, scenario, continuation) -> the features.
    InputError names the line and the field; a continuation given twice is refused."""
    out: dict[tuple[str, str, str], list[float]] = {}
    first: dict[tuple[str, str, str], int] = {}
    width: int | None = None
    for n, key, obj in _continuation_lines(data):
        x = obj.get("features")
        if (
            not isinstance(x, list)
            or not x
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in x)
        ):
            raise InputError(
                f"must be a non-empty list of finite numbers, not {json.dumps(x)}", line=n, field="features"
            )
        if width is not None and len(x) != width:
            raise InputError(f"{len(x)} numbers; the first line has {width}", line=n, field="features")
        if key in first:
            raise InputError(f"this continuation is given on line {first[key]} already", line=n, field="continuation")
        width, first[key], out[key] = len(x), n, [float(v) for v in x]
    if not out:
        raise InputError("the features file holds no continuations", field="file")
    return out


def with_learned(rows: list[tuple], features: dict[tuple[str, str, str], list[float]], agent: str) -> dict:
    """A success predictor learned from people (issue 28.1) for one agent: `rows` its (key,
    outcome, marks) of people's continuations, `features` what every continuation shows without
    people. `learned`: stats.crossppi_mean (a logistic regression cross-fitted over people's
    continuations) with `n_human`, `n_judge`, `effective_n`; `learned_agreement`: the share of
    people's continuations (ties left out) whose cross-fitted verdict is theirs (Wilson)."""
    missing = [key for key, _, _ in rows if key not in features]
    if missing:
        raise InputError(
            f"the features file has no line for agent {missing[0][0]!r}, scenario {missing[0][1]!r}, "
            f"continuation {missing[0][2]!r}, which people annotated",
            field="learned",
        )
    seen = {key for key, _, _ in rows}
    human = [o for _, o, _ in rows]
    only = [x for key, x in features.items() if key[0] == agent and key not in seen]
    est = stats.crossppi_mean([features[key] for key, _, _ in rows], human, only, unit="continuation")
    predicted = est.pop("predictions")
    est.pop("unlabelled")
    est["n_human"] = est.pop("n")
    decided = [(h, p) for h, p in zip(human, predicted or []) if h != 0.5]
    hits = sum((p >= 0.5) == (h > 0.5) for h, p in decided)
    agreement = stats.proportion(hits, len(decided)).as_dict() if decided else None
    return {"learned": est, "learned_agreement": agreement}


def with_judge(
    rows: list[tuple], judge: dict[tuple[str, str, str], float], agent: str, half_width: float = PLAN_HALF_WIDTH
) -> dict:
    """`judge_agreement`, `ppi` and `plan` for one agent: `rows` its (key, outcome, marks) of
    people's continuations, `judge` every verdict; `plan`: how many of the agent's
    continuations people must mark, at random, for PPI++'s interval to be ±`half_width`, this
    study's marks taken as the pilot (stats.ppi_people_needed)."""
    missing = [key for key, _, _ in rows if key not in judge]
    if missing:
        raise InputError(
            f"the judge's file has no verdict on agent {missing[0][0]!r}, scenario "
            f"{missing[0][1]!r}, continuation {missing[0][2]!r}, which people annotated: "
            "PPI needs the judge on every one",
            field="judge",
        )
    seen = {key for key, _, _ in rows}
    human = [o for _, o, _ in rows]
    judged = [judge[key] for key, _, _ in rows]
    judge_only = [v for key, v in judge.items() if key[0] == agent and key not in seen]
    agreement = stats.mean_interval([1 - abs(h - j) for h, j in zip(human, judged)]).as_dict()
    ppi = stats.ppi_mean(human, judged, judge_only, unit="continuation")
    ppi["n_human"] = ppi.pop("n")
    plan = stats.ppi_people_needed(human, judged, len(human) + len(judge_only), half_width, unit="continuation")
    return {"judge_agreement": agreement, "ppi": ppi, "plan": plan}


def truth(reference: dict) -> tuple[str, int | None]:
    """What a marker is checked against: a reference episode's label, else the simulator."""
    if reference.get("label"):
        return reference["label"], reference.get("label_step")
    outcome = reference.get("simulator")
    return outcome, reference.get("success_step") if outcome == "success" else reference.get("length")


def too_few(n: int) -> str:
    return f"too few: n = {n}"


def share(outcomes: list[float], scenarios: list[str] | None = None) -> dict:
    """n, success share p, its standard error sqrt(p(1-p)/n), and the estimate {mean, low, high,
    n, method} (mean = p), with "note" under MIN_N continuations. The interval is the core's
    (stats.mean_interval): the continuations of one scenario share its difficulty, so given
    each continuation's `scenarios` the scenario is the unit (Wilson at the effective n over
    scenarios); without them, or with one continuation per scenario, Wilson's for the share
    (a tie's half success counted as a half)."""
    n = len(outcomes)
    if not n:
        return {
            "n": 0,
            "success": None,
            "se": None,
            "mean": None,
            "low": None,
            "high": None,
            "method": stats.WILSON,
            "note": too_few(0),
        }
    clustered = scenarios is not None and len(set(scenarios)) < n
    est = stats.mean_interval(outcomes, clusters=scenarios if clustered else None)
    if not clustered and est.method != stats.WILSON:  # a tie's half: Wilson at the count
        est = stats.bounded_mean(sum(outcomes), n)
    p = est.mean
    out = {
        "n": n,
        "success": p,
        "se": math.sqrt(p * (1 - p) / n),
        "mean": p,
        "low": est.low,
        "high": est.high,
        "method": est.method,
    }
    if n < MIN_N:
        out["note"] = too_few(n)
    return out


def time_to_completion(times: list[float]) -> dict:
    """{median, low, high, n, method, steps}: the median of the per-continuation times with the
    order-statistic interval (x_(j), x_(n-j+1)), j the largest with P(Bin(n, 1/2) < j) <= 2.5%;
    none below 6 times (then "note" says so)."""
    steps = sorted(times)
    n = len(steps)
    out = {
        "median": median(steps) if n else None,
        "low": None,
        "high": None,
        "n": n,
        "method": TTC_METHOD,
        "steps": steps,
    }
    import numpy as np
    from scipy.stats import binom

    # j = how many m have P(B <= m) <= 2.5%, i.e. the largest j with P(B < j) <= 2.5%.
    j = int(np.count_nonzero(binom.cdf(np.arange(n + 1), n, 0.5) <= 0.025)) if n else 0
    if j:
        out["low"], out["high"] = steps[j - 1], steps[n - j]
    else:
        out["note"] = f"too few for an interval: n = {n}"
    return out


def outcome(markers: list[str]) -> float:
    """A continuation's outcome: the majority of its markers, a tie half a success."""
    s = sum(m == "success" for m in markers)
    f = len(markers) - s
    return 1.0 if s > f else 0.0 if s < f else 0.5


def score(
    markers: Iterable[Marker],
    *,
    seed: int = 0,
    judge: dict[tuple[str, str, str], float] | None = None,
    half_width: float = PLAN_HALF_WIDTH,
    learned: dict[tuple[str, str, str], list[float]] | None = None,
) -> dict:
    """{"agents": {name: {n, success, se, mean, low, high, method, corrected, per_category,
    per_scenario, ttc, ttc_median[, judge_agreement, ppi]}}, "reference": {pooled sensitivity
    and specificity}, "annotators": {id: {n_reference, sensitivity, specificity,
    balanced_accuracy}}}; `judge_agreement` and `ppi` with a judge (read_judge); `learned` and
    `learned_agreement` with a learned judge's features (read_features, with_learned)."""
    per_continuation: dict[tuple, list[tuple[str, float | None]]] = defaultdict(list)
    category: dict[tuple, str] = {}
    refs: dict[str, dict[str, list[bool]]] = {}
    for m in markers:
        refs.setdefault(m.annotator, {"success": [], "failure": []})
        if m.reference:
            refs[m.annotator][m.label].append(m.marker == m.label)
            continue
        key = (m.agent, m.scenario, m.continuation)
        per_continuation[key].append((m.marker, m.step))
        category[key] = m.category
    # Pooled over every reference annotation: the annotator pool's rates, for the correction.
    hits = {label: [h for r in refs.values() for h in r[label]] for label in MARKERS}

    by_agent: dict[str, list[tuple]] = defaultdict(list)
    for key, marks in per_continuation.items():
        by_agent[key[0]].append((key, outcome([m for m, _ in marks]), marks))
    agents = {}
    for agent in sorted(by_agent):
        rows = by_agent[agent]
        cats: dict[str, list[float]] = defaultdict(list)
        cat_scenarios: dict[str, list[str]] = defaultdict(list)
        scenarios: dict[str, list[float]] = defaultdict(list)
        times = []
        for key, o, marks in rows:
            cats[category[key]].append(o)
            cat_scenarios[category[key]].append(key[1])
            scenarios[key[1]].append(o)
            if o == 1.0:
                times.append(median(s for m, s in marks if m == "success"))
        outcomes = [o for _, o, _ in rows]
        # Sensitivity and specificity are one annotator's, measured per reference annotation,
        # so the correction applies to what one annotator says: each continuation's share of
        # success markers (linear in the truth), not the majority of several, which errs less
        # than one annotator and would be over-corrected.
        marked = [sum(m == "success" for m, _ in marks) / len(marks) for _, _, marks in rows]
        corrected = rogan_gladen_estimate(
            marked,
            hits["success"],
            hits["failure"],
            clusters=[key[1] for key, _, _ in rows],
            cluster_name="scenarios",
            seed=seed,
        )
        if corrected["mean"] is not None and len(outcomes) < MIN_N:
            corrected["note"] = too_few(len(outcomes))
        ttc = time_to_completion(times)
        agents[agent] = {
            **share(outcomes, [key[1] for key, _, _ in rows]),
            "corrected": corrected,
            "per_category": {c: share(v, cat_scenarios[c]) for c, v in sorted(cats.items())},
            "per_scenario": {s: sum(v) / len(v) for s, v in sorted(scenarios.items())},
            "ttc": ttc,
            "ttc_median": ttc["median"],
        }
        if judge is not None:
            agents[agent].update(with_judge(rows, judge, agent, half_width))
        if learned is not None:
            agents[agent].update(with_learned(rows, learned, agent))

    annotators = {}
    for who in sorted(refs):
        right = refs[who]
        sens = sum(right["success"]) / len(right["success"]) if right["success"] else None
        spec = sum(right["failure"]) / len(right["failure"]) if right["failure"] else None
        annotators[who] = {
            "n_reference": len(right["success"]) + len(right["failure"]),
            "sensitivity": sens,
            "specificity": spec,
            "balanced_accuracy": (sens + spec) / 2 if sens is not None and spec is not None else None,
        }
    rate = {label: sum(h) / len(h) if h else None for label, h in hits.items()}
    reference = {
        "n_success": len(hits["success"]),
        "n_failure": len(hits["failure"]),
        "sensitivity": rate["success"],
        "specificity": rate["failure"],
    }
    return {"agents": agents, "reference": reference, "annotators": annotators}
