"""Navigation file formats: R2R paths, R2R leaderboard predictions, PanGEA pose traces and
the coop speaker outputs, parsed into small frozen dataclasses.

Every parser takes a file path (str or Path), the file's bytes, or (JSON formats) the already
parsed object, and refuses bad input with an InputError naming the record (instr_id, key,
path_id or line) and the field. The formats are described in docs/kinds/navigation.md.

PanGEA pose traces: `exmat` is the camera's pose (camera-to-world), a row-major 4x4 matrix in
the viewer's three.js world, which is y-up: three.js (x, y, z) = Matterport (x, z, -y). Its
translation column is the viewpoint's position and the camera looks along its local -z axis,
so the view direction in Matterport coordinates is f = (-m[0][2], m[2][2], -m[1][2]), and

    heading = atan2(f_x, f_y) mod 2*pi      (clockwise from +y, the simulator's convention)
    elevation = atan2(f_z, hypot(f_x, f_y))

Checked on the released trace: every frame's translation is its viewpoint's connectivity
position to 0.1 mm; the first frame's heading is the task's start heading (1.5789 rad, to
1e-4); and just before each move the camera heading and elevation equal those from the
viewpoint to the next one, to 1e-3 rad (PanGEA turns the camera to the target before moving).

Trace times: PanGEA versions differ (the released trace is in seconds; newer code writes
milliseconds). With time_unit="auto" the unit is read from the median positive interval
between frames: animation frames come every 1-1000 ms, so a median below 1.0 means seconds and
otherwise milliseconds. A trace with no positive interval (one frame, or all at one time)
cannot tell and is taken as milliseconds; pass time_unit="s" or "ms" to decide. Times are
converted to milliseconds, not shifted (the released trace starts at 0).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from app import jsonsafe
from app.errors import InputError
from app.textfiles import numbered_lines, refuse_many_values, refuse_wide_text, utf8

Source = str | Path | bytes | bytearray


# -- reading ----------------------------------------------------------------------------------


def _read_bytes(source: Source, what: str) -> bytes:
    if isinstance(source, (str, Path)):
        try:
            return Path(source).read_bytes()
        except OSError as e:
            raise InputError(f"cannot read {what} file {str(source)!r}: {e.strerror or e}", field=what) from None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    raise TypeError(f"{what}: expected a path or bytes, got {type(source).__name__}")


def read_json(source: Source | list | dict, what: str) -> Any:
    """Parsed JSON from a file path, raw bytes or an already parsed list/dict."""
    if isinstance(source, (list, dict)):
        return source
    raw = _read_bytes(source, what)
    if json.detect_encoding(raw).startswith("utf-8"):  # json.loads decodes it whole
        refuse_wide_text(raw, what)
    try:
        return jsonsafe.loads(raw)
    except UnicodeDecodeError:
        raise InputError(f"{what} is not UTF-8 text", field=what) from None
    except json.JSONDecodeError as e:
        raise InputError(f"{what} is not valid JSON: {e.msg} (column {e.colno})", line=e.lineno, field=what) from None


def objects(data: list, label: Callable[[int], str], field: str) -> Iterator[tuple[int, dict[str, Any], str]]:
    """Each record of a JSON array with its index and label (`label(index)`), refusing one
    that is not an object as `field`."""
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise InputError(f"{label(i)}: must be an object", field=field)
        yield i, rec, label(i)


def records_by_id(
    data: list, label: Callable[[int], str], field: str, key: str, read: Callable[[dict, str], str] | None = None
) -> Iterator[tuple[int, dict[str, Any], str, str]]:
    """Each record of a JSON array (as `objects`) with its id, `key`, and its label naming the
    id. The id is read by `read(record, label)` (default: a non-empty string) and refused when
    an earlier record has it."""
    seen: dict[str, int] = {}
    for i, rec, where in objects(data, label, field):
        rid = read(rec, where) if read else cast(str, _str(rec, key, where))
        where = f"{where} ({key} {rid})"
        if rid in seen:
            raise InputError(f"{where}: {key} repeats record {seen[rid]}", field=key)
        seen[rid] = i
        yield i, rec, rid, where


def is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _str(rec: dict, key: str, label: str, *, optional: bool = False) -> str | None:
    v = rec.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, str) or not v:
        raise InputError(f"{label}: {key} must be a non-empty string", field=key)
    return v


def _num(rec: dict, key: str, label: str, *, optional: bool = False) -> float | None:
    v = rec.get(key)
    if v is None and optional:
        return None
    if not is_number(v):
        raise InputError(f"{label}: {key} must be a finite number", field=key)
    return float(v)


def _viewpoints(rec: dict, key: str, label: str) -> tuple[str, ...]:
    v = rec.get(key)
    if not isinstance(v, list) or not v:
        raise InputError(f"{label}: {key} must be a non-empty list of viewpoint ids", field=key)
    for k, x in enumerate(v):
        if not isinstance(x, str) or not x:
            raise InputError(f"{label}: {key}[{k}] must be a viewpoint id (a non-empty string)", field=key)
    return tuple(v)


def _texts(rec: dict, key: str, label: str) -> tuple[str, ...]:
    v = rec.get(key)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise InputError(f"{label}: {key} must be a list of strings", field=key)
    return tuple(v)


def _path_id(rec: dict, label: str) -> str:
    v = rec.get("path_id")
    if isinstance(v, bool) or not isinstance(v, (int, str)) or v == "":
        raise InputError(f"{label}: path_id must be an integer or a non-empty string", field="path_id")
    return str(v)


# -- R2R --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class R2RPath:
    """One R2R path with its human instructions; instruction k's id is f"{path_id}_{k}"."""

    path_id: str
    scan: str
    path: tuple[str, ...]
    heading: float  # start heading, radians clockwise from +y
    distance: float | None  # the path's length in metres as released (rounded to cm)
    instructions: tuple[str, ...]

    def instr_ids(self) -> list[str]:
        return [f"{self.path_id}_{k}" for k in range(len(self.instructions))]


