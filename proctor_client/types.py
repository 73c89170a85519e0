"""What the client's methods return: plain dataclasses over the API's JSON. Each keeps the
whole answer in `raw`, so a field the server adds later is never out of reach."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

# A job's states; the last three are final.
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL_STATES = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class Study:
    id: int
    slug: str
    title: str
    kind: str
    state: str
    entry_path: str
    annotations_per_item: int
    bundle_size: int
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict) -> Study:
        return cls(
            id=d["id"],
            slug=d["slug"],
            title=d["title"],
            kind=d["kind"],
            state=d["state"],
            entry_path=d["entry_path"],
            annotations_per_item=d["annotations_per_item"],
            bundle_size=d["bundle_size"],
            raw=d,
        )


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    formats: list[str]
    options: list[str]
    artifact_roles: list[str]
    jobs: list[str]

    @classmethod
    def from_json(cls, d: dict) -> Kind:
        return cls(
            name=d["name"],
            title=d["title"],
            formats=list(d["formats"]),
            options=list(d["options"]),
            artifact_roles=list(d["artifact_roles"]),
            jobs=list(d["jobs"]),
        )


@dataclass(frozen=True)
class Agent:
    id: int
    name: str
    kind: str
    version: str

    @classmethod
    def from_json(cls, d: dict) -> Agent:
        return cls(id=d["id"], name=d["name"], kind=d["kind"], version=d["version"])


@dataclass(frozen=True)
class Artifact:
    """One uploaded model of an agent: `state` is pending until a worker has validated it,
    then valid or invalid (`verdict` says which check failed)."""

    id: int
    agent_id: int
    version: int
    role: str
    format: str
    state: str
    verdict: Any
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict) -> Artifact:
        return cls(
            id=d["id"],
            agent_id=d["agent_id"],
            version=d["version"],
            role=d["role"],
            format=d["format"],
            state=d["state"],
            verdict=d.get("verdict"),
            raw=d,
        )


@dataclass(frozen=True)
class Job:
    """A background job: an export, a generation run, a validation, a tally. `files` maps an
    export's file names to their download links (relative to the server, or presigned)."""

    id: int
    task: str
    state: str
    done: int
    total: int
    log: str
    study_id: int | None = None
    files: dict[str, str] = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_json(cls, d: dict) -> Job:
        return cls(
            id=d["id"],
            task=d["task"],
            state=d["state"],
            done=d.get("done", 0),
            total=d.get("total", 0),
            log=d.get("log", ""),
            study_id=d.get("study_id"),
            files=dict(d.get("files") or {}),
            raw=d,
        )


@dataclass(frozen=True)
class GenerationRun:
    """An agent run (GET /api/v1/runs/{id}): `id` is the run's, `job_id` the job that carries
    it (watch it with Client.watch_job); `raw["detail"]` says what it stored, in its kind's words."""

    kind: str
    id: int
    job_id: int
    state: str
    raw: dict = field(repr=False, compare=False)


@dataclass(frozen=True)
class Estimate:
    """An estimate with its 95% interval, over n units, and the interval's method."""

    n: int
    mean: float | None
    low: float | None
    high: float | None
    method: str = ""

    @classmethod
    def from_json(cls, d: dict | None) -> Estimate | None:
        if not isinstance(d, dict) or "mean" not in d:
            return None
        return cls(
            n=d.get("n", 0), mean=d.get("mean"), low=d.get("low"), high=d.get("high"), method=str(d.get("method") or "")
        )


@dataclass(frozen=True)
class LeaderboardRow:
    type: str  # agent, annotator, majority, or a kind's baseline
    name: str
    answered: int | None
    accuracy: Estimate | None
    by_category: dict[str, Estimate]
    consistency: Estimate | None
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict) -> LeaderboardRow:
        cats = {k: e for k, v in (d.get("by_category") or {}).items() if (e := Estimate.from_json(v))}
        return cls(
            type=d.get("type", ""),
            name=str(d.get("name", "")),
            answered=d.get("answered"),
            accuracy=Estimate.from_json(d.get("accuracy")),
            by_category=cats,
            consistency=Estimate.from_json(d.get("consistency")),
            raw=d,
        )


CSV_FIELDS = ("type", "name", "metric", "category", "n", "mean", "low", "high", "method")


@dataclass(frozen=True)
class Leaderboard:
    study: str
    kind: str
    items: int
    rows: list[LeaderboardRow]
    agreement: dict
    raw: dict = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict) -> Leaderboard:
        return cls(
            study=d["study"],
            kind=d["kind"],
            items=d.get("items", 0),
            rows=[LeaderboardRow.from_json(r) for r in d.get("rows", [])],
            agreement=d.get("agreement") or {},
            raw=d,
        )

    def to_csv(self) -> str:
        """One line per row, metric and category (the columns of an export's scores.csv)."""
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(CSV_FIELDS)
        for r in self.rows:
            lines = [("accuracy", "all", r.accuracy)]
            lines += [("accuracy", cat, est) for cat, est in sorted(r.by_category.items())]
            lines += [("consistency", "all", r.consistency)]
            for metric, cat, est in lines:
                if est is not None:
                    w.writerow(
                        [r.type, r.name, metric, cat, est.n, _num(est.mean), _num(est.low), _num(est.high), est.method]
                    )
        return out.getvalue()


def _num(v) -> str:
    return "" if v is None else repr(float(v))
