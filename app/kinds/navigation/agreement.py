"""Listener agreement (Zhao et al. 2023, eq. 14): how closely a model listener's path follows
the paths people took for the same instruction.

    Agreement(L_h, L^) = mean over instructions u of nDTW(e_h(u), e^(u))

with the human path e_h(u) as nDTW's reference (its length normalises DTW) and the
listener's path e^(u) as the trajectory. An instruction followed by several people counts
once: its value is the mean over its human paths; the 95% interval is
``stats.mean_interval`` (nDTW is in [0, 1]) with the instruction's path (Item.cluster) as the
unit. Per speaker (Item.category) and listener (an Agent with outputs in the study); only valid
human annotations (not gold, not excluded) on instructions the listener answered.

Also here: the agreement between the human followers themselves (followers_agreement_table),
Krippendorff's alpha per rated question at the question's level of measurement.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
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


def instruction_agreement(graph: NavGraph, human_paths: Sequence[Sequence[str]], listener_path: Sequence[str]) -> float:
    """One instruction's agreement: the mean nDTW of the listener's path against each human's."""
    return sum(path_ndtw(graph, h, listener_path) for h in human_paths) / len(human_paths)


def agreement_rows(session: Session, study: Study, get_graph: Callable[[str], NavGraph] | None = None) -> list[dict]:
    """One row per (speaker, listener): the agreement estimate over instructions with a 95%
    interval whose unit is the path (``stats.mean_interval`` with the instructions' paths as
    clusters), the number of instructions and of human paths."""
    if get_graph is None:
        from app.kinds.navigation.environments import get_graph
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    listened = select(AgentOutput.item_id).where(AgentOutput.study_id == study.id)
    followed = select(Annotation.item_id).where(valid)
    conn = session.connection()
    # Only the path fields are read (never the traces), for items both people and a
    # listener followed.
    humans: dict[int, list[list[str]]] = defaultdict(list)
    for item_id, path in conn.execute(
        select(Annotation.item_id, Annotation.response["path"])
        .where(valid, Annotation.item_id.in_(listened))
        .order_by(Annotation.id)
    ):
        if path:
            humans[item_id].append(path)
    if not humans:
        return []
    outputs = conn.execute(
        select(AgentOutput.agent_id, AgentOutput.item_id, AgentOutput.response["path"])
        .where(AgentOutput.study_id == study.id, AgentOutput.item_id.in_(followed))
        .order_by(AgentOutput.id)
    ).all()
    items = {
        i: (cat, scan, cluster or f"item {i}")
        for i, cat, scan, cluster in conn.execute(
            select(Item.id, Item.category, Item.payload["scan"].as_string(), Item.cluster).where(
                Item.id.in_(list(humans))
            )
        )
    }
    agents = {
        a.id: f"{a.name} v{a.version}"
        for a in session.scalars(select(Agent).where(Agent.id.in_({o[0] for o in outputs})))
    }

    graphs: dict[str, NavGraph] = {}  # one lookup per building
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    paths: dict[tuple[str, int], list[str]] = defaultdict(list)
    n_paths: dict[tuple[str, int], int] = defaultdict(int)
    for agent_id, item_id, listener_path in outputs:
        if not listener_path or item_id not in humans:
            continue
        cat, scan, cluster = items[item_id]
        if scan not in graphs:
            graphs[scan] = get_graph(scan)
        values[cat, agent_id].append(instruction_agreement(graphs[scan], humans[item_id], listener_path))
        paths[cat, agent_id].append(cluster)
        n_paths[cat, agent_id] += len(humans[item_id])

    baseline = str((study.kind_settings or {}).get("baseline", "human"))
    rows = []
    for cat, agent_id in sorted(values, key=lambda k: (k[0] != baseline, k[0], agents[k[1]])):
        v = values[cat, agent_id]
        rows.append(
            {
                "category": cat,
                "listener": agents[agent_id],
                "agreement": stats.mean_interval([min(1.0, max(0.0, x)) for x in v], paths[cat, agent_id]).as_dict(),
                "instructions": len(v),
                "human_paths": n_paths[cat, agent_id],
            }
        )
    return rows


def agreement_table(session: Session, study: Study) -> dict | None:
    """The leaderboard table, or None when no listener and person followed one instruction."""
    rows = agreement_rows(session, study)
    if not rows:
        return None
    return {
        "key": "navigation_agreement",
        "title": "Listener agreement with human followers (nDTW, 0-1)",
        "note": (
            "Per speaker and model listener: the mean over instructions of nDTW between each "
            "human path and the listener's path for the same instruction (human path as the "
            "reference; an instruction's human paths are averaged first). Unit resampled: the "
            "path; 95% interval by Wilson at the effective number of paths with Student's t "
            "(on the cluster-robust variance). Valid human annotations only."
        ),
        "columns": [
            {"key": "category", "label": "Speaker", "help": "Who wrote the instructions."},
            {
                "key": "listener",
                "label": "Listener",
                "help": "The model listener (agent and version) that followed them.",
            },
            {
                "key": "agreement",
                "label": "Agreement (nDTW)",
                "help": "Mean over instructions of the nDTW (0-1, 1 = the same path) between the listener's "
                "path and the people's, with a 95% interval resampling paths.",
            },
            {
                "key": "instructions",
                "label": "Instructions",
                "help": "Instructions both the listener and at least one person followed.",
            },
            {
                "key": "human_paths",
                "label": "Human paths",
                "help": "People's valid paths on those instructions the listener is compared with.",
            },
        ],
        "rows": rows,
    }


