"""Scoring STS annotations (paper 004, sections 3.3-3.4 and appendix A.4-A.5; DESIGN.md 6).

An annotation is one marker an annotator placed on one continuation: success or failure, at
the first moment of either, `step` steps after the takeover point. Reference annotations
(episodes with a known label) measure the annotators and are left out of agent scores.

- A continuation's outcome is the majority of its markers; a tie counts as half a success.
- An agent's success share p is the mean outcome over its continuations (n counts
  continuations, not annotations), with standard error sqrt(p(1-p)/n); the same per category,
  and per scenario (the consistency of Figure 9).
- Time to completion (appendix A.4): the steps from the takeover point to a success marker;
  `ttc_median` is the median over the agent's success markers (None when there are none).
- An annotator's sensitivity is the share of reference episodes labelled success that they
  marked success, specificity the same for failure, balanced accuracy their mean (None unless
  the annotator saw both labels).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from statistics import median

from app.errors import InputError

MARKERS = ("success", "failure")


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
        raise InputError(f"must be \"success\" or \"failure\", not {json.dumps(value)}", line=line, field=field)
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
            raise InputError(f"must be a number of steps (0 or more), not {json.dumps(step)}",
                             line=line, field="step")
    if reference:
        return Marker(annotator=_text(obj.get("annotator"), line, "annotator"), marker=marker,
                      reference=True, label=_choice(obj.get("label"), line, "label"),
                      agent=_text(obj.get("agent"), line, "agent", required=False),
                      scenario=_text(obj.get("scenario"), line, "scenario", required=False),
                      continuation=_text(obj.get("continuation"), line, "continuation", required=False),
                      category=_text(obj.get("category"), line, "category", required=False), step=step)
    if step is None:
        raise InputError("is missing (the marker's steps after the takeover point)", line=line, field="step")
    return Marker(annotator=_text(obj.get("annotator"), line, "annotator"), marker=marker, reference=False,
                  agent=_text(obj.get("agent"), line, "agent"),
                  scenario=_text(obj.get("scenario"), line, "scenario"),
                  continuation=_text(obj.get("continuation"), line, "continuation"),
                  category=_text(obj.get("category"), line, "category", required=False), step=step)


def read_markers(lines: Iterable[str]) -> Iterator[Marker]:
    """Parse JSONL (blank lines skipped); a continuation given two categories is refused."""
    categories: dict[tuple, tuple[str, int]] = {}
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg} at column {exc.colno})", line=n) from None
        m = parse_marker(obj, n)
        if not m.reference:
            key = (m.agent, m.scenario, m.continuation)
            seen = categories.setdefault(key, (m.category, n))
            if seen[0] != m.category:
                raise InputError(f"{json.dumps(m.category)}, but line {seen[1]} gives this continuation "
                                 f"the category {json.dumps(seen[0])}", line=n, field="category")
        yield m


def share(outcomes: list[float]) -> dict:
    """n, success share and its standard error sqrt(p(1-p)/n)."""
    n = len(outcomes)
    p = sum(outcomes) / n if n else None
    return {"n": n, "success": p, "se": math.sqrt(p * (1 - p) / n) if n else None}


def outcome(markers: list[str]) -> float:
    """A continuation's outcome: the majority of its markers, a tie half a success."""
    s = sum(m == "success" for m in markers)
    f = len(markers) - s
    return 1.0 if s > f else 0.0 if s < f else 0.5


def score(markers: Iterable[Marker]) -> dict:
    """{"agents": {name: {n, success, se, per_category, per_scenario, ttc_median}},
    "annotators": {id: {n_reference, sensitivity, specificity, balanced_accuracy}}}."""
    per_continuation: dict[tuple, list[str]] = defaultdict(list)
    category: dict[tuple, str] = {}
    ttc: dict[str, list[float]] = defaultdict(list)
    refs: dict[str, dict[str, list[bool]]] = {}
    for m in markers:
        refs.setdefault(m.annotator, {"success": [], "failure": []})
        if m.reference:
            refs[m.annotator][m.label].append(m.marker == m.label)
            continue
        key = (m.agent, m.scenario, m.continuation)
        per_continuation[key].append(m.marker)
        category[key] = m.category
        if m.marker == "success":
            ttc[m.agent].append(m.step)

    by_agent: dict[str, list[tuple]] = defaultdict(list)
    for key, marks in per_continuation.items():
        by_agent[key[0]].append((key, outcome(marks)))
    agents = {}
    for agent in sorted(by_agent):
        rows = by_agent[agent]
        cats: dict[str, list[float]] = defaultdict(list)
        scenarios: dict[str, list[float]] = defaultdict(list)
        for key, o in rows:
            cats[category[key]].append(o)
            scenarios[key[1]].append(o)
        agents[agent] = {**share([o for _, o in rows]),
                         "per_category": {c: share(v) for c, v in sorted(cats.items())},
                         "per_scenario": {s: sum(v) / len(v) for s, v in sorted(scenarios.items())},
                         "ttc_median": median(ttc[agent]) if ttc[agent] else None}

    annotators = {}
    for who in sorted(refs):
        right = refs[who]
        sens = sum(right["success"]) / len(right["success"]) if right["success"] else None
        spec = sum(right["failure"]) / len(right["failure"]) if right["failure"] else None
        annotators[who] = {"n_reference": len(right["success"]) + len(right["failure"]),
                           "sensitivity": sens, "specificity": spec,
                           "balanced_accuracy": (sens + spec) / 2 if sens is not None and spec is not None else None}
    return {"agents": agents, "annotators": annotators}