@dataclass(frozen=True)
class R2RInstruction:
    instr_id: str
    k: int
    text: str
    path: R2RPath


def parse_r2r(source: Source | list) -> list[R2RPath]:
    """An R2R file: a list of {distance, scan, path_id, path, heading, instructions}."""
    data = read_json(source, "references")
    if not isinstance(data, list):
        raise InputError("an R2R file is a JSON array of paths", field="references")
    out: list[R2RPath] = []
    for _, rec, pid, label in records_by_id(data, lambda i: f"R2R record {i}", "references", "path_id", _path_id):
        out.append(
            R2RPath(
                path_id=pid,
                scan=_str(rec, "scan", label),
                path=_viewpoints(rec, "path", label),
                heading=_num(rec, "heading", label),
                distance=_num(rec, "distance", label, optional=True),
                instructions=_texts(rec, "instructions", label),
            )
        )
    return out


def r2r_instructions(paths: list[R2RPath]) -> dict[str, R2RInstruction]:
    """instr_id -> instruction, for every instruction of every path."""
    return {
        f"{p.path_id}_{k}": R2RInstruction(f"{p.path_id}_{k}", k, text, p)
        for p in paths
        for k, text in enumerate(p.instructions)
    }


# -- R2R leaderboard predictions ---------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """An agent's (or a person's) trajectory for one instruction."""

    instr_id: str
    trajectory: tuple[tuple[str, float | None, float | None], ...]  # (viewpoint, heading, elevation)

    @property
    def viewpoints(self) -> list[str]:
        return [step[0] for step in self.trajectory]


def _instr_id(rec: dict, label: str) -> str:
    v = rec.get("instr_id")
    if not isinstance(v, str) or not v:
        raise InputError(f'{label}: instr_id must be a non-empty string like "<path_id>_<k>"', field="instr_id")
    return v


def parse_predictions(source: Source | list) -> dict[str, Prediction]:
    """The R2R leaderboard format: [{"instr_id": "<path_id>_<k>", "trajectory": [[viewpoint,
    heading, elevation], ...]}, ...]. A step may also be a bare viewpoint id (heading and
    elevation None). Returned in file order; an instr_id may appear once."""
    data = read_json(source, "predictions")
    if not isinstance(data, list):
        raise InputError("a predictions file is a JSON array of {instr_id, trajectory}", field="predictions")
    out: dict[str, Prediction] = {}
    for _, rec, instr_id, label in records_by_id(
        data, lambda i: f"prediction {i}", "predictions", "instr_id", _instr_id
    ):
        traj = rec.get("trajectory")
        if not isinstance(traj, list) or not traj:
            raise InputError(f"{label}: trajectory must be a non-empty list", field="trajectory")
        steps = []
        for k, step in enumerate(traj):
            if isinstance(step, str) and step:
                steps.append((step, None, None))
                continue
            if (
                not isinstance(step, list)
                or len(step) != 3
                or not isinstance(step[0], str)
                or not step[0]
                or not is_number(step[1])
                or not is_number(step[2])
            ):
                raise InputError(
                    f"{label}: trajectory[{k}] must be [viewpoint, heading, elevation] or a viewpoint id",
                    field="trajectory",
                )
            steps.append((step[0], float(step[1]), float(step[2])))
        out[instr_id] = Prediction(instr_id, tuple(steps))
    return out


