"""Pose traces in and out, and model listeners' paths in.

- Export: a follower's pose trace (Annotation.response["trace"], rows [viewpoint, heading,
  elevation, t_ms]) as PanGEA JSONL, one {id, exmat, inmat, time} per pose. `exmat` is built
  so that `formats.parse_pangea_trace` reads back the same path, headings and elevations
  (the inverse of `formats.heading_elevation_from_exmat` / `position_from_exmat`), with the
  viewpoint's connectivity position as its translation. Times are written in milliseconds.
- Listeners: `parse_listener_outputs` reads a model listener's paths for a study's
  instructions (R2R leaderboard predictions, or {external_id: {"path"|"trace"}}) and checks
  each against the item's building and start.
- `run_trace`: the body of `proctor navigation trace` (a trace file reduced to its path, scored
  against a PanGEA task's path when args.json is given).

See docs/kinds/navigation-listeners.md.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TextIO

from app.errors import InputError
from app.kinds.navigation import formats
from app.kinds.navigation.graph import CONNECTIVITY_SUFFIX, NavGraph, load_connectivity
from app.kinds.navigation.metrics import dedupe, score_trajectory

MAX_LISTENER_PATH = 500  # viewpoints in one listener path, after de-duplication
MAX_LISTENER_TRACE = 20000  # pose records in one listener trace


# -- exmat / inmat ------------------------------------------------------------------------------


def exmat_for(position: Sequence[float], heading: float, elevation: float) -> list[float]:
    """A PanGEA camera pose (camera-to-world, row-major, three.js y-up world) at a Matterport
    position (x, y, z; z up) looking along heading (clockwise from +y) and elevation.

    three.js (x, y, z) = Matterport (x, z, -y). The camera looks along its local -z; its
    local x stays horizontal (no roll), so the heading survives even when looking straight up.
    """
    sh, ch = math.sin(heading), math.cos(heading)
    se, ce = math.sin(elevation), math.cos(elevation)
    # View direction f in three.js axes; the camera's z axis is -f.
    zx, zy, zz = -sh * ce, -se, ch * ce
    xx, xy, xz = ch, 0.0, sh  # right: horizontal, perpendicular to the heading
    # up = z x x
    yx, yy, yz = zy * xz - zz * xy, zz * xx - zx * xz, zx * xy - zy * xx
    px, py, pz = (float(c) for c in position)
    return [xx, yx, zx, px, xy, yy, zy, pz, xz, yz, zz, -py, 0.0, 0.0, 0.0, 1.0]


def perspective_inmat(
    fov_x: float = math.pi / 2, aspect: float = 4 / 3, near: float = 0.1, far: float = 1000.0
) -> list[float]:
    """A three.js-style projection (row-major) for a horizontal field of view. Readers of
    PanGEA traces (ours included) do not use it; it is there so the records are complete.
    The default is the follower viewer's 90 degrees across a 4:3 view."""
    fx = 1.0 / math.tan(fov_x / 2)
    fy = fx * aspect
    a, b = -(far + near) / (far - near), -2 * far * near / (far - near)
    return [fx, 0.0, 0.0, 0.0, 0.0, fy, 0.0, 0.0, 0.0, 0.0, a, b, 0.0, 0.0, -1.0, 0.0]


INMAT = perspective_inmat()


# -- export ------------------------------------------------------------------------------------


def trace_records(graph: NavGraph, trace: Sequence[Sequence]) -> list[dict]:
    """PanGEA records for trace rows [viewpoint, heading, elevation, t_ms]; every viewpoint
    must be in the building (InputError naming the row, field trace)."""
    out = []
    for k, row in enumerate(trace):
        if len(row) != 4:
            raise InputError(f"trace[{k}] must be [viewpoint, heading, elevation, t_ms]", field="trace")
        vp, heading, elevation, t = row
        if vp not in graph:
            raise InputError(f"trace[{k}] names viewpoint {vp!r}, not in building {graph.scan}", field="trace")
        pos = graph.position(vp)
        out.append(
            {
                "id": vp,
                "exmat": exmat_for(pos, float(heading), float(elevation)),
                "inmat": list(INMAT),
                "time": float(t),
            }
        )
    return out


