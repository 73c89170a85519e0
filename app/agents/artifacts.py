"""Agent artifacts: an agent's model (e.g. a navigation speaker or listener), uploaded as data
(docs/agents.md). What roles a kind's agents take, and the configs of its built-in
architectures, are the kind's (TaskKind.artifact_roles, check_artifact_config).

Two formats, both read without unpickling Python objects:

* ``torchscript``: a ``torch.jit.save`` archive (a zip holding ``<name>/code/`` and
  ``<name>/data.pkl``, which TorchScript reads with its own restricted unpickler) implementing
  the speaker or listener interface;
* ``safetensors``: weights for one of our built-in architectures plus its config.

This module checks what can be checked without torch (size, magic bytes, the safetensors
header, the config), stores the blob under ``agents/<agent>/v<version>/<sha256>.<ext>``, inserts
the row (pending) and enqueues the kind's ``<kind>.validate`` job: a worker loads the model,
runs a small batch and writes the verdict (e.g. workers/navigation/validate.py). No torch here:
the web side never imports it.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import jobs, jsonsafe
from app.agents.models import ARTIFACT_FORMATS, Agent, AgentArtifact
from app.config import get_settings
from app.errors import Conflict, InputError
from app.storage import get_store

if TYPE_CHECKING:
    from app.auth.models import User

EXTENSIONS = {"torchscript": "pt", "safetensors": "safetensors"}
_RETRIES = 5


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.0f} MB" if n >= 1024 * 1024 else f"{n} bytes"


def check_size(data: bytes) -> None:
    limit = get_settings().max_artifact_bytes
    if len(data) > limit:
        raise InputError(f"the artifact is {_mb(len(data))}, larger than the {_mb(limit)} limit", field="file")
    if not data:
        raise InputError("the file is empty", field="file")


def _is_pickle(data: bytes) -> bool:
    # Protocol 2+ pickles start with PROTO (0x80) and the protocol number.
    return len(data) > 1 and data[0] == 0x80 and 2 <= data[1] <= 5


# The files an archive may list: torch writes one per tensor's storage and per code file (a
# model of a few thousand tensors lists a few thousand). `zipfile` holds some 380 bytes of
# Python a listed file, which takes 47 bytes of the upload: a million (46 MB) took 9.6 s and
# 376 MB in the web process (issue 26, re-attack round 10). Every entry of the listing starts
# with its signature, so counting the signatures bounds the entries before any is read.
MAX_ARCHIVE_MEMBERS = 20_000
_CENTRAL_ENTRY = b"PK\x01\x02"


def _zip_names(data: bytes) -> list[str] | None:
    if data[:4] != b"PK\x03\x04":
        return None
    if data.count(_CENTRAL_ENTRY) > MAX_ARCHIVE_MEMBERS:
        raise InputError(f"the archive lists more than {MAX_ARCHIVE_MEMBERS:,} files", field="file")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, ValueError):
        return None
    # torch writes members uncompressed; a zip that inflates far past the limit is refused here
    limit = get_settings().max_artifact_bytes
    if sum(i.file_size for i in infos) > limit:
        raise InputError(f"the archive unpacks to more than the {_mb(limit)} limit", field="file")
    return [i.filename for i in infos]


def _safetensors_header(data: bytes) -> dict[str, Any] | None:
    """The parsed JSON header of a safetensors file, or None if it is not one."""
    if len(data) < 10:
        return None
    (n,) = struct.unpack("<Q", data[:8])
    if n < 2 or 8 + n > len(data) or data[8:9] != b"{":
        return None
    try:
        header = jsonsafe.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return header if isinstance(header, dict) else None


_PICKLE = (
    "it is a Python pickle, and uploads are never unpickled (a pickle can run any code): "
    "save weights with safetensors.torch.save_file, or a whole model with torch.jit.save"
)
_CHECKPOINT = (
    "it is a torch.save checkpoint (pickled Python objects), and uploads are never "
    "unpickled: save the weights with safetensors.torch.save_file(model.state_dict(), ...) "
    "and upload them as safetensors, or upload torch.jit.save(torch.jit.script(model))"
)


def check_format(fmt: str, data: bytes) -> None:
    """The file is what `fmt` says, judged by its bytes; a clear refusal otherwise."""
    if _is_pickle(data):
        raise InputError(f"refused: {_PICKLE}", field="file")
    names = _zip_names(data)
    if fmt == "torchscript":
        if names is None:
            hint = (
                " (it looks like safetensors: choose format safetensors and send the config)"
                if _safetensors_header(data) is not None
                else ""
            )
            raise InputError("not a TorchScript archive: torch.jit.save writes a zip file" + hint, field="file")
        if not any("/code/" in n for n in names) or not any(n.endswith("/data.pkl") for n in names):
            if any(n.endswith("/data.pkl") for n in names):
                raise InputError(f"refused: {_CHECKPOINT}", field="file")
            raise InputError(
                "not a TorchScript archive: the zip has no code/ folder and data.pkl that torch.jit.save writes",
                field="file",
            )
        return
    # safetensors
    if names is not None:
        if any(n.endswith("data.pkl") for n in names):
            raise InputError(f"refused: {_CHECKPOINT}", field="file")
        raise InputError("not a safetensors file: this is a zip archive", field="file")
    check_safetensors(data)


# Bits per element of each safetensors dtype (the format's own list).
SAFETENSORS_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# The JSON header is decoded in the web process: some 25 times its bytes as Python objects, so
# 20 MB of empty lists took 6 s and 531 MB (issue 26, re-attack round 10). A tensor's entry is
# about 100 bytes and three objects and arrays, so these allow some 30,000 tensors (ours have a
# few dozen); the brackets are counted before decoding, as the sandbox counts an answer's.
MAX_SAFETENSORS_HEADER = 4 << 20
MAX_SAFETENSORS_CONTAINERS = 100_000


def check_safetensors(data: bytes) -> None:
    """The header of a safetensors file describes tensors that lie inside the file, one byte
    span each, no two overlapping, each as long as its shape and dtype need; a refusal names
    the problem (and the tensor) otherwise."""
    if len(data) < 10 or data[8:9] != b"{":
        raise InputError(
            "not a safetensors file: it must start with an 8-byte little-endian header length and a JSON header",
            field="file",
        )
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise InputError(
            f"the safetensors header length ({n} bytes) runs past the end of the file ({len(data)} bytes)", field="file"
        )
    if n > MAX_SAFETENSORS_HEADER:
        raise InputError(
            f"the safetensors header is {_mb(n)}, larger than the {_mb(MAX_SAFETENSORS_HEADER)} a header may be",
            field="file",
        )
    if data.count(b"{", 8, 8 + n) + data.count(b"[", 8, 8 + n) > MAX_SAFETENSORS_CONTAINERS:
        raise InputError(
            f"the safetensors header holds more than {MAX_SAFETENSORS_CONTAINERS:,} objects and arrays", field="file"
        )
    try:
        header = jsonsafe.loads(data[8 : 8 + n])
    except UnicodeDecodeError:
        raise InputError("the safetensors header is not UTF-8 JSON", field="file") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"the safetensors header is not valid JSON: {exc.msg} at byte {exc.pos}", field="file"
        ) from None
    # (a header that starts with "{" and parses is an object)
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    if not tensors:
        raise InputError("the safetensors file holds no tensors", field="file")
    body = len(data) - 8 - n
    spans = []
    for name, t in tensors.items():
        if not isinstance(t, dict) or not {"dtype", "shape", "data_offsets"} <= set(t):
            raise InputError(f"the safetensors header entry {name!r} lacks dtype, shape or data_offsets", field="file")
        dtype, shape, offsets = t["dtype"], t["shape"], t["data_offsets"]
        if dtype not in SAFETENSORS_BITS:
            raise InputError(f"tensor {name!r} has an unknown dtype {dtype!r}", field="file")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise InputError(
                f"tensor {name!r}: the shape must be a list of non-negative integers, got {shape!r}", field="file"
            )
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(_is_count(o) for o in offsets)
            or offsets[0] > offsets[1]
        ):
            raise InputError(
                f"tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end, got {offsets!r}",
                field="file",
            )
        begin, end = offsets
        if end > body:
            raise InputError(
                f"tensor {name!r}: data_offsets [{begin}, {end}] run past the end of the data ({body} bytes)",
                field="file",
            )
        elements = 1
        for d in shape:
            elements *= d
        bits = elements * SAFETENSORS_BITS[dtype]
        if bits != 8 * (end - begin):
            raise InputError(
                f"tensor {name!r}: shape {shape} of {dtype} needs "
                f"{bits / 8:g} bytes, but data_offsets span {end - begin}",
                field="file",
            )
        spans.append((begin, end, name))
    spans.sort()
    for (b0, e0, first), (b1, e1, second) in zip(spans, spans[1:]):
        if b1 < e0:
            raise InputError(f"tensors {first!r} and {second!r} overlap (bytes {b0}-{e0} and {b1}-{e1})", field="file")


def upload_artifact(
    session: Session, agent: Agent, role: str, fmt: str, data: bytes, config: dict[str, Any] | None
) -> AgentArtifact:
    """Store a new version of the agent's model and enqueue its validation.

    Raises InputError, with nothing stored, for a bad upload. Commits."""
    from app.kinds import all_kinds, get_kind

    kind = get_kind(agent.kind)
    # A role of another kind, or any role for a kind without models, is the stored agent's
    # kind refusing it (409); a role of no kind is a bad request (422).
    if not kind.artifact_roles:
        raise Conflict(
            f"agent {agent.name!r} is a {agent.kind} agent, and {kind.title} agents do not upload models", field="agent"
        )
    if role not in kind.artifact_roles:
        known = any(role in k.artifact_roles for k in all_kinds().values())
        error = Conflict if known else InputError
        raise error(f"role must be one of {', '.join(kind.artifact_roles)} for a {agent.kind} agent", field="role")
    if fmt not in ARTIFACT_FORMATS:
        raise InputError(f"format must be one of {', '.join(ARTIFACT_FORMATS)}", field="format")
    check_size(data)
    check_format(fmt, data)
    if fmt == "safetensors":
        config = kind.check_artifact_config(role, config)
    elif config:
        raise InputError("a TorchScript archive carries its own config: send none", field="config")
    else:
        config = {}
    sha = hashlib.sha256(data).hexdigest()
    store = get_store()
    agent_id, owner_id = agent.id, agent.owner_id
    for _ in range(_RETRIES):
        version = (
            session.scalar(select(func.max(AgentArtifact.version)).where(AgentArtifact.agent_id == agent_id)) or 0
        ) + 1
        key = f"agents/{agent_id}/v{version}/{sha}.{EXTENSIONS[fmt]}"
        try:
            # The row first: its flush claims the version number (unique per agent), so the
            # blob key below is ours alone and deleting it on failure never hits another upload.
            artifact = AgentArtifact(
                agent_id=agent_id,
                version=version,
                role=role,
                format=fmt,
                blob_key=key,
                config=config,
                size=len(data),
                sha256=sha,
                state="pending",
            )
            session.add(artifact)
            session.flush()
        except IntegrityError:
            session.rollback()  # another upload took this version between our read and insert
            continue
        try:
            store.put(key, data)
            job = jobs.create_job(session, f"{kind.name}.validate", owner_id=owner_id, artifact_id=artifact.id)
            session.commit()
        except BaseException:
            session.rollback()
            store.delete(key)
            raise
        # No queue: the upload is withdrawn (no pending version that nobody will check).
        jobs.submit(session, job, withdraw=((AgentArtifact, artifact.id),), cleanup=lambda: store.delete(key))
        return artifact
    raise RuntimeError(f"could not number a new version of agent {agent_id}: too many uploads at once")


def list_artifacts(session: Session, agent: Agent) -> list[AgentArtifact]:
    return list(
        session.scalars(
            select(AgentArtifact).where(AgentArtifact.agent_id == agent.id).order_by(AgentArtifact.version.desc())
        )
    )


def usable_models(session: Session, owner_id: int, kind: str, *roles: str) -> dict[str, list[dict[str, Any]]]:
    """An account's validated models of a kind in the given roles, per role, as a run form's
    choices ({"id", "label"}): by agent name, the newest model version first."""
    rows = session.execute(
        select(AgentArtifact, Agent)
        .join(Agent, Agent.id == AgentArtifact.agent_id)
        .where(
            Agent.owner_id == owner_id,
            Agent.kind == kind,
            AgentArtifact.state == "valid",
            AgentArtifact.role.in_(roles),
        )
        .order_by(Agent.name, AgentArtifact.version.desc())
    ).all()
    out: dict[str, list[dict[str, Any]]] = {role: [] for role in roles}
    for a, g in rows:
        out[a.role].append({"id": a.id, "label": f"{g.name} v{g.version}, model v{a.version} ({a.format})"})
    return out


def artifact_dict(a: AgentArtifact) -> dict[str, Any]:
    return {
        "id": a.id,
        "agent_id": a.agent_id,
        "version": a.version,
        "role": a.role,
        "format": a.format,
        "size": a.size,
        "sha256": a.sha256,
        "state": a.state,
        "verdict": a.verdict,
        "config": {k: v for k, v in (a.config or {}).items() if k != "words"},
        "words": len((a.config or {}).get("words", [])) or None,
        "created_at": a.created_at.isoformat() if a.created_at else None,
        "validated_at": a.validated_at.isoformat() if a.validated_at else None,
    }


# ---- shared by the API and the pages --------------------------------------------------------


def owned_agent(session: Session, agent_id: int, user: User) -> Agent:
    """The agent if the user owns it (or is an admin); 404 otherwise, so that another
    researcher's agents are not revealed to exist."""
    from fastapi import HTTPException

    agent = session.get(Agent, agent_id)
    if agent is None or (agent.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such agent among yours")
    return agent


async def read_artifact(upload: Any) -> bytes:
    """The upload's bytes, reading no more than one byte past the limit (then refused)."""
    if upload is None or not getattr(upload, "filename", None):
        raise InputError("choose a file to upload", field="file")
    data: bytes = await upload.read(get_settings().max_artifact_bytes + 1)
    check_size(data)
    return data


def parse_config(text: str | None) -> dict[str, Any] | None:
    if not text or not text.strip():
        return None
    try:
        config = jsonsafe.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"the config is not valid JSON: {exc.msg} at line {exc.lineno}", field="config") from None
    if not isinstance(config, dict):
        raise InputError("the config must be a JSON object", field="config")
    return config
