"""Listener agreement (Zhao et al. 2023, eq. 14): how closely a model listener's path follows
the paths people took for the same instruction.

    Agreement(L_h, L^) = mean over instructions u of nDTW(e_h(u), e^(u))

with the human path e_h(u) as nDTW's reference (its length normalises DTW) and the
listener's path e^(u) as the trajectory. An instruction followed by several people counts
once: its value is the mean over its human paths, so the bootstrap resamples instructions.
Per speaker (Item.category) and listener (an Agent with outputs in the study); only valid
human annotations (not gold, not excluded) on instructions the listener answered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.agents.models import Agent, AgentOutput
from app.kinds.navigation.graph import NavGraph
from app.kinds.navigation.metrics import dedupe, dtw, ndtw_from_dtw
from app.leaderboards import stats
from app.studies.models import Annotation, Item, Study


def path_ndtw(graph: NavGraph, reference: Sequence[str], trajectory: Sequence[str]) -> float:
    """nDTW of a trajectory against a reference path, both run-length de-duplicated; 0 when
    they lie in different parts of the building (DTW is infinite)."""
    r = graph.indices(dedupe(reference), field="path")
    q = graph.indices(dedupe(trajectory), field="path")
    return ndtw_from_dtw(dtw(graph.distances[r[:, None], q]), len(r))


def instruction_agreement(graph: NavGraph, human_paths: Sequence[Sequence[str]],
                          listener_path: Sequence[str]) -> float:
    """One instruction's agreement: the mean nDTW of the listener's path against each human's."""
    return sum(path_ndtw(graph, h, listener_path) for h in human_paths) / len(human_paths)


def agreement_rows(session: Session, study: Study,
                   get_graph: Callable[[str], NavGraph] | None = None) -> list[dict]:
    """One row per (speaker, listener): the agreement estimate over instructions with a 95%
    bootstrap interval, the number of instructions and of human paths."""
    if get_graph is None:
        from app.kinds.navigation.environments import get_graph
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False),
                 Annotation.excluded.is_(False))
    listened = select(AgentOutput.item_id).where(AgentOutput.study_id == study.id)
    followed = select(Annotation.item_id).where(valid)
    conn = session.connection()
    # Only the path fields are read (never the traces), for items both people and a
    # listener followed.
    humans: dict[int, list[list[str]]] = defaultdict(list)
    for item_id, path in conn.execute(select(Annotation.item_id, Annotation.response["path"])
                                      .where(valid, Annotation.item_id.in_(listened))
                                      .order_by(Annotation.id)):
        if path:
            humans[item_id].append(path)
    if not humans:
        return []
    outputs = conn.execute(select(AgentOutput.agent_id, AgentOutput.item_id, AgentOutput.response["path"])
                           .where(AgentOutput.study_id == study.id, AgentOutput.item_id.in_(followed))
                           .order_by(AgentOutput.id)).all()
    items = {i: (cat, scan) for i, cat, scan in conn.execute(
        select(Item.id, Item.category, Item.payload["scan"].as_string())
        .where(Item.id.in_(list(humans))))}
    agents = {a.id: f"{a.name} v{a.version}" for a in session.scalars(
        select(Agent).where(Agent.id.in_({o[0] for o in outputs})))}

    graphs: dict[str, NavGraph] = {}  # one lookup per building
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    n_paths: dict[tuple[str, int], int] = defaultdict(int)
    for agent_id, item_id, listener_path in outputs:
        if not listener_path or item_id not in humans:
            continue
        cat, scan = items[item_id]
        if scan not in graphs:
            graphs[scan] = get_graph(scan)
        values[cat, agent_id].append(instruction_agreement(graphs[scan], humans[item_id], listener_path))
        n_paths[cat, agent_id] += len(humans[item_id])

    baseline = str((study.kind_settings or {}).get("baseline", "human"))
    rows = []
    for cat, agent_id in sorted(values, key=lambda k: (k[0] != baseline, k[0], agents[k[1]])):
        v = values[cat, agent_id]
        rows.append({"category": cat, "listener": agents[agent_id],
                     "agreement": stats.bootstrap_mean_interval(v).as_dict(),
                     "instructions": len(v), "human_paths": n_paths[cat, agent_id]})
    return rows


def agreement_table(session: Session, study: Study) -> dict | None:
    """The leaderboard table, or None when no listener and person followed one instruction."""
    rows = agreement_rows(session, study)
    if not rows:
        return None
    return {
        "key": "navigation_agreement",
        "title": "Listener agreement with human followers",
        "note": ("Per speaker and model listener: the mean over instructions of nDTW between each "
                 "human path and the listener's path for the same instruction (human path as the "
                 "reference; an instruction's human paths are averaged first), with a 95% bootstrap "
                 "interval over instructions. Valid human annotations only."),
        "columns": [{"key": "category", "label": "Speaker"}, {"key": "listener", "label": "Listener"},
                    {"key": "agreement", "label": "Agreement (nDTW)"},
                    {"key": "instructions", "label": "Instructions"},
                    {"key": "human_paths", "label": "Human paths"}],
        "rows": rows,
    }
