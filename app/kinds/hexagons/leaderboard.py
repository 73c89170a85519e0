"""The Hexagons leaderboard section: per agent and annotator, the eight metrics averaged over
steps, overall, per category and per step position, each with a 95% interval that resamples
procedures (the steps of one procedure are not independent): 2000 resamples, seed 0, the mean
over the resampled procedures' steps. Reads one row per valid annotation and agent output
(studies hold hundreds of procedures)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.agents.models import Agent, AgentOutput
from app.auth.models import User
from app.kinds.hexagons import metrics
from app.kinds.hexagons.execution import execution_metrics
from app.kinds.hexagons.score import position_label
from app.studies.models import Annotation, Item, Study


def cluster_estimate(groups: list[list[float]], n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean over all steps with a percentile interval resampling the groups (procedures)."""
    sums = np.array([sum(g) for g in groups], dtype=float)
    counts = np.array([len(g) for g in groups], dtype=float)
    n = len(groups)
    if not n or not counts.sum():
        return {"n": 0, "mean": None, "low": None, "high": None}
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    means = sums[idx].sum(1) / counts[idx].sum(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"n": int(counts.sum()), "mean": float(sums.sum() / counts.sum()), "low": float(low), "high": float(high)}


def _executions(session: Session, study: Study):
    """(who, item id, category, per-step metrics) for every agent output and valid annotation."""
    for name, version, item_id, cat, ref, response in session.execute(
            select(Agent.name, Agent.version, Item.id, Item.category, Item.reference, AgentOutput.response)
            .join(AgentOutput, AgentOutput.agent_id == Agent.id).join(Item, Item.id == AgentOutput.item_id)
            .where(AgentOutput.study_id == study.id, Item.is_gold.is_(False))):
        if ref:
            yield f"{name} v{version}", item_id, cat, execution_metrics(ref, response)["steps"]
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    for who, item_id, cat, scores in session.execute(
            select(User.pseudonym, Annotation.item_id, Item.category, Annotation.scores)
            .join(Item, Item.id == Annotation.item_id).join(User, User.id == Annotation.worker_id).where(valid)):
        if scores and scores.get("per_step"):
            yield who or "?", item_id, cat, scores["per_step"]


def section(session: Session, study: Study) -> dict | None:
    # who -> group -> item -> metric -> values
    data: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    for who, item_id, cat, steps in _executions(session, study):
        for k, m in enumerate(steps, start=1):
            for group in ("all", f"category: {cat}", f"step {position_label(k)}"):
                for key in metrics.KEYS:
                    data[who][group][item_id][key].append(m[key])
    if not data:
        return None
    columns = [{"key": "who", "label": "Agent / annotator"}, {"key": "group", "label": "Steps"}] + \
              [{"key": k, "label": metrics.LABELS[k]} for k in metrics.KEYS]
    rows = []
    for who in sorted(data):
        groups = sorted(data[who], key=lambda g: (g != "all", g.startswith("step"), len(g), g))
        for g in groups:
            items = data[who][g].values()
            rows.append({"who": who, "group": g,
                         **{k: cluster_estimate([v[k] for v in items]) for k in metrics.KEYS}})
    return {"tables": [{
        "key": "hexagons_metrics", "title": "Action- and board-based metrics, averaged over steps",
        "note": ("Each cell: the mean over steps with a 95% interval resampling procedures. Both sets "
                 "empty (nothing to paint, nothing painted) counts 1. Annotators' steps were executed on "
                 "their own boards; agents' on the board their predictions name (by default the gold one)."),
        "columns": columns, "rows": rows}]}
