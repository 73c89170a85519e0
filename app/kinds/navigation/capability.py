"""The capability analysis of one speaker (Zhao, Nguyen & Daume 2023, section 4.3).

A speaker r is treated as a bounded pragmatic speaker: for an intended path e* it has an
inference output (greedy or beam) and N samples, U_sub = {inference} ∪ samples (eq. 8), and it
ranks them with its own score S_r(u|e*), a log-probability (eq. 7). People follow every
candidate and the human reference u*; from their paths:

- rho(r): the candidate r picks itself, argmax of S_r over U_sub;
- rho(r*_search): argmax of S_r over U*_cand = U_sub ∪ {u*} (eq. 9);
- rho(r*_pragmatic): per path, the one candidate of U_sub its followers did best on by one
  selection metric (nDTW unless the study says otherwise), every metric reported for it (eq. 10);
- PPG_search and PPG_pragmatic: the oracles' gains over r (eq. 11-12), which say whether to
  improve the inference algorithm (search) or the model of the listener (pragmatic);
- gamma: the share of paths where S_r(inference) beats every sample (footnote 2), a tie
  counting half.

Only samples with a speaker score are in U_sub, on every row (r cannot rank the others); a
path whose inference output or every sample lacks a score is left out of every row, so the
rows are all over the same paths (see analyse).

Items (issue 4's generation jobs make the same ones): per path, one item per candidate and
one for the reference, all in the exclusion group f"{scan}:{path_id}" (nobody follows two
instructions of one path). Item.reference = {"path", "role": "inference" | "sample" |
"reference", "speaker_score", "candidate" (samples only)}; the category is the speaker's name
(inference), f"{speaker} (samples)" (samples) or "human" (reference). See
docs/kinds/navigation-capability.md.

Parts: the `capability` upload format (parse_capability, capability_items), the converter
from the coop speaker files (coop_to_capability), the pure analysis (analyse) and the
leaderboard tables (tables).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec
from app.kinds.navigation.formats import (
    Source,
    _path_id,
    _viewpoints,
    is_number,
    objects,
    parse_coop_candidates,
    parse_coop_greedy,
    read_json,
)
from app.leaderboards import stats
from app.studies.models import Annotation, Item, Study

ROLES = ("inference", "sample", "reference")
# (key in Annotation.scores, label): the metrics the analysis reports.
METRICS = (("success", "SR"), ("spl", "SPL"), ("ndtw", "nDTW"), ("sdtw", "SDTW"))
# The metric r*_pragmatic picks its one candidate per path by (the import option
# "pragmatic_metric" chooses another): nDTW, the paper's headline metric.
DEFAULT_SELECT = "ndtw"
SAMPLES_SUFFIX = " (samples)"
# Item.category is 64 characters; the samples' category adds the suffix to the name.
MAX_SPEAKER = 64 - len(SAMPLES_SUFFIX)
MAX_PATH_ID = 128  # the cluster f"{scan}:{path_id}" fits in 255 characters


# -- the upload format -------------------------------------------------------------------------


@dataclass(frozen=True)
class Utterance:
    """An instruction with the speaker's score S_r(u|e*) (None when unknown)."""

    instruction: str
    score: float | None


@dataclass(frozen=True)
class Sample(Utterance):
    candidate: int = 0  # the sample's index k (its external id ends in f":sample:{k}")


@dataclass(frozen=True)
class CapabilityPath:
    path_id: str
    scan: str
    path: tuple[str, ...]
    heading: float
    reference: Utterance
    inference: Utterance
    samples: tuple[Sample, ...]

    @property
    def group(self) -> str:
        return f"{self.scan}:{self.path_id}"


@dataclass(frozen=True)
class CapabilityInput:
    speaker: str
    paths: tuple[CapabilityPath, ...]