def to_jsonl(records: Sequence[dict]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


def export_trace(graph: NavGraph, trace: Sequence[Sequence]) -> bytes:
    """A stored pose trace as PanGEA JSONL (times in milliseconds)."""
    return to_jsonl(trace_records(graph, trace))


def trace_rows(trace: formats.PoseTrace) -> list[list]:
    """A parsed PanGEA trace in the follower page's shape: [viewpoint, heading, elevation, t_ms]."""
    return [[f.viewpoint, f.heading, f.elevation, f.time_ms] for f in trace.frames]


# -- model listeners' paths ----------------------------------------------------------------------


def _relabel(e: InputError, label: str) -> InputError:
    return InputError(f"{label}: {e.message}", field=e.field)


def _records_trace(records: object, label: str, time_unit: str) -> formats.PoseTrace:
    """A trace given as a list of PanGEA records (one JSON object per pose)."""
    if not isinstance(records, list) or not records:
        raise InputError(f"{label}: trace must be a non-empty list of PanGEA records", field="trace")
    if len(records) > MAX_LISTENER_TRACE:
        raise InputError(f"{label}: trace has {len(records)} records, at most {MAX_LISTENER_TRACE}", field="trace")
    for k, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{label}: trace[{k}] must be an object {{id, exmat, inmat, time}}", field="trace")
    if time_unit not in ("auto", "s", "ms"):
        raise InputError(f"{label}: time_unit must be auto, s or ms", field="time_unit")
    try:
        return formats.parse_pangea_trace(to_jsonl(records), time_unit=time_unit)
    except InputError as e:
        where = f"trace[{e.line - 1}]" if e.line is not None else "trace"
        raise InputError(f"{label}: {where}: {e.message}", field=e.field) from None


def _path_list(value: object, label: str, field: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{label}: {field} must be a non-empty list of viewpoint ids", field=field)
    for k, v in enumerate(value):
        if not isinstance(v, str) or not v:
            raise InputError(f"{label}: {field}[{k}] must be a viewpoint id (a non-empty string)", field=field)
    return value


def check_listener_path(graph: NavGraph, start: str, path: Sequence[str], label: str, field: str) -> None:
    """A listener's path must start at the instruction's start and stay in its building,
    within the start's connected component. Steps need not be single edges (listeners from
    other simulators may skip viewpoints), as for `proctor navigation score`."""
    if len(path) > MAX_LISTENER_PATH:
        raise InputError(f"{label}: {field} has {len(path)} viewpoints, at most {MAX_LISTENER_PATH}", field=field)
    for k, v in enumerate(path):
        if v not in graph:
            raise InputError(f"{label}: {field}[{k}] {v!r} is not a viewpoint of building {graph.scan}", field=field)
    if path[0] != start:
        raise InputError(
            f"{label}: the path starts at {path[0]!r}, not at the instruction's start {start!r}", field=field
        )
    home = graph.components[graph.index[start]]
    for k, v in enumerate(path):
        if graph.components[graph.index[v]] != home:
            raise InputError(f"{label}: {field}[{k}] {v!r} cannot be reached from the start {start!r}", field=field)


def parse_listener_outputs(
    data: bytes | list | dict, known_ids: set[str], payloads: Mapping[str, dict] | None, get_graph
) -> dict[str, dict]:
    """A model listener's paths for a study's instructions -> {external_id: response}.

    Two shapes (JSON):
    - the R2R leaderboard predictions: [{"instr_id": external id, "trajectory": [[viewpoint,
      heading, elevation] or viewpoint, ...]}, ...];
    - an object {external_id: {"path": [viewpoints]}} or {external_id: {"trace": [PanGEA
      records], "time_unit"?: "auto"|"s"|"ms"}}.

    The response is {"path": de-duplicated viewpoints} (plus "trace" rows [viewpoint,
    heading, elevation, t_ms] for a trace), which is what the kind's scorer reads.
    `payloads` (external id -> item payload) gives each instruction's building and start;
    `get_graph(scan)` loads a building. InputError names the instr_id/key and the field.
    """
    if isinstance(data, (bytes, bytearray)) and data[:2] == b"\x1f\x8b":  # a gzipped upload
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"the gzip file is truncated or corrupt ({e})", field="outputs") from None
    raw = formats.read_json(data, "outputs")
    found: dict[str, tuple[str, str, dict]] = {}  # external id -> (label, field, response)
    if isinstance(raw, list):
        for instr_id, pred in formats.parse_predictions(raw).items():
            label = f"instr_id {instr_id}"
            if instr_id not in known_ids:
                raise InputError(f"{label}: no such instruction in this study", field="instr_id")
            found[instr_id] = (label, "trajectory", {"path": dedupe(pred.viewpoints)})
    elif isinstance(raw, dict):
        for key, rec in raw.items():
            label = f"key {key!r}"
            if key not in known_ids:
                raise InputError(f"{label}: no such instruction in this study", field="key")
            if not isinstance(rec, dict) or ("path" in rec) == ("trace" in rec):
                raise InputError(f'{label}: must be an object with either "path" or "trace"', field="key")
            if "path" in rec:
                found[key] = (label, "path", {"path": dedupe(_path_list(rec["path"], label, "path"))})
            else:
                trace = _records_trace(rec["trace"], label, rec.get("time_unit", "auto"))
                found[key] = (label, "trace", {"path": trace.path, "trace": trace_rows(trace)})
    else:
        raise InputError(
            "listener outputs are a JSON array of R2R predictions or an object keyed by instruction id", field="outputs"
        )
    graphs: dict[str, NavGraph] = {}  # per scan, for this upload
    for ext, (label, field, response) in found.items():
        payload = (payloads or {}).get(ext)
        if payload is None:
            continue
        scan = payload["scan"]
        if scan not in graphs:
            try:
                graphs[scan] = get_graph(scan)
            except InputError as e:
                raise _relabel(e, label) from None
        check_listener_path(graphs[scan], payload["start"], response["path"], label, field)
    return {ext: response for ext, (_, _, response) in found.items()}


# -- proctor navigation trace ----------------------------------------------------------------------


def _task(args_path: str | Path) -> dict:
    """A PanGEA task (args.json): {scan, path, heading?, ...}."""
    args = formats.read_json(Path(args_path), "args")
    if not isinstance(args, dict):
        raise InputError("args.json must be a JSON object {scan, path, ...}", field="args")
    if not isinstance(args.get("scan"), str) or not args["scan"]:
        raise InputError("args.json: scan must be a non-empty string", field="scan")
    _path_list(args.get("path"), "args.json", "path")
    if args.get("heading") is not None and not formats.is_number(args["heading"]):
        raise InputError("args.json: heading must be a number", field="heading")
    return args


def find_scan(connectivity_dir: str | Path, viewpoint: str) -> str | None:
    """The building whose connectivity file names the viewpoint (a text search; no graph is
    built for the buildings that do not)."""
    needle = json.dumps(viewpoint).encode()
    for f in sorted(Path(connectivity_dir).glob(f"*{CONNECTIVITY_SUFFIX}")):
        if needle in f.read_bytes():
            return f.name[: -len(CONNECTIVITY_SUFFIX)]
    return None


def _angle_diff(a: float, b: float) -> float:
    return abs((a - b + math.pi) % (2 * math.pi) - math.pi)


def summarize_trace(
    trace_path: str | Path,
    connectivity_dir: str | Path,
    args_path: str | Path | None = None,
    time_unit: Literal["auto", "s", "ms"] = "auto",
) -> dict:
    """{"scan", "path", "frames", "duration_ms", "time_unit", "path_length", "reference",
    "start_heading_error", "scores"}; the last three are None without args.json."""
    trace = formats.parse_pangea_trace(Path(trace_path), time_unit=time_unit)
    path = trace.path
    args = _task(args_path) if args_path is not None else None
    scan = args["scan"] if args else find_scan(connectivity_dir, path[0])
    if scan is None:
        raise InputError(f"no connectivity file in {str(connectivity_dir)!r} has viewpoint {path[0]!r}", field="id")
    conn = Path(connectivity_dir) / f"{scan}{CONNECTIVITY_SUFFIX}"
    if not conn.exists():
        raise InputError(f"scan {scan} has no connectivity file in {str(connectivity_dir)!r}", field="scan")
    graph = load_connectivity(conn, scan=scan)
    idx = graph.indices(path, field="id")
    out = {
        "scan": scan,
        "path": path,
        "frames": len(trace.frames),
        "duration_ms": trace.duration_ms,
        "time_unit": trace.time_unit,
        "path_length": float(sum(graph.distances[a, b] for a, b in zip(idx, idx[1:]))),
        "reference": None,
        "start_heading_error": None,
        "scores": None,
    }
    if args:
        out["reference"] = list(args["path"])
        if args.get("heading") is not None:
            out["start_heading_error"] = _angle_diff(trace.frames[0].heading, float(args["heading"]))
        out["scores"] = score_trajectory(graph, args["path"], path)
    return out


def trace_text(result: dict) -> str:
    lines = [
        f"scan       {result['scan']}",
        f"frames     {result['frames']} over {result['duration_ms'] / 1000:.1f} s (file in {result['time_unit']})",
        f"path       {len(result['path'])} viewpoints, {result['path_length']:.2f} m: " + " ".join(result["path"]),
    ]
    if result["reference"] is not None:
        lines.append(f"reference  {len(result['reference'])} viewpoints: " + " ".join(result["reference"]))
    if result["start_heading_error"] is not None:
        lines.append(f"start heading differs from the task's by {result['start_heading_error']:.4f} rad")
    s = result["scores"]
    if s is not None:
        lines.append(
            f"NE {s['ne']:.3f} m  SR {int(bool(s['success']))}  SPL {s['spl']:.3f}  "
            f"nDTW {s['ndtw']:.3f}  SDTW {s['sdtw']:.3f}  PL {s['path_length']:.2f} m"
        )
    return "\n".join(lines) + "\n"


def run_trace(
    trace_path: str | Path,
    connectivity_dir: str | Path,
    args_path: str | Path | None,
    time_unit: Literal["auto", "s", "ms"],
    as_json: bool,
    out: TextIO,
    err: TextIO | None = None,
) -> int:
    """Print the summary (text or JSON); exit code 0, or 2 with `error: ...` on stderr."""
    from app.kinds.navigation.score import report

    return report(
        lambda: summarize_trace(trace_path, connectivity_dir, args_path, time_unit), trace_text, as_json, out, err
    )


def parse_follower_annotations(
    data: bytes, known_ids: set[str], payloads: Mapping[str, dict] | None, get_graph
) -> dict[str, dict[str, dict]]:
    """People's paths from an earlier study -> {worker id: {external_id: response}}: the R2R
    predictions format with the follower's id on each record, [{"instr_id", "trajectory",
    "worker_id"}, ...]. Each follower's paths are checked like a listener's (building, start,
    a walk on the graph); a follower may follow an instruction once."""
    if isinstance(data, (bytes, bytearray)) and data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"the gzip file is truncated or corrupt ({e})", field="file") from None
    raw = formats.read_json(data, "file")
    if not isinstance(raw, list):
        raise InputError("prior paths are a JSON array of {instr_id, trajectory, worker_id}", field="file")
    by_worker: dict[str, list] = {}
    for i, rec, _ in formats.objects(raw, lambda i: f"record {i}", "file"):
        worker = rec.get("worker_id")
        if isinstance(worker, bool) or not isinstance(worker, (str, int)) or not str(worker).strip():
            raise InputError(
                f"record {i} (instr_id {rec.get('instr_id')}): worker_id must be the "
                "follower's id (a string or an integer)",
                field="worker_id",
            )
        by_worker.setdefault(str(worker).strip(), []).append(
            {"instr_id": rec.get("instr_id"), "trajectory": rec.get("trajectory")}
        )
    out = {}
    for worker, records in by_worker.items():
        try:
            out[worker] = parse_listener_outputs(records, known_ids, payloads, get_graph)
        except InputError as e:
            raise InputError(f"worker_id {worker}: {e.message}", field=e.field) from None
    return out