def write_predictions(predictions: dict[str, list[str]] | list[Prediction]) -> bytes:
    """The leaderboard format for {instr_id: viewpoints} (heading, elevation 0) or Predictions."""
    if isinstance(predictions, dict):
        rows = [{"instr_id": k, "trajectory": [[v, 0.0, 0.0] for v in vps]} for k, vps in predictions.items()]
    else:
        rows = [
            {"instr_id": p.instr_id, "trajectory": [[v, h or 0.0, e or 0.0] for v, h, e in p.trajectory]}
            for p in predictions
        ]
    return json.dumps(rows).encode()


# -- PanGEA pose traces -------------------------------------------------------------------------


@dataclass(frozen=True)
class PoseFrame:
    viewpoint: str
    heading: float  # radians clockwise from +y, [0, 2*pi)
    elevation: float  # radians above the horizon
    time_ms: float


@dataclass(frozen=True)
class PoseTrace:
    frames: tuple[PoseFrame, ...]
    time_unit: Literal["s", "ms"]  # the unit the file was written in

    @property
    def path(self) -> list[str]:
        """The viewpoint path: run-length de-duplication of the frames' viewpoints."""
        out: list[str] = []
        for f in self.frames:
            if not out or out[-1] != f.viewpoint:
                out.append(f.viewpoint)
        return out

    @property
    def duration_ms(self) -> float:
        return self.frames[-1].time_ms - self.frames[0].time_ms


def heading_elevation_from_exmat(exmat: list[float]) -> tuple[float, float]:
    """Camera heading and elevation (simulator convention) from a PanGEA `exmat` (see module doc)."""
    fx, fy, fz = -exmat[2], exmat[10], -exmat[6]
    heading = math.atan2(fx, fy) % (2 * math.pi)
    if heading == 2 * math.pi:
        heading = 0.0
    return heading, math.atan2(fz, math.hypot(fx, fy)) + 0.0  # + 0.0: no -0.0 in output


def position_from_exmat(exmat: list[float]) -> tuple[float, float, float]:
    """Camera position in Matterport coordinates (z up) from a PanGEA `exmat`."""
    return exmat[3], -exmat[11], exmat[7]


def _jsonl_lines(raw: bytes, what: str) -> Iterator[tuple[int, dict]]:
    try:
        raw = utf8(raw)  # checked as bytes, each line decoded as it is read
    except UnicodeDecodeError:
        raise InputError(f"{what} is not UTF-8 text", field=what) from None
    for n, line in numbered_lines(refuse_many_values(raw, what)):
        if not line.strip():
            continue
        try:
            rec = jsonsafe.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"not valid JSON: {e.msg}", line=n, field=what) from None
        if not isinstance(rec, dict):
            raise InputError("each line must be a JSON object", line=n, field=what)
        yield n, rec


def parse_pangea_trace(source: Source, time_unit: Literal["auto", "s", "ms"] = "auto") -> PoseTrace:
    """A PanGEA pose trace (JSONL, one {id, exmat[16], inmat[16], time} per animation frame).

    `inmat` (the projection) is not needed and not checked. Times must not decrease.
    """
    if time_unit not in ("auto", "s", "ms"):
        raise ValueError("time_unit must be 'auto', 's' or 'ms'")
    raw = _read_bytes(source, "trace")
    rows: list[tuple[str, float, float, float]] = []
    last_time = -math.inf
    for n, rec in _jsonl_lines(raw, "trace"):
        vid = rec.get("id")
        if not isinstance(vid, str) or not vid:
            raise InputError("id must be a viewpoint id (a non-empty string)", line=n, field="id")
        exmat = rec.get("exmat")
        if not isinstance(exmat, list) or len(exmat) != 16 or not all(is_number(x) for x in exmat):
            raise InputError("exmat must be 16 finite numbers (a row-major 4x4 camera pose)", line=n, field="exmat")
        if math.hypot(exmat[2], exmat[6], exmat[10]) < 1e-6:
            raise InputError("exmat has no view direction (its third column is zero)", line=n, field="exmat")
        t = rec.get("time")
        if not is_number(t):
            raise InputError("time must be a finite number", line=n, field="time")
        if t < last_time:
            raise InputError(f"time goes back from {last_time} to {t}", line=n, field="time")
        last_time = t
        heading, elevation = heading_elevation_from_exmat(exmat)
        rows.append((vid, heading, elevation, float(t)))
    if not rows:
        raise InputError("the trace has no frames", field="trace")
    unit = time_unit if time_unit != "auto" else detect_time_unit([r[3] for r in rows])
    scale = 1000.0 if unit == "s" else 1.0
    frames = tuple(PoseFrame(v, h, e, t * scale) for v, h, e, t in rows)
    return PoseTrace(frames, unit)