def check_speaker(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_SPEAKER:
        raise InputError(f"the speaker's name must be 1-{MAX_SPEAKER} characters", field="speaker")
    name = name.strip()
    if name == "human":
        raise InputError('"human" names the human references; choose another speaker name', field="speaker")
    return name


def _utterance(v: object, where: str, label: str, cls=Utterance, **extra) -> Utterance:
    if not isinstance(v, dict):
        raise InputError(f'{label}: {where} must be an object {{"instruction", "score"}}', field=where)
    text = v.get("instruction")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{label}: {where}.instruction must be a non-empty string", field=f"{where}.instruction")
    score = v.get("score")
    if score is not None and not is_number(score):
        raise InputError(
            f"{label}: {where}.score must be a finite number (the speaker's log-probability) or null",
            field=f"{where}.score",
        )
    return cls(text, None if score is None else float(score), **extra)


def _samples(rec: dict, label: str) -> tuple[Sample, ...]:
    raw = rec.get("samples")
    if not isinstance(raw, list) or not raw:
        raise InputError(
            f'{label}: samples must be a non-empty list of {{"instruction", "score"}} '
            "(the speaker's N sampled candidates)",
            field="samples",
        )
    out: list[Sample] = []
    seen: dict[int, int] = {}
    for i, s in enumerate(raw):
        where = f"samples[{i}]"
        k = s.get("candidate", i) if isinstance(s, dict) else i
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InputError(f"{label}: {where}.candidate must be a non-negative integer", field=f"{where}.candidate")
        if k in seen:
            raise InputError(f"{label}: {where}.candidate {k} repeats samples[{seen[k]}]", field=f"{where}.candidate")
        seen[k] = i
        out.append(_utterance(s, where, label, Sample, candidate=k))
    return tuple(out)


def parse_capability(source: Source | dict, speaker: str | None = None) -> CapabilityInput:
    """A capability file: {"speaker", "paths": [{path_id, scan, path, heading, reference,
    inference, samples}]}. `speaker` (the study form's option) overrides the file's name.
    Checks shapes only; the buildings are checked by import_capability."""
    data = read_json(source, "capability")
    if not isinstance(data, dict):
        raise InputError('a capability file is a JSON object {"speaker", "paths"}', field="capability")
    name = speaker if speaker not in (None, "") else data.get("speaker")
    if name is None:
        raise InputError('no speaker: name it in the file ("speaker") or in the form', field="speaker")
    name = check_speaker(name)
    paths = data.get("paths")
    if not isinstance(paths, list) or not paths:
        raise InputError("paths must be a non-empty list", field="paths")
    out: list[CapabilityPath] = []
    seen: dict[str, int] = {}
    for i, rec, label in objects(paths, lambda i: f"paths[{i}]", "paths"):
        pid = _path_id(rec, label)
        if len(pid) > MAX_PATH_ID:
            raise InputError(f"{label}: path_id is longer than {MAX_PATH_ID} characters", field="path_id")
        label = f"path_id {pid}"
        if pid in seen:
            raise InputError(f"{label}: path_id repeats paths[{seen[pid]}]", field="path_id")
        seen[pid] = i
        scan = rec.get("scan")
        if not isinstance(scan, str) or not scan:
            raise InputError(f"{label}: scan must be a non-empty string", field="scan")
        heading = rec.get("heading")
        if not is_number(heading):
            raise InputError(f"{label}: heading must be a finite number (radians)", field="heading")
        out.append(
            CapabilityPath(
                path_id=pid,
                scan=scan,
                path=_viewpoints(rec, "path", label),
                heading=float(heading),
                reference=_utterance(rec.get("reference"), "reference", label),
                inference=_utterance(rec.get("inference"), "inference", label),
                samples=_samples(rec, label),
            )
        )
    return CapabilityInput(name, tuple(out))


def capability_items(parsed: CapabilityInput) -> list[ItemSpec]:
    """The items of a capability study (pure: no database, no graph). Per path: the inference
    output, the samples and the human reference, in one exclusion group."""
    speaker = parsed.speaker
    items: list[ItemSpec] = []
    for p in parsed.paths:
        base = {"scan": p.scan, "start": p.path[0], "heading": p.heading}

        def spec(external_id, u: Utterance, role, source, category, **ref):
            return ItemSpec(
                external_id=external_id,
                payload={"instruction": u.instruction, **base},
                reference={"path": list(p.path), "role": role, "speaker_score": u.score, **ref},
                source=source,
                category=category,
                cluster=p.group,
                exclusion_group=p.group,
            )

        items.append(spec(f"{speaker}:{p.path_id}:inference", p.inference, "inference", "agent", speaker))
        for s in p.samples:
            items.append(
                spec(
                    f"{speaker}:{p.path_id}:sample:{s.candidate}",
                    s,
                    "sample",
                    "agent",
                    speaker + SAMPLES_SUFFIX,
                    candidate=s.candidate,
                )
            )
        items.append(spec(f"{p.path_id}:reference", p.reference, "reference", "human", "human"))
    return items


def import_capability(data: bytes, options: dict) -> ImportResult:
    """The `capability` format of the navigation kind: parse, check every path on its
    building's graph, then the items; nothing is stored by this function."""
    from app.kinds.navigation.environments import check_path

    parsed = parse_capability(data, options.get("speaker"))
    select = options.get("pragmatic_metric") or DEFAULT_SELECT
    if select not in dict(METRICS):
        raise InputError(
            f"pragmatic_metric must be one of {', '.join(k for k, _ in METRICS)}", field="pragmatic_metric"
        )
    for p in parsed.paths:
        check_path(p.scan, p.path, f"path_id {p.path_id}")
    items = capability_items(parsed)
    n_samples = [len(p.samples) for p in parsed.paths]
    settings = {"design": "capability", "speakers": [parsed.speaker]}
    if select != DEFAULT_SELECT:
        settings["pragmatic_metric"] = select
    return ImportResult(
        items=items,
        kind_settings=settings,
        summary={
            "design": "capability",
            "speaker": parsed.speaker,
            "paths": len(parsed.paths),
            "instructions": len(items),
            "samples_per_path": [min(n_samples), max(n_samples)],
            "scans": sorted({p.scan for p in parsed.paths}),
        },
    )


# -- from the coop speaker files -----------------------------------------------------------


def _speaker_from_model(models: set[str | None]) -> str:
    """The greedy file's model name without its decoding strategy ("speaker-clip-t5_greedy"
    -> "speaker-clip-t5"), or "speaker"."""
    named = sorted(m for m in models if m)
    if len(named) != 1:
        return "speaker"
    name = named[0]
    for suffix in ("_greedy", "_beam"):
        name = name.removesuffix(suffix)
    return name[:MAX_SPEAKER] or "speaker"


def coop_to_capability(
    greedy: Source | dict, candidates: Source | dict, speaker: str | None = None, limit_paths: int | None = None
) -> tuple[dict, dict]:
    """A capability file from coop's greedy file and its sampled candidates: the paths in
    both, inference = the greedy instruction with generated_instr_sum_log_prob, samples = the
    candidates (their log-probabilities where the file has them: the released one has none),
    reference = the path's first human instruction (score null). Candidate 0 is dropped when
    it is the greedy instruction itself (so that N = 10 samples, as in the paper).
    Returns (the file's object, a report of what was matched)."""
    g = parse_coop_greedy(greedy)
    c = parse_coop_candidates(candidates)
    name = check_speaker(speaker) if speaker else _speaker_from_model({o.model for o in g.outputs})
    present = [o for o in g.outputs if o.path_id in c]
    missing = [o.path_id for o in g.outputs if o.path_id not in c]
    paths: list[dict] = []
    dropped = 0
    for out in present[:limit_paths] if limit_paths else present:
        label = f"path_id {out.path_id}"
        cands = c[out.path_id]
        if cands[0].scan != out.scan or cands[0].path != out.path:
            raise InputError(f"{label}: the candidates file has another scan or path for it", field="path")
        refs = [t for t in out.instructions if t.strip()]
        if not refs:
            raise InputError(f"{label}: no human reference instruction", field="instructions")
        samples = []
        for cand in cands:
            if cand.candidate == 0 and cand.generated_instr.strip() == out.generated_instr.strip():
                dropped += 1
                continue
            samples.append(
                {"instruction": cand.generated_instr, "score": cand.sum_log_prob, "candidate": cand.candidate}
            )
        paths.append(
            {
                "path_id": out.path_id,
                "scan": out.scan,
                "path": list(out.path),
                "heading": out.heading,
                "reference": {"instruction": refs[0], "score": None},
                "inference": {"instruction": out.generated_instr, "score": out.sum_log_prob},
                "samples": samples,
            }
        )
    if not paths:
        raise InputError("no path of the greedy file is in the candidates file", field="candidates")
    data = {"speaker": name, "paths": paths}
    parse_capability(data)  # what we write must read back
    report = {
        "speaker": name,
        "greedy_paths": len(g.outputs),
        "in_candidates": len(present),
        "missing_from_candidates": missing,
        "paths_written": len(paths),
        "candidate_0_is_the_greedy_output": dropped,
        "samples_per_path": sorted({len(p["samples"]) for p in paths}),
        "samples_with_scores": sum(s["score"] is not None for p in paths for s in p["samples"]),
    }
    return data, report


# -- the analysis (pure) -------------------------------------------------------------------

# Why a path is left out of every row (the tables print these).
NO_INFERENCE_SCORE = "the inference output has no speaker score, so the speaker cannot rank U_sub"
NO_SAMPLE_SCORE = "no sample has a speaker score, so U_sub would be the inference output alone"
NOT_FOLLOWED = "a candidate of U_sub or the human reference has no valid annotation yet"


@dataclass(frozen=True)
class Candidate:
    """One item of a path for the analysis: its speaker score, its instruction and, per
    metric, the mean over its valid annotations (empty when nobody has followed it yet)."""

    role: str
    score: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    candidate: int | None = None
    instruction: str | None = None


@dataclass(frozen=True)
class PathCandidates:
    path: str  # the cluster f"{scan}:{path_id}"
    inference: Candidate
    samples: tuple[Candidate, ...]
    reference: Candidate | None = None

    @property
    def u_sub(self) -> tuple[Candidate, ...]:
        """U_sub^r (eq. 8) as every row uses it: the inference output and the samples the
        speaker scored. r cannot rank a sample without a score, so neither r nor an oracle may
        choose it, and gamma does not compare it."""
        return (self.inference, *(s for s in self.samples if s.score is not None))

    @property
    def unscored_samples(self) -> int:
        return sum(s.score is None for s in self.samples)


def _argmax_score(cands) -> Candidate:
    """The first candidate with the highest score (ties keep the earlier one: the inference
    output before the samples, the samples before the reference)."""
    best = None
    for c in cands:
        if c.score is not None and (best is None or c.score > best.score):
            best = c
    return best


def speaker_choice(p: PathCandidates) -> Candidate | None:
    """r's own output (eq. 7): argmax S_r over U_sub; None when the inference output has no
    score (then r ranks nothing and the path is left out)."""
    if p.inference.score is None:
        return None
    return _argmax_score(p.u_sub)


def search_choice(p: PathCandidates) -> Candidate | None:
    """r*_search's output (eq. 9): argmax S_r over U_sub ∪ {u*}; None when the reference or
    the inference output has no score. The reference wins only with a strictly higher score."""
    if p.reference is None or p.reference.score is None or p.inference.score is None:
        return None
    return _argmax_score((*p.u_sub, p.reference))


def pragmatic_choice(p: PathCandidates, select: str = DEFAULT_SELECT) -> Candidate:
    """r*_pragmatic's output (eq. 10): ONE candidate of U_sub per path, the one its followers
    did best on by the metric `select`; every metric is then reported for that candidate.
    Ties keep r's own choice (so the oracle departs from r only where people did strictly
    better), then the inference output, then the lower sample. Needs every candidate of U_sub
    followed."""
    best = max(c.values[select] for c in p.u_sub)
    own = speaker_choice(p)
    if own is not None and own.values[select] == best:
        return own
    return next(c for c in p.u_sub if c.values[select] == best)


def _same_text(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and " ".join(a.split()) == " ".join(b.split())


def gamma_outcome(p: PathCandidates) -> str | None:
    """Footnote 2 on one path: "win" when S_r(inference output) is strictly higher than every
    scored sample's, "loss" when a sample's is strictly higher, "tie" otherwise: some sample
    has exactly its score, or is the inference output's own text (the same utterance: it
    neither loses to nor beats it, whatever the stored scores' rounding). None when the
    inference output or every sample lacks a score."""
    if p.inference.score is None or len(p.u_sub) < 2:
        return None
    tie = False
    for s in p.u_sub[1:]:
        if _same_text(s.instruction, p.inference.instruction):
            tie = True
        elif s.score > p.inference.score:
            return "loss"
        elif s.score == p.inference.score:
            tie = True
    return "tie" if tie else "win"


def gamma_share(wins: int, ties: int, n: int) -> dict | None:
    """gamma = (wins + ties / 2) / n: a tie counts half. The 95% interval runs from the Wilson
    lower bound with the ties as losses to the Wilson upper bound with the ties as wins (so it
    holds under either reading of a tie); without ties it is the Wilson interval."""
    if not n:
        return None
    low = stats.proportion(wins, n).low
    high = stats.proportion(wins + ties, n).high
    return {
        "n": n,
        "mean": (wins + ties / 2) / n,
        "low": low,
        "high": high,
        "method": "Wilson, ties as losses (low) and as wins (high)",
    }


def _est(values: list[float]) -> dict:
    """A rho over the counted paths (one value per path, in [0, 1]): ``stats.mean_interval``,
    the path the unit (Wilson for 0/1 values, else Wilson at the effective n with t)."""
    return stats.mean_interval([min(1.0, max(0.0, v)) for v in values]).as_dict()


def _gain(better: list[float], worse: list[float]) -> dict:
    """A PPG (or a difference of PPGs) over the same paths: the mean of the per-path
    differences ``better - worse`` with ``stats.paired_effect``'s 95% interval (Bonett-Price's
    adjusted Wald interval for 0/1 values on both sides, else t on the paired differences)."""
    return stats.paired_effect(better, worse)["difference"].as_dict()


def advise(difference: dict | None, search_available: bool) -> str:
    """The paper's Figure 1c from the interval of PPG_pragmatic - PPG_search."""
    if not search_available or difference is None:
        return "cannot compare: the search oracle is unavailable (see the note)"
    if not difference["n"] or difference["mean"] is None:
        return "no paths to compare yet"
    if difference["n"] < 2:
        return f"too few paths ({difference['n']}) to compare"
    if difference["low"] > 0:
        return "PPG_pragmatic > PPG_search: improve the model of the listener (pragmatic capability)"
    if difference["high"] < 0:
        return "PPG_search > PPG_pragmatic: improve the inference algorithm (search capability)"
    return "no clear difference (the interval of PPG_pragmatic - PPG_search covers 0)"


def analyse(paths: list[PathCandidates], metrics=tuple(k for k, _ in METRICS), *, select: str = DEFAULT_SELECT) -> dict:
    """The capability analysis of one speaker over its paths (see the module docstring).

    Every row is over the same paths (the counted ones), whatever the speaker scored:
    - samples without a speaker score are left out of U_sub on every row and of gamma;
    - a path is left out of every row when its inference output has no score, when none of
      its samples has one, or when a candidate of U_sub or the human reference has no valid
      annotation yet;
    - r*_search (and PPG_search, and the advice) is reported only when every counted path's
      reference has a score; otherwise it is unavailable and the tables say why (it never
      takes paths out of the other rows).
    r*_pragmatic picks one candidate per path by `select` and reports every metric for it."""
    if select not in metrics:
        raise ValueError(f"the selection metric {select!r} is not among the metrics {metrics}")
    total = len(paths)

    def followed(c: Candidate | None) -> bool:
        return c is not None and all(m in c.values for m in metrics)

    skipped: dict[str, int] = {}
    rankable: list[PathCandidates] = []
    for p in paths:
        reason = NO_INFERENCE_SCORE if p.inference.score is None else NO_SAMPLE_SCORE if len(p.u_sub) < 2 else None
        if reason is None:
            rankable.append(p)
        else:
            skipped[reason] = skipped.get(reason, 0) + 1
    counted = [p for p in rankable if all(followed(c) for c in p.u_sub) and followed(p.reference)]
    if len(counted) < len(rankable):
        skipped[NOT_FOLLOWED] = len(rankable) - len(counted)
    ref_unscored = sum(p.reference.score is None for p in counted)
    search_available = bool(counted) and not ref_unscored
    unavailable: list[str] = []
    if not search_available:
        unavailable.append("r*_search and PPG_search: " + _search_reason(paths, counted, ref_unscored))

    own = [speaker_choice(p) for p in counted]
    prag = [pragmatic_choice(p, select) for p in counted]
    srch = [search_choice(p) for p in counted] if search_available else []
    out_metrics: dict[str, dict] = {}
    for m in metrics:
        r = [c.values[m] for c in own]
        best = [c.values[m] for c in prag]
        row = {
            "speaker_choice": _est(r),
            "inference": _est([p.inference.values[m] for p in counted]),
            "pragmatic": _est(best),
            "reference": _est([p.reference.values[m] for p in counted]),
            "ppg_pragmatic": _gain(best, r),
            "search": None,
            "ppg_search": None,
            "difference": None,
        }
        if search_available:
            s = [c.values[m] for c in srch]
            row["search"] = _est(s)
            row["ppg_search"] = _gain(s, r)
            # PPG_pragmatic - PPG_search per path = rho(r*_pragmatic) - rho(r*_search).
            row["difference"] = _gain(best, s)
        row["advice"] = advise(row["difference"], search_available)
        out_metrics[m] = row

    # gamma needs only the scores: every path whose inference output and at least one sample
    # have one, followed or not.
    outcomes = [o for p in rankable if (o := gamma_outcome(p)) is not None]
    wins, ties = outcomes.count("win"), outcomes.count("tie")
    gamma = gamma_share(wins, ties, len(outcomes))
    if gamma is None:
        unavailable.append("gamma: " + _gamma_reason(paths))
    picked = sum(c is not p.inference for c, p in zip(own, counted))
    return {
        "paths": total,
        "counted": len(counted),
        "skipped": skipped,
        "select": select,
        "unscored_samples": sum(p.unscored_samples for p in paths),
        "search_available": search_available,
        "unavailable": unavailable,
        "picked_sample": {
            "paths": len(counted),
            "k": picked,
            "share": stats.proportion(picked, len(counted)).as_dict() if counted else None,
        },
        "gamma": {
            "paths": len(outcomes),
            "wins": wins,
            "ties": ties,
            "losses": len(outcomes) - wins - ties,
            "k": wins + ties / 2,
            "share": gamma,
        },
        "metrics": out_metrics,
    }


def _search_reason(paths: list[PathCandidates], counted: list[PathCandidates], ref_unscored: int) -> str:
    if not paths:
        return "no paths"
    if all(p.reference is None for p in paths):
        return "the study has no human reference instructions"
    if all(p.reference is None or p.reference.score is None for p in paths):
        return (
            "the human references have no speaker score S_r(u*|e*), so the speaker cannot "
            "rank them against its candidates"
        )
    if not counted:
        return "no path counts yet"
    verb = "has" if ref_unscored == 1 else "have"
    return (
        f"{ref_unscored} of the {len(counted)} counted paths {verb} no speaker score for the human "
        "reference; r*_search is reported only when every counted path has one, so that every "
        "row is over the same paths"
    )


def _gamma_reason(paths: list[PathCandidates]) -> str:
    if not paths:
        return "no paths"
    if all(p.inference.score is None for p in paths):
        return "the inference outputs have no speaker score"
    return "no path has speaker scores for the inference output and at least one sample"


# -- from the database -----------------------------------------------------------------------


def _number(v) -> float | None:
    """A stored JSON number as a float (booleans, i.e. success, as 0/1); None otherwise."""
    if v is None or isinstance(v, str):
        return None
    x = float(v)
    return x if math.isfinite(x) else None


def load_paths(session: Session, study: Study) -> dict[str, list[PathCandidates]]:
    """speaker -> its paths, with each item's mean metrics over its valid annotations.
    Reads the items' small reference fields (never the path) and one row per annotation with
    just the four metrics."""
    ref = Item.reference
    items = session.execute(
        select(
            Item.id,
            Item.category,
            Item.cluster,
            ref["role"],
            ref["speaker_score"],
            ref["candidate"],
            Item.payload["instruction"].as_string(),
        ).where(Item.study_id == study.id, Item.is_gold.is_(False))
    ).all()
    info = {}
    for item_id, category, cluster, role, score, k, text in items:
        if role in ROLES:
            info[item_id] = (category, cluster, role, _number(score), k, text)
    if not info:
        return {}
    sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    keys = [k for k, _ in METRICS]
    for item_id, *values in session.connection().execute(
        select(Annotation.item_id, *[Annotation.scores[k] for k in keys]).where(valid)
    ):
        if item_id not in info:
            continue
        for k, v in zip(keys, values):
            if (x := _number(v)) is not None:
                sums[item_id][k].append(x)

    def candidate(item_id) -> Candidate:
        _, _, role, score, k, text = info[item_id]
        means = {m: sum(v) / len(v) for m, v in sums.get(item_id, {}).items() if v}
        return Candidate(
            role=role, score=score, values=means, candidate=k if isinstance(k, int) else None, instruction=text
        )

    by_cluster: dict[str, list[int]] = defaultdict(list)
    for item_id, (_, cluster, *_rest) in info.items():
        by_cluster[cluster].append(item_id)
    out: dict[str, list[PathCandidates]] = defaultdict(list)
    for cluster in sorted(by_cluster):
        ids = by_cluster[cluster]
        refs = [i for i in ids if info[i][2] == "reference"]
        reference = candidate(refs[0]) if refs else None
        for i in ids:
            category, _, role, *_rest = info[i]
            if role != "inference":
                continue
            samples = sorted(
                (candidate(j) for j in ids if info[j][2] == "sample" and info[j][0] == category + SAMPLES_SUFFIX),
                key=lambda c: (c.candidate is None, c.candidate or 0),
            )
            out[category].append(PathCandidates(cluster, candidate(i), tuple(samples), reference))
    return dict(out)


# -- leaderboard tables ----------------------------------------------------------------------

_QUANTITIES = (
    ("speaker_choice", "ρ(r): the speaker's own choice, argmax S_r over U_sub"),
    ("inference", "Inference output (greedy/beam) as is"),
    ("search", "ρ(r*_search): argmax S_r over U_sub ∪ {human reference}"),
    ("pragmatic", "ρ(r*_pragmatic): per path, the one candidate of U_sub its followers did best on"),
    ("reference", "Human reference instruction"),
    ("ppg_search", "PPG_search = ρ(r*_search) − ρ(r)"),
    ("ppg_pragmatic", "PPG_pragmatic = ρ(r*_pragmatic) − ρ(r)"),
    ("difference", "PPG_pragmatic − PPG_search"),
)


def speaker_tables(speaker: str, result: dict, suffix: str = "") -> list[dict]:
    """The analysis of one speaker as leaderboard tables (app/kinds/base.py's format)."""
    shown = [(k, label) for k, label in METRICS if k in result["metrics"]]
    metric_cols = [
        {
            "key": k,
            "label": label,
            "help": f"{label} (0-1; a PPG a difference, -1 to 1) of the row's quantity over the counted "
            "paths, with a 95% interval resampling paths.",
        }
        for k, label in shown
    ]
    rows = []
    for key, label in _QUANTITIES:
        row: dict[str, Any] = {"key": key, "quantity": label}
        for m, _ in shown:
            row[m] = result["metrics"][m][key]
        rows.append(row)
    counted = result["counted"]
    select = dict(METRICS).get(result["select"], result["select"])
    note = [f"Paths counted: {counted} of {result['paths']}."]
    for reason, n in result["skipped"].items():
        note.append(f"Left out of every row: {n} (reason: {reason}).")
    if result["unscored_samples"]:
        k = result["unscored_samples"]
        note.append(
            f"{k} sample{'s have' if k != 1 else ' has'} no speaker score: left out of U_sub on every "
            "row and of γ (the speaker cannot rank them, so neither r nor an oracle may choose them)."
        )
    note.append(
        "A candidate's value is the mean of the metric over its valid annotations (not gold, "
        "not excluded). A path counts when its inference output and at least one sample have a "
        "speaker score and every candidate of U_sub and the human reference has a valid "
        "annotation; every row is over the same counted paths (unit: the path). 95% intervals: a ρ "
        "(0-1) by stats.mean_interval (Wilson for 0/1, else Wilson at the effective n with t); "
        "a PPG, a difference of two ρ's on the same paths, by the paired difference's interval "
        "(Bonett-Price for 0/1 on both sides, else t on the per-path differences). "
        "U_sub = {inference output} ∪ the scored samples. "
        f"r*_pragmatic picks one candidate per path, the one its followers did best on by {select} "
        "(ties: r's own choice, then the inference output, then the lower sample), and every "
        "column is that candidate's, so on the other metrics PPG_pragmatic can be negative."
    )
    if result["picked_sample"]["paths"]:
        ps = result["picked_sample"]
        note.append(
            f"The speaker's own score picked a sample over its inference output on {ps['k']} of "
            f"{ps['paths']} counted paths."
        )
    for u in result["unavailable"]:
        note.append(f"Unavailable: {u}.")
    advice_rows = []
    for m, label in shown:
        r = result["metrics"][m]
        advice_rows.append(
            {
                "metric": label,
                "ppg_search": r["ppg_search"],
                "ppg_pragmatic": r["ppg_pragmatic"],
                "difference": r["difference"],
                "advice": r["advice"],
            }
        )
    g = result["gamma"]
    ps = result["picked_sample"]
    gamma_remark = next((u.split(": ", 1)[1] for u in result["unavailable"] if u.startswith("gamma")), "")
    if g["share"] is not None:
        gamma_remark = f"{g['wins']} won, {g['ties']} tied, {g['losses']} lost" + (
            f"; the ties count half: ({g['wins']} + {g['ties']}/2) / {g['paths']}" if g["ties"] else ""
        )
    check_rows = [
        {
            "key": "gamma",
            "check": "γ: S_r(inference output) > max S_r over the scored samples "
            "(the paper's assumption, footnote 2; 0.7-0.9 there)",
            "paths": g["paths"],
            "share": g["share"],
            "remark": gamma_remark,
        },
        {
            "key": "picked_sample",
            "check": "The speaker's own choice r is a sample, not the inference output",
            "paths": ps["paths"],
            "share": ps["share"],
            "remark": "" if ps["paths"] else "no counted paths yet",
        },
    ]
    return [
        {
            "key": f"nav_capability{suffix}",
            "title": f"Capability analysis of {speaker} (section 4.3): SR, SPL, nDTW, SDTW (0-1)",
            "note": " ".join(note),
            "columns": [
                {
                    "key": "quantity",
                    "label": "Quantity",
                    "help": "ρ(x): the followers' mean metric on the instructions x picks per path; PPG: the gain "
                    "of a choice over the speaker's own, ρ(r*) − ρ(r).",
                },
                *metric_cols,
            ],
            "rows": rows,
            "speaker": speaker,
            "paths": result["paths"],
            "counted": counted,
        },
        {
            "key": f"nav_capability_advice{suffix}",
            "title": f"What to improve in {speaker}: pragmatic potential gains (difference of 0-1 metrics)",
            "note": (
                "Figure 1c of the paper: a large PPG_search and a small PPG_pragmatic => improve the "
                "inference algorithm (search); a large PPG_pragmatic and a small PPG_search => improve "
                "the model of the listener (pragmatic); no clear difference when the 95% interval of "
                "PPG_pragmatic − PPG_search covers 0."
            ),
            "columns": [
                {"key": "metric", "label": "Metric", "help": "The followers' metric (0-1) the gains are in."},
                {
                    "key": "ppg_search",
                    "label": "PPG_search",
                    "help": "Gain from a better search: ρ(r*_search) − ρ(r), with a 95% paired interval over paths.",
                },
                {
                    "key": "ppg_pragmatic",
                    "label": "PPG_pragmatic",
                    "help": "Gain from a better listener model: ρ(r*_pragmatic) − ρ(r), with a 95% paired "
                    "interval over paths.",
                },
                {
                    "key": "difference",
                    "label": "PPG_pragmatic − PPG_search",
                    "help": "The two gains' difference on the same paths, with a 95% paired interval over paths.",
                },
                {
                    "key": "advice",
                    "label": "Advice",
                    "help": "What to improve, read from the difference's interval (none when it covers 0).",
                },
            ],
            "rows": advice_rows,
        },
        {
            "key": f"nav_capability_scores{suffix}",
            "title": f"{speaker}'s own scores (shares of paths, 0-1)",
            "note": (
                "Shares with 95% Wilson intervals. γ: a path ties when no scored sample has a strictly "
                "higher S_r than the inference output but one has exactly its score or is its own text "
                "(the same instruction); a tie counts half (the footnote's share is over every path, "
                "and neither instruction is ranked above the other), and γ's interval runs from the "
                "Wilson lower bound with the ties as losses to the Wilson upper bound with the ties as "
                "wins."
            ),
            "columns": [
                {"key": "check", "label": "Check", "help": "What is counted on each path."},
                {"key": "paths", "label": "Paths", "help": "Counted paths the share is over."},
                {
                    "key": "share",
                    "label": "Share",
                    "help": "Share (0-1) of those paths where the check holds, with its 95% Wilson interval over paths.",
                },
                {"key": "remark", "label": "Remark", "help": "The counts behind the share, or why there is none."},
            ],
            "rows": check_rows,
        },
    ]


def tables(session: Session, study: Study) -> list[dict]:
    """The capability tables of every speaker with capability items (none otherwise)."""
    by_speaker = load_paths(session, study)
    listed = [s for s in (study.kind_settings or {}).get("speakers", []) if s in by_speaker]
    order = listed + sorted(s for s in by_speaker if s not in listed)
    out: list[dict] = []
    select = (study.kind_settings or {}).get("pragmatic_metric", DEFAULT_SELECT)
    for n, speaker in enumerate(order):
        out.extend(speaker_tables(speaker, analyse(by_speaker[speaker], select=select), "" if n == 0 else f"_{n + 1}"))
    return out


def dumps(data: dict) -> str:
    """A capability file's text (one path per line, readable in a diff)."""
    lines = ",\n  ".join(json.dumps(p, ensure_ascii=False) for p in data["paths"])
    return f'{{"speaker": {json.dumps(data["speaker"], ensure_ascii=False)},\n "paths": [\n  {lines}\n ]}}\n'
