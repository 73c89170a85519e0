"""The navigation leaderboard section: per speaker (Item.category, "human" for the reference
instructions), the followers' metrics with 95% intervals, the mean interpretability rating, a
rank interval by SR, paired comparisons of each speaker against a baseline speaker over the
paths both have, and the followers' agreement (Krippendorff's alpha).

The unit of replication is the path (Item.cluster), not the annotation: an instruction's value
is the mean over its followers, a speaker's is the mean over its instructions, and the interval
treats the instructions of one path as one cluster (DESIGN.md section 7), so a second follower
of an instruction, or a second instruction of a path, never narrows it as an independent unit
would:

- SR, SPL, nDTW, SDTW (scores in [0, 1]): ``stats.mean_interval(instruction means,
  clusters=paths)`` (Wilson at the effective number of paths, with Student's t);
- the rating (levels 1-4): the same on ``(level - 1) / 3``, mapped back to levels;
- NE and path length (metres, unbounded): ``stats.mean_interval_unbounded`` (Student's t on the
  cluster-robust variance of the mean, G - 1 df).

Only valid human annotations count (not gold, not excluded). One row per annotation is read,
with just the needed JSON fields (never the response's path or trace): navigation studies are
small (hundreds to a few thousand annotations).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.kinds.navigation.agreement import agreement_table, followers_agreement_table
from app.kinds.navigation.judge import judge_table
from app.kinds.navigation.likert import leaderboard_table as likert_table
from app.kinds.navigation.likert import level_estimate
from app.leaderboards import stats
from app.leaderboards.rows import (
    D_Z_HELP,
    effect_size_cell,
    holm_rows,
    rank_cells,
    rank_interval_column,
    too_few_for_a_test,
    too_few_ranks,
    with_units,
)
from app.studies.models import Annotation, Item, Study

# (key in Annotation.scores, label): the order of the table's columns. The label names the
# metric in the paired table (with its unit where it has one); UNITS adds the scale in the
# metrics table's column titles.
METRICS = (
    ("success", "SR"),
    ("spl", "SPL"),
    ("ndtw", "nDTW"),
    ("sdtw", "SDTW"),
    ("ne", "NE (m)"),
    ("path_length", "Path length (m)"),
)
RATING = ("rating", "Rating (1-4)")
RATING_LEVELS = 4
COLUMN_LABELS = {
    "success": "SR (share, 0-1)",
    "spl": "SPL (0-1)",
    "ndtw": "nDTW (0-1)",
    "sdtw": "SDTW (0-1)",
    "ne": "NE (m)",
    "path_length": "Path length (m)",
    "rating": "Rating (levels 1-4)",
}
# Each column's help (one sentence, shown on the page: app/kinds/base.py). The unit resampled
# for every interval is the path.
_PER_SPEAKER = (
    " Mean over the speaker's instructions (each the mean over its followers), with a 95% interval "
    "whose unit is the path."
)
COLUMN_HELP = {
    "success": "Success rate: share (0-1) of followers who stopped within 3 m of the goal (interval: Wilson's at "
    "the effective number of paths)." + _PER_SPEAKER,
    "spl": "Success weighted by path length (0-1): success times shortest length / max(walked, shortest)."
    + _PER_SPEAKER,
    "ndtw": "Normalised dynamic time warping (0-1): how closely the walked path follows the reference path."
    + _PER_SPEAKER,
    "sdtw": "Success-weighted nDTW (0-1): nDTW on successes, 0 on failures." + _PER_SPEAKER,
    "ne": "Navigation error in metres: distance from where the follower stopped to the goal (t interval)."
    + _PER_SPEAKER,
    "path_length": "Metres the follower walked (t interval)." + _PER_SPEAKER,
    "rating": "The followers' rating of how easy the instruction was to follow (1-4, 4 easiest)." + _PER_SPEAKER,
}
BOUNDED = frozenset({"success", "spl", "ndtw", "sdtw"})  # scores in [0, 1]
UNBOUNDED = frozenset({"ne", "path_length"})  # metres
# The metric the speakers are ranked by.
RANK_BY = "success"


def _number(v) -> float | None:
    if v is None or isinstance(v, str):
        return None
    x = float(v)  # booleans (success) become 0.0 / 1.0
    return x if math.isfinite(x) else None


def _clean(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def annotation_values(session: Session, study: Study) -> list[tuple[int, str, str, dict[str, float]]]:
    """(item id, category, cluster, {metric: value, "rating": value}) per valid annotation."""
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    cols = [Annotation.scores[key] for key, _ in METRICS] + [Annotation.response["rating"]]
    names = [key for key, _ in METRICS] + ["rating"]
    out = []
    for item_id, cat, cluster, *values in session.connection().execute(
        select(Annotation.item_id, Item.category, Item.cluster, *cols)
        .join(Item, Item.id == Annotation.item_id)
        .where(valid)
        .order_by(Annotation.id)
    ):
        vals = {n: x for n, v in zip(names, values) if (x := _number(v)) is not None}
        out.append((item_id, cat, cluster, vals))
    return out


def instruction_estimate(key: str, per_item: list[list[float]], clusters: Sequence[Hashable] | None = None) -> dict:
    """A speaker's value on one column from its instructions' followers' values (one list per
    instruction, ``clusters`` the instructions' paths in the same order): the mean over
    instructions of each instruction's mean, with a 95% interval whose unit is the path.
    SR, SPL, nDTW, SDTW: ``stats.mean_interval``; the rating: the same on (level - 1) / 3,
    mapped back; NE and path length: ``stats.mean_interval_unbounded``. Without ``clusters``
    each instruction is its own unit. `n` is the number of instructions."""
    pairs = [(sum(v) / len(v), c) for v, c in zip(per_item, clusters or [None] * len(per_item)) if v]
    means = [m for m, _ in pairs]
    labels = None if clusters is None else [c for _, c in pairs]
    if key in BOUNDED:
        got = stats.mean_interval([min(1.0, max(0.0, m)) for m in means], labels).as_dict()
    elif key == RATING[0]:
        got = level_estimate(means, labels, RATING_LEVELS)
    else:
        got = stats.mean_interval_unbounded(means, labels).as_dict()
    # Its n: the instructions; its units: the paths the interval resamples ("too few" counts them).
    return got if labels is None else with_units(got, labels, "path")


def _path_of(item_id: int, cluster: str | None) -> str:
    """The unit an instruction belongs to: its path, or the instruction itself without one."""
    return cluster if cluster else f"item {item_id}"


def rank_column(
    per_path: dict[str, dict[str, list[float]]], cats: list[str]
) -> tuple[dict[str, Any], int, list[list[str]]]:
    """Rank labels by SR over the paths every speaker has (each speaker's value on a path: the
    mean over its instructions there of each instruction's mean over its followers), 95% bootstrap rank intervals over paths
    (``stats.rank_intervals``, 1000 resamples, seed 0): "1" for a settled rank, "1-2" where
    intervals overlap. Returns (labels, number of shared paths, tied groups of 2+)."""
    shared = sorted(set.intersection(*(set(per_path[c]) for c in cats))) if cats else []
    if len(cats) < 2:
        return {c: None for c in cats}, len(shared), []
    scores = {c: [sum(per_path[c][p]) / len(per_path[c][p]) for p in shared] for c in cats}
    if len(shared) < stats.MIN_RANK_UNITS:  # "—" with the reason, as in every kind (rows.rank_cells)
        return dict(rank_cells(scores, "path")), len(shared), []
    intervals = stats.rank_intervals(scores, n_boot=1000, seed=0)
    ties = [g for g in stats.tied_groups(intervals) if len(g) > 1]
    return {c: stats.rank_label(intervals[c]) for c in cats}, len(shared), ties


def section(session: Session, study: Study) -> dict | None:
    rows = annotation_values(session, study)
    if not rows:
        return None
    keys = [k for k, _ in METRICS] + [RATING[0]]
    # category -> metric -> item -> values (the instructions' means and their interval)
    by_item: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    counts: dict[str, int] = defaultdict(int)
    items: dict[str, set[int]] = defaultdict(set)
    path_of: dict[int, str] = {}
    cluster_of: dict[int, str] = {}
    for item_id, cat, cluster, vals in rows:
        counts[cat] += 1
        items[cat].add(item_id)
        path_of[item_id] = _path_of(item_id, cluster)
        cluster_of[item_id] = cluster
        for k, v in vals.items():
            by_item[cat][k][item_id].append(v)
    # category -> metric -> path -> its instructions' means (for the ranks and the paired
    # tests): each instruction once, as in the columns, however many followed it.
    by_path: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for cat, per_metric in by_item.items():
        for k, per in per_metric.items():
            for item_id, values in per.items():
                if cluster_of[item_id]:
                    by_path[cat][k][cluster_of[item_id]].append(sum(values) / len(values))
    baseline = str((study.kind_settings or {}).get("baseline", "human"))
    # The baseline first, then the speakers by name.
    cats = sorted(counts, key=lambda c: (c != baseline, c))
    ranks, n_shared, ties = rank_column({c: by_path[c][RANK_BY] for c in cats}, cats)

    metric_rows = []
    for cat in cats:
        row: dict = {"category": cat, "items": len(items[cat]), "n": counts[cat], "rank": ranks[cat]}
        for k in keys:
            per = by_item[cat][k]
            row[k] = instruction_estimate(k, list(per.values()), [path_of[i] for i in per])
        metric_rows.append(row)

    paired_rows = []
    if baseline in counts:
        for k, label in (*METRICS, RATING):
            block = []
            for cat in cats:
                if cat == baseline:
                    continue
                mine, base = by_path[cat][k], by_path[baseline][k]
                shared = sorted(set(mine) & set(base))
                a = [sum(mine[c]) / len(mine[c]) for c in shared]
                b = [sum(base[c]) / len(base[c]) for c in shared]
                t = stats.paired_t_test(a, b)
                effect = stats.paired_effect(a, b)
                few = too_few_for_a_test(len(shared))  # no interval: no d_z, t or p either
                block.append(
                    {
                        "category": cat,
                        "metric": label,
                        "difference": effect["difference"].as_dict(),
                        "cohen_dz": few or effect_size_cell(effect["cohen_dz"], len(shared)),
                        "mean_diff": _clean(t["mean_diff"]),
                        "t": few or _clean(t["t"]),
                        "p": few or _clean(t["p"]),
                        "n_paths": t["n"],
                    }
                )
            holm_rows(block)
            paired_rows.extend(block)
        order = {c: i for i, c in enumerate(cats)}
        metric_order = {label: i for i, (_, label) in enumerate((*METRICS, RATING))}
        paired_rows.sort(key=lambda r: (order[r["category"]], metric_order[r["metric"]]))

    rank_note = (
        f"Rank (95%): speakers ranked by SR over the {n_shared} paths every speaker has "
        "(a speaker's SR on a path: the mean of its instructions' SR there), with 95% rank "
        'intervals from 1000 bootstrap resamples of those paths; "1-2" where intervals '
        "overlap."
    )
    if ties:
        rank_note += " Tied (rank intervals overlap): " + "; ".join(", ".join(g) for g in ties) + "."
    if n_shared < stats.MIN_RANK_UNITS or len(cats) < 2:
        rank_note = (
            'Rank (95%): "—", no ranking ('
            + ("one speaker" if len(cats) < 2 else too_few_ranks(n_shared, "path"))
            + ")."
        )
    # SPL is SR scaled by shortest / walked length on successes: where every successful follower
    # walked the shortest path the two columns are the same numbers; say so.
    same = metric_rows and all(
        (r["spl"] or {}).get("mean") is not None and (r["success"] or {}).get("mean") == (r["spl"] or {}).get("mean")
        for r in metric_rows
    )
    if same:
        rank_note += (
            " SPL equals SR in every row here: every successful follower walked a path no longer than the shortest one."
        )
    tables = [
        {
            "key": "navigation_metrics",
            "title": "Followers' metrics per speaker: SR, SPL, nDTW, SDTW (0-1), NE and path length (m), rating (1-4)",
            "note": (
                "SR: success rate (the follower stopped within 3 m of the goal); SPL: success weighted by "
                "path length; nDTW: normalised dynamic time warping, how closely the path follows the "
                "reference; SDTW: nDTW counted on successes only; NE: navigation error, metres from the goal. "
                "Valid human annotations (gold and excluded ones left out). Per instruction, the mean "
                "over its followers; per speaker, the mean over its instructions (each counts once). "
                "Unit resampled: the path (an instruction's path is its cluster), so several "
                "followers of one instruction never narrow an interval. 95% intervals: SR, SPL, nDTW, "
                "SDTW by Wilson at the effective number of paths with Student's t; the rating the same on (level - 1) / 3, mapped back; NE and "
                "path length (metres) by Student's t on the cluster-robust variance of the mean "
                "(G - 1 df). Rating: how easy the instruction was to follow. " + rank_note
            ),
            "columns": [
                {
                    "key": "category",
                    "label": "Speaker",
                    "help": 'Who wrote the instructions ("human": the dataset\'s reference instructions).',
                },
                rank_interval_column("SR", "the shared paths"),
                {"key": "items", "label": "Instructions", "help": "The speaker's instructions with a valid follow."},
                {"key": "n", "label": "Annotations", "help": "Valid follows (one follower walking one instruction)."},
            ]
            + [{"key": k, "label": COLUMN_LABELS[k], "help": COLUMN_HELP[k]} for k in keys],
            "rows": metric_rows,
        }
    ]
    if paired_rows:
        tables.append(
            {
                "key": "navigation_paired",
                "title": f"Paired differences against {baseline} (speaker − {baseline}, in each metric's unit)",
                "note": (
                    "Per metric: each speaker's value on a path is the mean of its instructions' values "
                    "there (each the mean over its followers), then over the "
                    f"paths both the speaker and {baseline} have (unit: the path; difference = "
                    f"speaker − {baseline}, in the metric's unit: SR, SPL, nDTW, SDTW in 0-1, NE and "
                    "path length in metres, rating in levels). The difference's 95% interval: "
                    "Bonett-Price's adjusted Wald interval when both are 0/1 on every path, else t "
                    "on the paired differences; Cohen's d_z = mean / sd of the differences; t and p: "
                    "the two-sided paired t-test; p (Holm): Holm-adjusted across the speakers "
                    f"compared with {baseline} on the same metric."
                ),
                "columns": [
                    {"key": "category", "label": "Speaker", "help": f"The speaker compared with {baseline}."},
                    {
                        "key": "metric",
                        "label": "Metric (unit)",
                        "help": "The metric compared (SR, SPL, nDTW, SDTW 0-1; NE, path length metres; rating 1-4).",
                    },
                    {
                        "key": "difference",
                        "label": "Mean difference (metric's unit) [95%]",
                        "help": f"Mean over shared paths of the speaker's value minus {baseline}'s, with a 95% "
                        "interval (t on the paired differences; Bonett-Price for 0/1).",
                    },
                    {"key": "cohen_dz", "label": "Cohen's d_z", "help": D_Z_HELP},
                    {
                        "key": "t",
                        "label": "t",
                        "help": "The paired t statistic (mean difference / its standard error).",
                    },
                    {"key": "p", "label": "p", "help": "Two-sided paired t-test p over the shared paths."},
                    {
                        "key": "p_holm",
                        "label": "p (Holm)",
                        "help": f"p adjusted by Holm across the speakers compared with {baseline} on this metric.",
                    },
                    {"key": "n_paths", "label": "Paths", "help": "Paths both have: the paired units."},
                ],
                "rows": paired_rows,
            }
        )
    # The listener ensemble as an automatic judge beside people (issue 28), where a run had one.
    if (ppi := judge_table(session, study, {c: by_item[c]["success"] for c in cats})) is not None:
        tables.append(ppi)
    tables.append(followers_agreement_table(session, study))
    agreement = agreement_table(session, study)  # when model listeners' paths are imported
    if agreement is not None:
        tables.append(agreement)
    # The capability analysis (section 4.3), only when the study has capability items.
    from app.kinds.navigation.capability import tables as capability_tables

    tables.extend(capability_tables(session, study))
    # The study's own Likert questions (app.kinds.navigation.likert), when it has any.
    if (likert := likert_table(session, study)) is not None:
        tables.append(likert)
    return {"tables": tables}


# --- side by side (pairs.py) -------------------------------------------------------------------


def single_study(session: Session, study: Study, speakers: set[str]) -> Study | None:
    """The newest following study of the same owner whose speakers include at least two of a
    pair study's: its SR ranking is shown beside the pairwise one."""
    from app.leaderboards.side_by_side import single_study as newest

    def shares_speakers(other: Study) -> bool:
        theirs = set(session.scalars(select(Item.category).where(Item.study_id == other.id).distinct()))
        return len(theirs & speakers) >= 2

    return newest(session, study, shares_speakers)


def speaker_success(session: Session, study: Study) -> dict[str, dict]:
    """Per speaker of a following study: its SR estimate (the metrics table's column) and its
    rank cell (the metrics table's rank)."""
    per_item: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    per_path: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    path_of: dict[int, str] = {}
    for item_id, cat, cluster, vals in annotation_values(session, study):
        path_of[item_id] = _path_of(item_id, cluster)
        if RANK_BY in vals:
            per_item[cat][item_id].append(vals[RANK_BY])
    for cat, per in per_item.items():
        for item_id, values in per.items():
            per_path[cat][path_of[item_id]].append(sum(values) / len(values))
    cats = sorted(per_item)
    ranks, _, _ = rank_column(per_path, cats)
    return {
        c: {
            "rank": ranks[c],
            "value": instruction_estimate(RANK_BY, list(per_item[c].values()), [path_of[i] for i in per_item[c]]),
        }
        for c in cats
    }


FOLLOWED = (("success", "SR"), ("ndtw", "nDTW"), ("spl", "SPL"))


def followed_table(session: Session, study: Study) -> dict | None:
    """A pair study judged by following (pairs.py, option `follow`): per speaker, how its
    instructions did when the judges followed them before picking, each side scored against
    the route as a single follow is. A speaker's value on a path is the mean over the follows
    of its instruction there; the interval's unit is the path, as in the metrics table, and the
    rank is by SR over the paths every speaker has."""
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    # speaker -> metric -> path -> values (one per follow)
    per: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    follows: dict[str, int] = defaultdict(int)
    for reference, scores in session.execute(
        select(Item.reference, Annotation.scores)
        .join(Item, Item.id == Annotation.item_id)
        .where(valid)
        .order_by(Annotation.id)
    ):
        reference, scores = reference or {}, scores or {}
        for side in ("a", "b"):
            got = scores.get(side)
            if not isinstance(got, dict) or side not in reference:
                continue
            speaker, path = str(reference[side]["agent"]), str(reference["path"])
            follows[speaker] += 1
            for key, _ in FOLLOWED:
                if (x := _number(got.get(key))) is not None:
                    per[speaker][key][path].append(x)
    if not follows:
        return None
    cats = sorted(follows)
    ranks, n_shared, _ = rank_column({c: per[c][RANK_BY] for c in cats}, cats)
    rows = []
    for c in cats:
        row: dict[str, Any] = {"agent": c, "follows": follows[c], "rank": ranks[c]}
        for key, _ in FOLLOWED:
            paths = sorted(per[c][key])
            row[key] = instruction_estimate(key, [per[c][key][p] for p in paths], paths)
        rows.append(row)
    return {
        "key": "navigation_pair_followed",
        "title": "Followed success per speaker: the judges' own walks before they picked (SR, nDTW, SPL)",
        "note": (
            "Each judge followed both instructions of a pair in the building, in an order drawn per task, before "
            "picking; each walk is scored against the path's route as a single follow is (success: stopped within "
            "3 m of the goal). A speaker's value is the mean over its paths of the mean over that path's follows, "
            f"with a 95% interval whose unit is the path; rank by SR over the {n_shared} paths every speaker has. "
            "Reference pairs are left out."
        ),
        "columns": [
            {"key": "agent", "label": "Speaker", "help": "The speaker whose instructions the judges followed."},
            {
                "key": "follows",
                "label": "Follows",
                "help": "Walks (count) the judges took on the speaker's instructions.",
            },
            {
                "key": "rank",
                "label": "Rank by SR (95%)",
                "help": "Rank by followed SR as a 95% interval over 1000 bootstrap resamples of the shared paths.",
            },
            *(
                {
                    "key": key,
                    "label": COLUMN_LABELS[key],
                    "help": COLUMN_HELP[key].split(_PER_SPEAKER)[0]
                    + " Mean over the speaker's paths (each the mean over its follows), with a 95% interval whose unit is the path.",
                }
                for key, _ in FOLLOWED
            ),
        ],
        "rows": rows,
    }


def pair_section(session: Session, study: Study) -> dict | None:
    """A side-by-side study's tables (app/leaderboards/side_by_side.py), with the SR of the
    newest following study of the same speakers beside them."""
    from app.kinds.navigation.pairs import PAIRING
    from app.leaderboards.side_by_side import SingleRanking, section

    speakers = {
        str(side["agent"])
        for ref in session.scalars(select(Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False)))
        for side in ((ref or {}).get("a") or {}, (ref or {}).get("b") or {})
        if side
    }
    single = single_study(session, study, speakers)
    beside = None
    if single is not None and (rows := speaker_success(session, single)):
        beside = SingleRanking(
            study_id=single.id,
            measure="SR",
            key="single_sr",
            label="Single SR",
            help=f"Success rate (0-1) of followers of the speaker's instructions in study {single.id}, with a "
            "95% interval resampling paths.",
            rows=rows,
        )
    out = section(session, study, PAIRING, beside)
    # Followed side by side: the walks' success per speaker after the ratings.
    if out is not None and (followed := followed_table(session, study)) is not None:
        out["tables"].insert(1, followed)
    return out