# -- agreement between the human followers ----------------------------------------------------

#: Fewer instructions with two or more valid ratings than this: alpha is "too few".
MIN_PAIRABLE = 5
ALPHA_BOOT = 1000


def _level(v) -> float | None:
    """A stored rating, Likert level or success as a number (booleans as 0/1); None otherwise."""
    if v is None or isinstance(v, str):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x and abs(x) != float("inf") else None


def rated_questions(study: Study) -> list[tuple[str, str, str]]:
    """(key, question, level) of every rated question of a navigation study: the ease rating and
    each of the study's Likert questions (ordinal: ordered levels), then success (nominal)."""
    out = [("rating", "Rating: how easy the instruction was to follow (1-4)", "ordinal")]
    for it in (study.kind_settings or {}).get("likert") or []:
        out.append((f"likert.{it['key']}", f"{it['key']}: {it['question']} (1-{len(it['labels'])})", "ordinal"))
    out.append(("success", "Success: the follower stopped within 3 m of the goal (yes/no)", "nominal"))
    return out


def follower_ratings(session: Session, study: Study) -> dict[str, dict[int, list[float]]]:
    """question key -> instruction -> its valid followers' values (not gold, not excluded)."""
    questions = rated_questions(study)
    cols = []
    for key, _, _ in questions:
        if key == "success":
            cols.append(Annotation.scores["success"])
        elif key == "rating":
            cols.append(Annotation.response["rating"])
        else:
            cols.append(Annotation.response[("likert", key.split(".", 1)[1])])
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    out: dict[str, dict[int, list[float]]] = {key: defaultdict(list) for key, _, _ in questions}
    for item_id, *values in session.connection().execute(
        select(Annotation.item_id, *cols).where(valid).order_by(Annotation.id)
    ):
        for (key, _, _), v in zip(questions, values):
            if (x := _level(v)) is not None:
                out[key][item_id].append(x)
    return out


def followers_agreement_rows(session: Session, study: Study) -> list[dict]:
    """One row per rated question: Krippendorff's alpha at the question's level over the
    instructions with two or more valid ratings, with a 95% bootstrap interval that draws their
    paths (``stats.krippendorff_alpha`` with clusters, 1000 resamples, seed 0)."""
    ratings = follower_ratings(session, study)
    # The path is the kind's unit: its instructions' ratings are drawn together.
    path_of = dict(session.execute(select(Item.id, Item.cluster).where(Item.study_id == study.id)).all())
    rows = []
    for key, question, level in rated_questions(study):
        pairable = [(item_id, v) for item_id, v in ratings[key].items() if len(v) >= 2]
        units = [Counter(v) for _, v in pairable]
        paths = [path_of.get(item_id) or f"item:{item_id}" for item_id, _ in pairable]
        row = {"question": question, "level": level, "instructions": len(units), "alpha": None, "remark": ""}
        if len(units) < MIN_PAIRABLE:
            row["remark"] = (
                f"too few: {len(units)} instruction{'' if len(units) == 1 else 's'} with two or "
                f"more valid ratings ({MIN_PAIRABLE} needed)"
            )
        else:
            est = stats.krippendorff_alpha(units, level=level, n_boot=ALPHA_BOOT, seed=0, clusters=paths)
            if math.isnan(est.mean):
                row["remark"] = "undefined: every rating has the same value, so no disagreement is expected"
            elif math.isnan(est.low):
                row["remark"] = f"alpha {est.mean:.3f}; no interval (every resample had one value only)"
            else:
                row["alpha"] = est.as_dict()
        rows.append(row)
    return rows


def followers_agreement_table(session: Session, study: Study) -> dict:
    """The table "Agreement between followers" (the leaderboard section shows it once a study
    has valid annotations)."""
    rows = followers_agreement_rows(session, study)
    return {
        "key": "navigation_followers_agreement",
        "title": "Agreement between followers (Krippendorff's alpha, -1 to 1)",
        "note": (
            "Per rated question, Krippendorff's alpha at the question's level of measurement "
            "(the ease rating and the Likert questions ordinal, success nominal; the "
            "krippendorff package) over the instructions with two or more valid ratings (gold "
            "and excluded annotations left out), with a 95% percentile bootstrap interval over "
            "those instructions (1000 resamples, an instruction drawn with the other instructions of its "
            "path). Unit resampled: the path. 1 = perfect "
            f"agreement, 0 = chance; under {MIN_PAIRABLE} such instructions: too few."
        ),
        "columns": [
            {"key": "question", "label": "Question", "help": "The rated question, with its scale."},
            {
                "key": "level",
                "label": "Level",
                "help": "The level of measurement alpha treats the answers at: ordinal (ordered) or nominal.",
            },
            {
                "key": "alpha",
                "label": "Alpha [95%]",
                "help": "Krippendorff's alpha (-1 to 1; 1 = perfect agreement, 0 = chance), with a 95% "
                "percentile bootstrap interval resampling paths.",
            },
            {
                "key": "instructions",
                "label": "Instructions with 2+ ratings",
                "help": f"Instructions two or more followers rated: the units alpha is over ({MIN_PAIRABLE} needed).",
            },
            {"key": "remark", "label": "Remark", "help": "Why alpha or its interval is missing, when it is."},
        ],
        "rows": rows,
    }
