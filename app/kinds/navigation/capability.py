"""The capability analysis of one speaker (Zhao, Nguyen & Daume 2023, section 4.3).

A speaker r is treated as a bounded pragmatic speaker: for an intended path e* it has an
inference output (greedy or beam) and N samples, U_sub = {inference} ∪ samples (eq. 8), and it
ranks them with its own score S_r(u|e*), a log-probability (eq. 7). People follow every
candidate and the human reference u*; from their paths:

- rho(r): the candidate r picks itself, argmax of S_r over U_sub (the inference output when
  it has no score);
- rho(r*_search): argmax of S_r over U*_cand = U_sub ∪ {u*} (eq. 9);
- rho(r*_pragmatic): per path, the candidate of U_sub its followers did best on (eq. 10);
- PPG_search and PPG_pragmatic: the oracles' gains over r (eq. 11-12), which say whether to
  improve the inference algorithm (search) or the model of the listener (pragmatic);
- gamma: the share of paths where S_r(inference) beats every sample (footnote 2).

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
from app.kinds.navigation.formats import (Source, _path_id, _viewpoints, is_number, parse_coop_candidates,
                                          parse_coop_greedy, read_json)
from app.leaderboards import stats
from app.studies.models import Annotation, Item, Study

ROLES = ("inference", "sample", "reference")
# (key in Annotation.scores, label): the metrics the analysis reports.
METRICS = (("success", "SR"), ("spl", "SPL"), ("ndtw", "nDTW"), ("sdtw", "SDTW"))
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
        raise InputError("\"human\" names the human references; choose another speaker name",
                         field="speaker")
    return name


def _utterance(v: object, where: str, label: str, cls=Utterance, **extra) -> Utterance:
    if not isinstance(v, dict):
        raise InputError(f"{label}: {where} must be an object {{\"instruction\", \"score\"}}", field=where)
    text = v.get("instruction")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{label}: {where}.instruction must be a non-empty string", field=f"{where}.instruction")
    score = v.get("score")
    if score is not None and not is_number(score):
        raise InputError(f"{label}: {where}.score must be a finite number (the speaker's log-probability) "
                         "or null", field=f"{where}.score")
    return cls(text, None if score is None else float(score), **extra)


def _samples(rec: dict, label: str) -> tuple[Sample, ...]:
    raw = rec.get("samples")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{label}: samples must be a non-empty list of {{\"instruction\", \"score\"}} "
                         "(the speaker's N sampled candidates)", field="samples")
    out: list[Sample] = []
    seen: dict[int, int] = {}
    for i, s in enumerate(raw):
        where = f"samples[{i}]"
        k = s.get("candidate", i) if isinstance(s, dict) else i
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InputError(f"{label}: {where}.candidate must be a non-negative integer",
                             field=f"{where}.candidate")
        if k in seen:
            raise InputError(f"{label}: {where}.candidate {k} repeats samples[{seen[k]}]",
                             field=f"{where}.candidate")
        seen[k] = i
        out.append(_utterance(s, where, label, Sample, candidate=k))
    return tuple(out)


def parse_capability(source: Source | dict, speaker: str | None = None) -> CapabilityInput:
    """A capability file: {"speaker", "paths": [{path_id, scan, path, heading, reference,
    inference, samples}]}. `speaker` (the study form's option) overrides the file's name.
    Checks shapes only; the buildings are checked by import_capability."""
    data = read_json(source, "capability")
    if not isinstance(data, dict):
        raise InputError("a capability file is a JSON object {\"speaker\", \"paths\"}", field="capability")
    name = speaker if speaker not in (None, "") else data.get("speaker")
    if name is None:
        raise InputError("no speaker: name it in the file (\"speaker\") or in the form", field="speaker")
    name = check_speaker(name)
    paths = data.get("paths")
    if not isinstance(paths, list) or not paths:
        raise InputError("paths must be a non-empty list", field="paths")
    out: list[CapabilityPath] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(paths):
        label = f"paths[{i}]"
        if not isinstance(rec, dict):
            raise InputError(f"{label}: must be an object", field="paths")
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
        out.append(CapabilityPath(
            path_id=pid, scan=scan, path=_viewpoints(rec, "path", label), heading=float(heading),
            reference=_utterance(rec.get("reference"), "reference", label),
            inference=_utterance(rec.get("inference"), "inference", label),
            samples=_samples(rec, label)))
    return CapabilityInput(name, tuple(out))


def capability_items(parsed: CapabilityInput) -> list[ItemSpec]:
    """The items of a capability study (pure: no database, no graph). Per path: the inference
    output, the samples and the human reference, in one exclusion group."""
    speaker = parsed.speaker
    items: list[ItemSpec] = []
    for p in parsed.paths:
        base = {"scan": p.scan, "start": p.path[0], "heading": p.heading}

        def spec(external_id, u: Utterance, role, source, category, **ref):
            return ItemSpec(external_id=external_id, payload={"instruction": u.instruction, **base},
                            reference={"path": list(p.path), "role": role, "speaker_score": u.score, **ref},
                            source=source, category=category, cluster=p.group, exclusion_group=p.group)

        items.append(spec(f"{speaker}:{p.path_id}:inference", p.inference, "inference", "agent", speaker))
        for s in p.samples:
            items.append(spec(f"{speaker}:{p.path_id}:sample:{s.candidate}", s, "sample", "agent",
                              speaker + SAMPLES_SUFFIX, candidate=s.candidate))
        items.append(spec(f"{p.path_id}:reference", p.reference, "reference", "human", "human"))
    return items


def import_capability(data: bytes, options: dict) -> ImportResult:
    """The `capability` format of the navigation kind: parse, check every path on its
    building's graph, then the items; nothing is stored by this function."""
    from app.kinds.navigation.environments import check_path

    parsed = parse_capability(data, options.get("speaker"))
    for p in parsed.paths:
        check_path(p.scan, p.path, f"path_id {p.path_id}")
    items = capability_items(parsed)
    n_samples = [len(p.samples) for p in parsed.paths]
    return ImportResult(items=items, kind_settings={"design": "capability", "speakers": [parsed.speaker]},
                        summary={"design": "capability", "speaker": parsed.speaker, "paths": len(parsed.paths),
                                 "instructions": len(items), "samples_per_path": [min(n_samples), max(n_samples)],
                                 "scans": sorted({p.scan for p in parsed.paths})})


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


def coop_to_capability(greedy: Source | dict, candidates: Source | dict, speaker: str | None = None,
                       limit_paths: int | None = None) -> tuple[dict, dict]:
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
            samples.append({"instruction": cand.generated_instr, "score": cand.sum_log_prob,
                            "candidate": cand.candidate})
        paths.append({"path_id": out.path_id, "scan": out.scan, "path": list(out.path),
                      "heading": out.heading,
                      "reference": {"instruction": refs[0], "score": None},
                      "inference": {"instruction": out.generated_instr, "score": out.sum_log_prob},
                      "samples": samples})
    if not paths:
        raise InputError("no path of the greedy file is in the candidates file", field="candidates")
    data = {"speaker": name, "paths": paths}
    parse_capability(data)  # what we write must read back
    report = {"speaker": name, "greedy_paths": len(g.outputs), "in_candidates": len(present),
              "missing_from_candidates": missing, "paths_written": len(paths),
              "candidate_0_is_the_greedy_output": dropped,
              "samples_per_path": sorted({len(p["samples"]) for p in paths}),
              "samples_with_scores": sum(s["score"] is not None for p in paths for s in p["samples"])}
    return data, report


# -- the analysis (pure) -------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One item of a path for the analysis: its speaker score and, per metric, the mean over
    its valid annotations (empty when nobody has followed it yet)."""

    role: str
    score: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    candidate: int | None = None


@dataclass(frozen=True)
class PathCandidates:
    path: str  # the cluster f"{scan}:{path_id}"
    inference: Candidate
    samples: tuple[Candidate, ...]
    reference: Candidate | None = None

    @property
    def u_sub(self) -> tuple[Candidate, ...]:
        return (self.inference, *self.samples)


def _argmax_score(cands) -> Candidate:
    """The first candidate with the highest score (ties keep the earlier one: the inference
    output before the samples, the samples before the reference)."""
    best = None
    for c in cands:
        if c.score is not None and (best is None or c.score > best.score):
            best = c
    return best


def speaker_choice(p: PathCandidates) -> Candidate:
    """r's own output (eq. 7): argmax S_r over U_sub; the inference output when it has no
    score (then nothing can be ranked against it). Samples without a score cannot be picked."""
    if p.inference.score is None:
        return p.inference
    return _argmax_score(p.u_sub)


def search_choice(p: PathCandidates) -> Candidate | None:
    """r*_search's output (eq. 9): argmax S_r over U_sub ∪ {u*}; None when the reference or
    the inference output has no score. The reference wins only with a strictly higher score."""
    if p.reference is None or p.reference.score is None or p.inference.score is None:
        return None
    return _argmax_score((*p.u_sub, p.reference))


def _est(values: list[float], seed: int, n_boot: int) -> dict:
    # Resampling paths; for a PPG the values are per-path differences, so each resample
    # recomputes both rho's on the same paths and takes their difference.
    return stats.bootstrap_mean_interval(values, n_boot=n_boot, seed=seed).as_dict()


def advise(difference: dict | None, search_available: bool) -> str:
    """The paper's Figure 1c from the interval of PPG_pragmatic - PPG_search."""
    if not search_available or difference is None:
        return "cannot compare: the search oracle is unavailable (see the note)"
    if not difference["n"] or difference["mean"] is None:
        return "no paths to compare yet"
    if difference["n"] < 2:
        return f"too few paths ({difference['n']}) to compare"
    if difference["low"] > 0:
        return ("PPG_pragmatic > PPG_search: improve the model of the listener "
                "(pragmatic capability)")
    if difference["high"] < 0:
        return ("PPG_search > PPG_pragmatic: improve the inference algorithm "
                "(search capability)")
    return "no clear difference (the interval of PPG_pragmatic - PPG_search covers 0)"


def analyse(paths: list[PathCandidates], metrics=tuple(k for k, _ in METRICS), *, n_boot: int = 2000,
            seed: int = 0) -> dict:
    """The capability analysis of one speaker over its paths (see the module docstring).

    A path counts when every candidate of U_sub has a valid annotation (r*_pragmatic needs
    them all) and, where the search oracle is used, its pick has one too. The search oracle
    is used on the paths where both the inference output and the reference have a score;
    when no counted path has them it is unavailable and its rows are None."""
    total = len(paths)

    def followed(c: Candidate) -> bool:
        return all(m in c.values for m in metrics)

    whole = [p for p in paths if all(followed(c) for c in p.u_sub)]
    with_scores = [p for p in whole if search_choice(p) is not None]
    search_available = bool(with_scores)
    skipped: dict[str, int] = {}
    if len(whole) < total:
        skipped["a candidate of U_sub has no valid annotation"] = total - len(whole)
    if search_available:
        counted = [p for p in with_scores if followed(search_choice(p))]
        if len(with_scores) < len(whole):
            skipped["no speaker score for the inference output or the reference"] = len(whole) - len(with_scores)
        if len(counted) < len(with_scores):
            skipped["the reference picked by r*_search has no valid annotation"] = len(with_scores) - len(counted)
    else:
        counted = whole
    unavailable: list[str] = []
    if not search_available:
        unavailable.append("r*_search and PPG_search: " + _search_reason(paths))

    out_metrics: dict[str, dict] = {}
    for m in metrics:
        r = [speaker_choice(p).values[m] for p in counted]
        infer = [p.inference.values[m] for p in counted]
        prag = [max(c.values[m] for c in p.u_sub) for p in counted]
        ref = [p.reference.values[m] for p in counted if p.reference is not None and followed(p.reference)]
        row = {"speaker_choice": _est(r, seed, n_boot), "inference": _est(infer, seed, n_boot),
               "pragmatic": _est(prag, seed, n_boot), "reference": _est(ref, seed, n_boot),
               "ppg_pragmatic": _est([b - a for a, b in zip(r, prag)], seed, n_boot),
               "search": None, "ppg_search": None, "difference": None}
        if search_available:
            srch = [search_choice(p).values[m] for p in counted]
            row["search"] = _est(srch, seed, n_boot)
            row["ppg_search"] = _est([b - a for a, b in zip(r, srch)], seed, n_boot)
            # PPG_pragmatic - PPG_search per path = rho(r*_pragmatic) - rho(r*_search).
            row["difference"] = _est([a - b for a, b in zip(prag, srch)], seed, n_boot)
        row["advice"] = advise(row["difference"], search_available)
        out_metrics[m] = row

    # gamma needs only the scores: every path with a scored inference output and samples.
    scored = [p for p in paths if p.inference.score is not None and p.samples
              and all(s.score is not None for s in p.samples)]
    wins = sum(p.inference.score > max(s.score for s in p.samples) for p in scored)
    gamma = stats.proportion(wins, len(scored)).as_dict() if scored else None
    if gamma is None:
        unavailable.append("gamma: " + _gamma_reason(paths))
    picked = sum(speaker_choice(p) is not p.inference for p in counted)
    return {"paths": total, "counted": len(counted), "skipped": skipped,
            "search_available": search_available, "unavailable": unavailable,
            "picked_sample": {"paths": len(counted), "k": picked,
                              "share": stats.proportion(picked, len(counted)).as_dict() if counted else None},
            "gamma": {"paths": len(scored), "k": wins, "share": gamma},
            "metrics": out_metrics}


def _search_reason(paths: list[PathCandidates]) -> str:
    if not paths:
        return "no paths"
    no_ref = sum(p.reference is None for p in paths)
    ref_unscored = sum(p.reference is not None and p.reference.score is None for p in paths)
    infer_unscored = sum(p.inference.score is None for p in paths)
    if no_ref == len(paths):
        return "the study has no human reference instructions"
    if ref_unscored + no_ref == len(paths):
        return ("the human references have no speaker score S_r(u*|e*), so the speaker cannot "
                "rank them against its candidates")
    if infer_unscored == len(paths):
        return "the inference outputs have no speaker score, so nothing can be ranked against them"
    return ("no path with speaker scores for both the inference output and the reference has "
            "every needed item followed yet")


def _gamma_reason(paths: list[PathCandidates]) -> str:
    if not paths:
        return "no paths"
    if all(p.inference.score is None for p in paths):
        return "the inference outputs have no speaker score"
    return "no path has speaker scores for the inference output and all of its samples"


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
        select(Item.id, Item.category, Item.cluster, ref["role"], ref["speaker_score"], ref["candidate"])
        .where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    info = {}
    for item_id, category, cluster, role, score, k in items:
        if role in ROLES:
            info[item_id] = (category, cluster, role, _number(score), k)
    if not info:
        return {}
    sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    keys = [k for k, _ in METRICS]
    for item_id, *values in session.connection().execute(
            select(Annotation.item_id, *[Annotation.scores[k] for k in keys]).where(valid)):
        if item_id not in info:
            continue
        for k, v in zip(keys, values):
            if (x := _number(v)) is not None:
                sums[item_id][k].append(x)

    def candidate(item_id) -> Candidate:
        _, _, role, score, k = info[item_id]
        means = {m: sum(v) / len(v) for m, v in sums.get(item_id, {}).items() if v}
        return Candidate(role=role, score=score, values=means, candidate=k if isinstance(k, int) else None)

    by_cluster: dict[str, list[int]] = defaultdict(list)
    for item_id, (_, cluster, *_rest) in info.items():
        by_cluster[cluster].append(item_id)
    out: dict[str, list[PathCandidates]] = defaultdict(list)
    for cluster in sorted(by_cluster):
        ids = by_cluster[cluster]
        refs = [i for i in ids if info[i][2] == "reference"]
        reference = candidate(refs[0]) if refs else None
        for i in ids:
            category, _, role, _, _ = info[i]
            if role != "inference":
                continue
            samples = sorted((candidate(j) for j in ids if info[j][2] == "sample"
                              and info[j][0] == category + SAMPLES_SUFFIX),
                             key=lambda c: (c.candidate is None, c.candidate or 0))
            out[category].append(PathCandidates(cluster, candidate(i), tuple(samples), reference))
    return dict(out)


# -- leaderboard tables ----------------------------------------------------------------------

_QUANTITIES = (
    ("speaker_choice", "ρ(r): the speaker's own choice, argmax S_r over U_sub"),
    ("inference", "Inference output (greedy/beam) as is"),
    ("search", "ρ(r*_search): argmax S_r over U_sub ∪ {human reference}"),
    ("pragmatic", "ρ(r*_pragmatic): the candidate of U_sub its followers did best on"),
    ("reference", "Human reference instruction"),
    ("ppg_search", "PPG_search = ρ(r*_search) − ρ(r)"),
    ("ppg_pragmatic", "PPG_pragmatic = ρ(r*_pragmatic) − ρ(r)"),
    ("difference", "PPG_pragmatic − PPG_search"),
)


def speaker_tables(speaker: str, result: dict, suffix: str = "") -> list[dict]:
    """The analysis of one speaker as leaderboard tables (app/kinds/base.py's format)."""
    metric_cols = [{"key": k, "label": label} for k, label in METRICS]
    rows = []
    for key, label in _QUANTITIES:
        row: dict[str, Any] = {"key": key, "quantity": label}
        for m, _ in METRICS:
            row[m] = result["metrics"][m][key]
        rows.append(row)
    counted = result["counted"]
    note = [f"Paths counted: {counted} of {result['paths']}."]
    for reason, n in result["skipped"].items():
        note.append(f"Left out: {n} (reason: {reason}).")
    note.append("A candidate's value is the mean of the metric over its valid annotations (not gold, "
                "not excluded); a row is the mean over the counted paths with a 95% bootstrap interval "
                "over paths (for a PPG, each resample recomputes both ρ's on the same paths). "
                "U_sub = {inference output} ∪ the N samples; the human reference row uses the counted "
                "paths whose reference has been followed.")
    if result["picked_sample"]["paths"]:
        ps = result["picked_sample"]
        note.append(f"The speaker's own score picked a sample over its inference output on {ps['k']} of "
                    f"{ps['paths']} counted paths.")
    for u in result["unavailable"]:
        note.append(f"Unavailable: {u}.")
    advice_rows = []
    for m, label in METRICS:
        r = result["metrics"][m]
        advice_rows.append({"metric": label, "ppg_search": r["ppg_search"], "ppg_pragmatic": r["ppg_pragmatic"],
                            "difference": r["difference"], "advice": r["advice"]})
    g = result["gamma"]
    ps = result["picked_sample"]
    check_rows = [
        {"key": "gamma", "check": "γ: S_r(inference output) > max S_r over the N samples "
                                  "(the paper's assumption, footnote 2; 0.7-0.9 there)",
         "paths": g["paths"], "share": g["share"],
         "remark": next((u.split(": ", 1)[1] for u in result["unavailable"] if u.startswith("gamma")), "")},
        {"key": "picked_sample", "check": "The speaker's own choice r is a sample, not the inference output",
         "paths": ps["paths"], "share": ps["share"], "remark": "" if ps["paths"] else "no counted paths yet"},
    ]
    return [
        {"key": f"nav_capability{suffix}", "title": f"Capability analysis of {speaker} (section 4.3)",
         "note": " ".join(note),
         "columns": [{"key": "quantity", "label": "Quantity"}, *metric_cols], "rows": rows,
         "speaker": speaker, "paths": result["paths"], "counted": counted},
        {"key": f"nav_capability_advice{suffix}", "title": f"What to improve in {speaker}",
         "note": ("Figure 1c of the paper: a large PPG_search and a small PPG_pragmatic => improve the "
                  "inference algorithm (search); a large PPG_pragmatic and a small PPG_search => improve "
                  "the model of the listener (pragmatic); no clear difference when the 95% interval of "
                  "PPG_pragmatic − PPG_search covers 0."),
         "columns": [{"key": "metric", "label": "Metric"}, {"key": "ppg_search", "label": "PPG_search"},
                     {"key": "ppg_pragmatic", "label": "PPG_pragmatic"},
                     {"key": "difference", "label": "PPG_pragmatic − PPG_search"},
                     {"key": "advice", "label": "Advice"}],
         "rows": advice_rows},
        {"key": f"nav_capability_scores{suffix}", "title": f"{speaker}'s own scores",
         "note": "Shares with 95% Wilson intervals.",
         "columns": [{"key": "check", "label": "Check"}, {"key": "paths", "label": "Paths"},
                     {"key": "share", "label": "Share"}, {"key": "remark", "label": "Remark"}],
         "rows": check_rows},
    ]


def tables(session: Session, study: Study) -> list[dict]:
    """The capability tables of every speaker with capability items (none otherwise)."""
    by_speaker = load_paths(session, study)
    listed = [s for s in (study.kind_settings or {}).get("speakers", []) if s in by_speaker]
    order = listed + sorted(s for s in by_speaker if s not in listed)
    out: list[dict] = []
    for n, speaker in enumerate(order):
        out.extend(speaker_tables(speaker, analyse(by_speaker[speaker]), "" if n == 0 else f"_{n + 1}"))
    return out


def dumps(data: dict) -> str:
    """A capability file's text (one path per line, readable in a diff)."""
    lines = ",\n  ".join(json.dumps(p, ensure_ascii=False) for p in data["paths"])
    return f'{{"speaker": {json.dumps(data["speaker"], ensure_ascii=False)},\n "paths": [\n  {lines}\n ]}}\n'
