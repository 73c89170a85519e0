"""A navigation study's own Likert questions, asked after Stop beside the 4-level rating, and
the study settings the new-study form sets for the kind (docs/kinds/navigation.md).

Items live in `Study.kind_settings["likert"]` as `[{"key", "question", "labels": [...]}]`;
an answer is the level 1..len(labels) (1 = the first label). The form writes one item per line:

    clarity | How clear was the wording? | Unclear; Somewhat; Very clear
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Sequence

from app import jsonsafe
from app.errors import InputError
from app.leaderboards import stats

MAX_ITEMS = 5
MIN_LEVELS, MAX_LEVELS = 2, 7
MAX_QUESTION, MAX_LABEL = 300, 80
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
RESERVED = {"rating", "path", "trace", "events", "likert", "category", "n"}  # response and table keys


def _item(key, question, labels, where: str, line: int | None) -> dict:
    def bad(msg: str):
        return InputError(f"{where}{msg}", line=line, field="likert")

    if not isinstance(key, str) or not _KEY.match(key.strip()):
        raise bad(f"the key {key!r} must be 1-32 lower-case letters, digits or '_', starting with a letter")
    key = key.strip()
    if key in RESERVED:
        raise bad(f"the key {key!r} is taken by the response itself; choose another")
    if not isinstance(question, str) or not question.strip() or len(question.strip()) > MAX_QUESTION:
        raise bad(f"the question must be 1-{MAX_QUESTION} characters")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise bad("the labels must be a list of texts")
    labels = [x.strip() for x in labels]
    if not MIN_LEVELS <= len(labels) <= MAX_LEVELS:
        plural = "" if len(labels) == 1 else "s"
        raise bad(
            f"{len(labels)} label{plural}; a question needs {MIN_LEVELS} to {MAX_LEVELS} (separate them with ';')"
        )
    for x in labels:
        if not x or len(x) > MAX_LABEL:
            raise bad(f"every label must be 1-{MAX_LABEL} characters")
    if len(set(labels)) != len(labels):
        raise bad("two labels are the same")
    return {"key": key, "question": question.strip(), "labels": labels}


def parse_items(value) -> list[dict]:
    """Likert items from the form's text (one `key | question | label; label; ...` per line;
    blank lines and lines starting with # are skipped), a JSON array of that text's objects, or
    the list itself. InputError (field likert) names the line or item."""
    if value is None:
        return []
    items: list[dict] = []
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = jsonsafe.loads(value)
        except json.JSONDecodeError as e:
            raise InputError(f"not a JSON array: {e.msg}", field="likert") from None
    if isinstance(value, str):
        for n, raw in enumerate(value.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3:
                raise InputError(
                    f"write key | question | label; label; ... (three parts separated by '|', not {len(parts)})",
                    line=n,
                    field="likert",
                )
            labels = [x.strip() for x in parts[2].split(";") if x.strip()]
            items.append(_item(parts[0], parts[1], labels, "", n))
            _check_list(items, line=n)
    elif isinstance(value, list):
        for k, obj in enumerate(value, start=1):
            if not isinstance(obj, dict):
                raise InputError(f"item {k}: an object with key, question and labels", field="likert")
            items.append(_item(obj.get("key"), obj.get("question"), obj.get("labels"), f"item {k}: ", None))
            _check_list(items, item=k)
    else:
        raise InputError("Likert items are text lines or a list", field="likert")
    return items


def _check_list(items: list[dict], line: int | None = None, item: int | None = None) -> None:
    where = f"item {item}: " if item is not None else ""
    if len(items) > MAX_ITEMS:
        raise InputError(f"{where}at most {MAX_ITEMS} Likert questions", line=line, field="likert")
    keys = [i["key"] for i in items]
    if keys[-1] in keys[:-1]:
        raise InputError(f"{where}the key {keys[-1]!r} is used twice", line=line, field="likert")


def check_answers(items: list[dict], answers: dict) -> dict[str, int]:
    """The study's items all answered with a level in range; field `likert.<key>` otherwise."""
    answers = dict(answers or {})
    out: dict[str, int] = {}
    for it in items:
        key, n = it["key"], len(it["labels"])
        value = answers.pop(key, None)
        if value is None or value == "":
            raise InputError(f"answer the question \u201c{it['question']}\u201d", field=f"likert.{key}")
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n:
            raise InputError(
                f"\u201c{it['question']}\u201d takes a level from 1 to {n}, not {value!r}", field=f"likert.{key}"
            )
        out[key] = value
    if answers:
        raise InputError(f"this study asks no question {sorted(answers)[0]!r}", field="likert")
    return out


