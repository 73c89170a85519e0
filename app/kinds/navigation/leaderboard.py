"""The navigation leaderboard section: per speaker (Item.category, "human" for the reference
instructions), the followers' metrics with 95% intervals over instructions, the mean
interpretability rating, and paired t-tests of each speaker against a baseline speaker over the
paths both have.

The unit is the instruction (the item), not the annotation: an instruction's value is the mean
over its followers, a speaker's is the mean over its instructions, and the interval resamples
instructions (DESIGN.md section 7), so a second follower of an instruction never narrows it.

Only valid human annotations count (not gold, not excluded). One row per annotation is read,
with just the needed JSON fields (never the response's path or trace): navigation studies are
small (hundreds to a few thousand annotations).
"""

from __future__ import annotations

import math
from collections import defaultdict

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.kinds.navigation.agreement import agreement_table
from app.leaderboards import stats
from app.studies.models import Annotation, Item, Study

# (key in Annotation.scores, column label); the order of the table's columns.
METRICS = (("success", "SR"), ("spl", "SPL"), ("ndtw", "nDTW"), ("sdtw", "SDTW"),
           ("ne", "NE (m)"), ("path_length", "Path length (m)"))
RATING = ("rating", "Rating (1-4)")


def _number(v) -> float | None:
    if v is None or isinstance(v, str):
        return None
    x = float(v)  # booleans (success) become 0.0 / 1.0
    return x if math.isfinite(x) else None


def _clean(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def annotation_values(session: Session, study: Study) -> list[tuple[int, str, str, dict[str, float]]]:
    """(item id, category, cluster, {metric: value, "rating": value}) per valid annotation."""
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False),
                 Annotation.excluded.is_(False))
    cols = [Annotation.scores[key] for key, _ in METRICS] + [Annotation.response["rating"]]
    names = [key for key, _ in METRICS] + ["rating"]
    out = []
    for item_id, cat, cluster, *values in session.connection().execute(
            select(Annotation.item_id, Item.category, Item.cluster, *cols)
            .join(Item, Item.id == Annotation.item_id).where(valid).order_by(Annotation.id)):
        vals = {n: x for n, v in zip(names, values) if (x := _number(v)) is not None}
        out.append((item_id, cat, cluster, vals))
    return out


def instruction_estimate(key: str, per_item: list[list[float]]) -> dict:
    """A speaker's value on one column from its instructions' followers' values (one list per
    instruction): the mean over instructions of each instruction's mean, with a 95% interval
    over instructions. SR gets a Wilson interval when every instruction's SR is 0 or 1 (one
    follower each, or followers who agree): then each instruction is one success or failure.
    Otherwise a percentile bootstrap of the instructions' means (2000 resamples, seed 0), which
    is the cluster bootstrap by instruction of this mean. `n` is the number of instructions.
    The means are sorted first, so the result does not depend on the order they come in."""
    means = sorted(sum(v) / len(v) for v in per_item if v)
    if key == "success" and all(m in (0.0, 1.0) for m in means):
        return stats.proportion(int(sum(means)), len(means)).as_dict()
    return stats.bootstrap_mean_interval(means).as_dict()


def section(session: Session, study: Study) -> dict | None:
    rows = annotation_values(session, study)
    if not rows:
        return None
    keys = [k for k, _ in METRICS] + [RATING[0]]
    # category -> metric -> item -> values (the instructions' means and their interval)
    by_item: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    # category -> metric -> cluster -> values (for the per-path means of the paired tests)
    by_path: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    counts: dict[str, int] = defaultdict(int)
    items: dict[str, set[int]] = defaultdict(set)
    for item_id, cat, cluster, vals in rows:
        counts[cat] += 1
        items[cat].add(item_id)
        for k, v in vals.items():
            by_item[cat][k][item_id].append(v)
            if cluster:
                by_path[cat][k][cluster].append(v)
    baseline = str((study.kind_settings or {}).get("baseline", "human"))
    # The baseline first, then the speakers by name.
    cats = sorted(counts, key=lambda c: (c != baseline, c))

    metric_rows = []
    for cat in cats:
        row: dict = {"category": cat, "items": len(items[cat]), "n": counts[cat]}
        for k in keys:
            row[k] = instruction_estimate(k, list(by_item[cat][k].values()))
        metric_rows.append(row)

    paired_rows = []
    if baseline in counts:
        for cat in cats:
            if cat == baseline:
                continue
            for k, label in (*METRICS, RATING):
                mine, base = by_path[cat][k], by_path[baseline][k]
                shared = sorted(set(mine) & set(base))
                a = [sum(mine[c]) / len(mine[c]) for c in shared]
                b = [sum(base[c]) / len(base[c]) for c in shared]
                t = stats.paired_t_test(a, b)
                paired_rows.append({"category": cat, "metric": label,
                                    "mean_diff": _clean(t["mean_diff"]), "t": _clean(t["t"]),
                                    "p": _clean(t["p"]), "n_paths": t["n"]})

    tables = [{
        "key": "navigation_metrics",
        "title": "Followers' metrics per speaker",
        "note": ("Valid human annotations (gold and excluded ones left out). Per instruction, the mean "
                 "over its followers; per speaker, the mean over its instructions (each counts once) "
                 "with a 95% interval over instructions, so several followers of one instruction do "
                 "not narrow it: SR has a Wilson interval when every instruction's SR is 0 or 1 (one "
                 "follower each, or followers who agree), else, like the other columns, a percentile "
                 "bootstrap of the instructions' means (2000 resamples). SR, SPL, nDTW, SDTW in [0, 1]; "
                 "NE and path length in metres; rating: how easy the instruction was to follow."),
        "columns": [{"key": "category", "label": "Speaker"}, {"key": "items", "label": "Instructions"},
                    {"key": "n", "label": "Annotations"}]
                   + [{"key": k, "label": label} for k, label in (*METRICS, RATING)],
        "rows": metric_rows,
    }]
    if paired_rows:
        tables.append({
            "key": "navigation_paired",
            "title": f"Paired t-tests against {baseline}",
            "note": ("Per metric: the mean over a path's annotations for each speaker, then a "
                     f"two-sided paired t-test over the paths both the speaker and {baseline} have "
                     f"(difference = speaker - {baseline})."),
            "columns": [{"key": "category", "label": "Speaker"}, {"key": "metric", "label": "Metric"},
                        {"key": "mean_diff", "label": "Mean difference"}, {"key": "t", "label": "t"},
                        {"key": "p", "label": "p"}, {"key": "n_paths", "label": "Paths"}],
            "rows": paired_rows,
        })
    agreement = agreement_table(session, study)  # when model listeners' paths are imported
    if agreement is not None:
        tables.append(agreement)
    # The capability analysis (section 4.3), only when the study has capability items.
    from app.kinds.navigation.capability import tables as capability_tables

    tables.extend(capability_tables(session, study))
    # The study's own Likert questions (app.kinds.navigation.likert), when it has any.
    from app.kinds.navigation.likert import leaderboard_table as likert_table

    if (likert := likert_table(session, study)) is not None:
        tables.append(likert)
    return {"tables": tables}