def detect_time_unit(times: list[float]) -> Literal["s", "ms"]:
    """ "s" when the median positive interval between frames is below 1.0, else "ms"."""
    steps = [b - a for a, b in zip(times, times[1:]) if b > a]
    if not steps:
        return "ms"
    return "s" if statistics.median(steps) < 1.0 else "ms"


# -- coop speaker outputs --------------------------------------------------------------------


QC_KEY = "0"  # in the greedy file: a human reference instruction, the quality-control episode
_CANDIDATE_KEY = re.compile(r"^(.+)_(\d+)$")


@dataclass(frozen=True)
class SpeakerOutput:
    """A speaker's instruction for an R2R path, with the path's human reference instructions."""

    key: str
    instr_id: str
    path_id: str
    scan: str
    path: tuple[str, ...]
    heading: float
    distance: float | None
    generated_instr: str
    instructions: tuple[str, ...]  # human references (lower-cased and tokenised in coop)
    sum_log_prob: float | None = None  # generated_instr_sum_log_prob, where the file has it
    avg_log_prob: float | None = None
    model: str | None = None
    candidate: int | None = None  # index among a path's sampled candidates


@dataclass(frozen=True)
class GreedyOutputs:
    qc_episode: SpeakerOutput  # key "0"
    outputs: tuple[SpeakerOutput, ...]  # the model's instructions, in file order


def _speaker_output(key: str, rec: object, candidate: int | None = None) -> SpeakerOutput:
    label = f"key {key!r}"
    if not isinstance(rec, dict):
        raise InputError(f"{label}: must be an object", field=key)
    pid = _path_id(rec, label)
    return SpeakerOutput(
        key=key,
        instr_id=_str(rec, "instr_id", label, optional=True) or key,
        path_id=pid,
        scan=_str(rec, "scan", label),
        path=_viewpoints(rec, "path", label),
        heading=_num(rec, "heading", label),
        distance=_num(rec, "distance", label, optional=True),
        generated_instr=_generated(rec, label),
        instructions=_texts(rec, "instructions", label),
        sum_log_prob=_num(rec, "generated_instr_sum_log_prob", label, optional=True),
        avg_log_prob=_num(rec, "generated_instr_avg_log_prob", label, optional=True),
        model=_str(rec, "model", label, optional=True),
        candidate=candidate,
    )


def _generated(rec: dict, label: str) -> str:
    v = rec.get("generated_instr")
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"{label}: generated_instr must be a non-empty string", field="generated_instr")
    return v


def _object(source: Source | dict, what: str) -> dict:
    data = read_json(source, what)
    if not isinstance(data, dict):
        raise InputError(f"a coop {what} file is a JSON object keyed by instruction", field=what)
    return data


def parse_coop_greedy(source: Source | dict) -> GreedyOutputs:
    """anno_speaker-*_greedy.json: {key: speaker output}; key "0" is the human-written QC episode."""
    data = _object(source, "greedy")
    if QC_KEY not in data:
        raise InputError(f"no key {QC_KEY!r} (the quality-control episode)", field=QC_KEY)
    outputs = {key: _speaker_output(key, rec) for key, rec in data.items()}
    qc = outputs.pop(QC_KEY)
    return GreedyOutputs(qc, tuple(outputs.values()))


def parse_coop_candidates(source: Source | dict) -> dict[str, tuple[SpeakerOutput, ...]]:
    """speaker_*_sampled_*.json: {"<path_id>_<n>": candidate} -> path_id -> candidates 0..N-1.

    A key's prefix must be its record's path_id, and each path's indices must run 0..N-1.
    """
    data = _object(source, "candidates")
    by_path: dict[str, dict[int, SpeakerOutput]] = {}
    for key, rec in data.items():
        m = _CANDIDATE_KEY.match(key)
        if not m:
            raise InputError(f'key {key!r}: candidate keys look like "<path_id>_<n>"', field=key)
        out = _speaker_output(key, rec, candidate=int(m.group(2)))
        if out.path_id != m.group(1):
            raise InputError(f"key {key!r}: path_id {out.path_id} does not match the key", field="path_id")
        by_path.setdefault(out.path_id, {})[out.candidate] = out
    result: dict[str, tuple[SpeakerOutput, ...]] = {}
    for pid, cands in by_path.items():
        if sorted(cands) != list(range(len(cands))):
            missing = sorted(set(range(max(cands) + 1)) - set(cands))
            raise InputError(f"path_id {pid}: candidate indices skip {missing}", field=f"{pid}_{missing[0]}")
        result[pid] = tuple(cands[k] for k in range(len(cands)))
    return result