def study_settings(options: dict, categories: set[str]) -> dict:
    """The kind settings the new-study form and the API set: `likert` (items, see parse_items)
    and `baseline` (the speaker the paired tests compare against; one of `categories`, the
    speakers of the upload). Blank options set nothing."""
    out: dict = {}
    raw = options.get("likert")
    if raw not in (None, "", []):
        items = parse_items(raw)
        if items:
            out["likert"] = items
    baseline = options.get("baseline")
    if isinstance(baseline, str) and baseline.strip():
        baseline = baseline.strip()
        if len(baseline) > 64:
            raise InputError("the baseline speaker's name must be at most 64 characters", field="baseline")
        if categories and baseline not in categories:
            raise InputError(
                f"the baseline {baseline!r} is not a speaker of this upload (speakers: "
                f"{', '.join(sorted(categories))})",
                field="baseline",
            )
        out["baseline"] = baseline
    return out


def level_estimate(means: Sequence[float], clusters: Sequence[Hashable] | None, levels: int) -> dict:
    """The mean of levels 1..``levels`` (a rating, a Likert answer; one mean per instruction)
    with the 95% interval of ``stats.mean_interval`` computed on ``(level - 1) / (levels - 1)``
    in [0, 1] and mapped back to levels; the method says so."""
    span = levels - 1
    est = stats.mean_interval([min(1.0, max(0.0, (m - 1.0) / span)) for m in means], clusters)
    if not est.n:
        return {**est.as_dict(), "method": f"{est.method}, on (level - 1) / {span}"}
    mean = math.fsum(means) / len(means)
    low, high = 1.0 + span * est.low, 1.0 + span * est.high
    return stats.Estimate(
        n=est.n,
        mean=mean,
        low=min(low, mean),
        high=max(high, mean),
        method=f"{est.method}, on (level - 1) / {span}, mapped back",
    ).as_dict()


def leaderboard_table(session, study) -> dict | None:
    """Per speaker (item category), the mean level of each of the study's Likert questions over
    its instructions (each instruction's mean over its valid human annotations: not gold, not
    excluded), with 95% intervals whose unit is the path (Item.cluster): levels 1..L rescaled
    to [0, 1] by (level - 1) / (L - 1), ``stats.mean_interval`` with the paths as clusters, and
    mapped back to levels (DESIGN section 7)."""
    from collections import defaultdict

    from sqlalchemy import select

    from app.studies.models import Annotation, Item

    items = (study.kind_settings or {}).get("likert") or []
    if not items:
        return None
    cols = [Annotation.response[("likert", it["key"])] for it in items]
    # category -> question -> instruction -> levels
    values: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    counts: dict[str, int] = defaultdict(int)
    path_of: dict[int, str] = {}
    for cat, item_id, cluster, *levels in session.connection().execute(
        select(Item.category, Item.id, Item.cluster, *cols)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    ):
        path_of[item_id] = cluster or f"item {item_id}"
        answered = [
            (it["key"], v) for it, v in zip(items, levels) if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        if answered:
            counts[cat] += 1
        for key, v in answered:
            values[cat][key][item_id].append(float(v))
    if not counts:
        return None
    baseline = str((study.kind_settings or {}).get("baseline", "human"))

    def estimate(per_item: dict[int, list[float]], levels: int) -> dict:
        return level_estimate([sum(v) / len(v) for v in per_item.values()], [path_of[i] for i in per_item], levels)

    rows = [
        {
            "category": cat,
            "n": counts[cat],
            **{it["key"]: estimate(values[cat][it["key"]], len(it["labels"])) for it in items},
        }
        for cat in sorted(counts, key=lambda c: (c != baseline, c))
    ]
    return {
        "key": "navigation_likert",
        "title": "The study's Likert questions per speaker (mean level, 1 = the first label)",
        "note": (
            "Mean level (1 = the first label) over the speaker's instructions, each the mean of "
            "its valid human annotations. Unit resampled: the path; 95% interval by Wilson at "
            "the effective number of paths with Student's t, computed on "
            "(level - 1) / (L - 1), mapped back to levels. "
            + " ".join(
                f"{it['key']}: {it['question']} (1 {it['labels'][0]} ... {len(it['labels'])} {it['labels'][-1]})."
                for it in items
            )
        ),
        "columns": [
            {"key": "category", "label": "Speaker", "help": "Who wrote the instructions."},
            {"key": "n", "label": "Annotations", "help": "Valid follows of the speaker's instructions."},
        ]
        + [
            {
                "key": it["key"],
                "label": f"{it['key']} (levels 1-{len(it['labels'])})",
                "help": f"{it['question']}: the mean level (1 {it['labels'][0]} ... {len(it['labels'])} "
                f"{it['labels'][-1]}) over the speaker's instructions, 95% interval resampling paths.",
            }
            for it in items
        ],
        "rows": rows,
    }
