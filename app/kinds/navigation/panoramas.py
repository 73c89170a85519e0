"""Per-viewpoint panoramas of a building: equirectangular JPEG or PNG images that the follower's
viewer (the kind's static/viewer.js) shows as a turnable 360-degree view.

Image convention (docs/kinds/navigation-viewer.md): the image wraps once around the viewpoint;
column x of a W-pixel-wide image shows heading 2 pi (x + 0.5) / W, measured as in the
Matterport3D simulator (0 = +y, clockwise seen from above), so the left edge looks along +y and
headings grow to the right; the top row looks straight up, the middle row at the horizon.
Width = 2 x height (within 2%).

An upload is checked whole before anything is stored: the file name is `<viewpoint>.jpg`,
`.jpeg` or `.png`, the viewpoint is one of the building's (included) viewpoints, the bytes are
a JPEG or PNG by their magic numbers (whatever the extension says), the size is within
`settings.max_upload_bytes`, and the image is 2:1. Any failure raises InputError (field
`files`) naming the file, and nothing is stored. Blobs go under
`panoramas/<scan>/<viewpoint>.<sha256 prefix>.<jpg|png>`: the content hash in the key means a
new upload never overwrites a blob that the stored row still points to, so a failed database
write can remove exactly what it added; superseded blobs are removed after the commit.
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import InputError, Missing
from app.kinds.navigation.environments import _check_scan, check_may_change, get_graph
from app.kinds.navigation.models import Environment
from app.storage import get_store

EXTENSIONS = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png"}
CONTENT_TYPES = {"jpeg": "image/jpeg", "png": "image/png"}
MAX_SIDE = 16384  # pixels; larger images would not fit a browser canvas anyway
MIN_HEIGHT = 16
ASPECT_TOLERANCE = 0.02
# Signed links in view.json: valid 6-7 hours and ending on the hour, so one hour's view.json
# responses share URLs (the browser can reuse the images) and a cached response stays usable.
URL_HOURS = 6

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, ...): they carry the size.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


@dataclass
class _Checked:
    name: str
    viewpoint: str
    kind: str  # "jpeg" or "png"
    stream: BinaryIO
    digest: str


def panorama_key(scan: str, viewpoint: str, digest: str, kind: str) -> str:
    return f"panoramas/{scan}/{viewpoint}.{digest[:16]}.{'jpg' if kind == 'jpeg' else 'png'}"


def _png_size(head: bytes) -> tuple[int, int] | None:
    # The signature, then the IHDR chunk first: length, "IHDR", width, height.
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


# A camera's JPEG has a few dozen segments before its frame header and a fill byte or two
# before a marker; a file of nothing but markers or fill is walked a byte at a time, so the
# walk gives up past these (round 9 of issue 26: a minute of a web process's CPU for 200 MB).
MAX_JPEG_SEGMENTS = 1_000
MAX_JPEG_FILL = 1_000


def _jpeg_size(f: BinaryIO) -> tuple[int, int] | None:
    """Walk the JPEG's marker segments to the first start-of-frame (EXIF or ICC segments before
    it may be large, so this reads headers and skips bodies)."""
    f.seek(2)
    for _ in range(MAX_JPEG_SEGMENTS):
        byte = f.read(1)
        for _ in range(MAX_JPEG_FILL):
            if byte != b"\xff":
                break
            byte = f.read(1)  # fill bytes before a marker
        if not byte or byte == b"\xff":
            return None
        marker = byte[0]
        if marker in (0x01, *range(0xD0, 0xD8)):  # no length field
            continue
        if marker in (0xD9, 0xDA):  # end of image, or the scan before any frame header
            return None
        raw = f.read(2)
        if len(raw) < 2:
            return None
        length = struct.unpack(">H", raw)[0]
        if length < 2:
            return None
        if marker in _SOF:
            body = f.read(5)
            if len(body) < 5:
                return None
            height, width = struct.unpack(">HH", body[1:5])
            return width, height
        f.seek(length - 2, io.SEEK_CUR)
    return None


def _sniff(name: str, f: BinaryIO) -> tuple[str, int, int]:
    """(kind, width, height) from the bytes; InputError naming the file otherwise."""
    f.seek(0)
    head = f.read(32)
    if head.startswith(_PNG_MAGIC):
        kind, size = "png", _png_size(head)
    elif head.startswith(b"\xff\xd8\xff"):
        kind, size = "jpeg", _jpeg_size(f)
    else:
        raise InputError(f"{name}: not a JPEG or PNG image (judged by its first bytes, not its name)", field="files")
    if size is None:
        raise InputError(f"{name}: a broken {kind.upper()} file (no image size found)", field="files")
    width, height = size
    if not (MIN_HEIGHT <= height and width <= MAX_SIDE):
        raise InputError(
            f"{name}: {width} x {height} pixels; a panorama must be at least "
            f"{MIN_HEIGHT} pixels high and at most {MAX_SIDE} wide",
            field="files",
        )
    if abs(width / (2 * height) - 1) > ASPECT_TOLERANCE:
        raise InputError(
            f"{name}: {width} x {height} pixels is not an equirectangular panorama "
            "(its width must be twice its height)",
            field="files",
        )
    return kind, width, height


def _size_of(f: BinaryIO) -> int:
    f.seek(0, io.SEEK_END)
    size = f.tell()
    f.seek(0)
    return size


def _digest(f: BinaryIO) -> str:
    f.seek(0)
    h = hashlib.sha256()
    while chunk := f.read(1024 * 1024):
        h.update(chunk)
    f.seek(0)
    return h.hexdigest()


def _limit_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit} bytes"


def check_panoramas(scan: str, files: Iterable[tuple[str, bytes | BinaryIO]]) -> list[_Checked]:
    """Validate every file of an upload (see the module's docstring); nothing is stored."""
    from app.config import get_settings

    _check_scan(scan)
    graph = get_graph(scan)  # InputError (field scan) for a building never imported
    limit = get_settings().max_upload_bytes
    checked: list[_Checked] = []
    seen: dict[str, str] = {}
    for name, data in files:
        name = Path(str(name or "")).name  # a browser may send a path; only the name counts
        stem, ext = Path(name).stem, Path(name).suffix.lower()
        if ext not in EXTENSIONS:
            raise InputError(f"{name or '(no name)'}: name a panorama <viewpoint>.jpg, .jpeg or .png", field="files")
        if stem not in graph:
            why = "is excluded from the simulator" if stem in graph.excluded else "is not a viewpoint"
            raise InputError(f"{name}: {stem!r} {why} in building {scan!r}", field="files")
        if stem in seen:
            raise InputError(f"{name}: viewpoint {stem!r} already has {seen[stem]} in this upload", field="files")
        seen[stem] = name
        stream = io.BytesIO(bytes(data)) if isinstance(data, (bytes, bytearray, memoryview)) else data
        size = _size_of(stream)
        if size == 0:
            raise InputError(f"{name}: the file is empty", field="files")
        if size > limit:
            raise InputError(
                f"{name}: {size / (1024 * 1024):.1f} MB is over the {_limit_text(limit)} limit", field="files"
            )
        kind, _, _ = _sniff(name, stream)
        checked.append(_Checked(name=name, viewpoint=stem, kind=kind, stream=stream, digest=_digest(stream)))
    if not checked:
        raise InputError("choose one or more panoramas (<viewpoint>.jpg or .png) to upload", field="files")
    return checked


def _environment(session: Session, scan: str, lock: bool = False) -> Environment:
    q = select(Environment).where(Environment.scan == scan)
    if lock:  # and read afresh: the row may have changed since this session last read it
        q = q.with_for_update().execution_options(populate_existing=True)
    env = session.scalar(q)
    if env is None:
        raise Missing(f"no building {scan!r} has been imported (proctor navigation import-graphs)", field="scan")
    return env


def import_panoramas(session: Session, scan: str, files: Iterable[tuple[str, bytes | BinaryIO]], actor=None) -> dict:
    """Store a building's panoramas (all of the upload or none of it) and record them on its
    row; a viewpoint uploaded again gets the new image. Only the building's owner or an admin
    may (`actor`; None: the operator): NotYours otherwise, before any file is read. Returns
    {"scan", "stored" (viewpoints of this upload, sorted), "panoramas" (how many the building
    has now)}."""
    _check_scan(scan)
    check_may_change(actor, _environment(session, scan))
    checked = check_panoramas(scan, files)
    env = _environment(session, scan, lock=True)
    check_may_change(actor, env)  # again under the lock: the owner may have changed meanwhile
    before = dict(env.panoramas or {})
    store = get_store()
    written: list[str] = []
    try:
        for c in checked:
            key = panorama_key(scan, c.viewpoint, c.digest, c.kind)
            if key not in before.values():  # the same image again is already there
                c.stream.seek(0)
                store.put(key, c.stream, CONTENT_TYPES[c.kind])
                written.append(key)
        after = {**before, **{c.viewpoint: panorama_key(scan, c.viewpoint, c.digest, c.kind) for c in checked}}
        env.panoramas = after
        session.commit()
    except BaseException:
        session.rollback()
        for key in written:
            store.delete(key)
        raise
    for key in set(before.values()) - set(after.values()):
        store.delete(key)  # replaced by a new image of the same viewpoint
    return {"scan": scan, "stored": sorted(c.viewpoint for c in checked), "panoramas": len(after)}


def import_directory(session: Session, scan: str, directory: str | Path, actor=None) -> tuple[dict, list[str]]:
    """`proctor navigation import-panoramas SCAN DIR`: every `<viewpoint>.jpg|jpeg|png` in DIR (not its
    subfolders). Returns the import's summary and the names of the other files, left alone."""
    folder = Path(directory)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder", field="directory")
    images, others = [], []
    for p in sorted(folder.iterdir()):
        if not p.is_file() or p.name.startswith("."):
            continue
        (images if p.suffix.lower() in EXTENSIONS else others).append(p)
    handles = [p.open("rb") for p in images]
    try:
        summary = import_panoramas(session, scan, [(p.name, h) for p, h in zip(images, handles)], actor=actor)
    finally:
        for h in handles:
            h.close()
    return summary, [p.name for p in others]


def panorama_urls(env: Environment) -> dict[str, str]:
    """Viewpoint -> a signed download link of its panorama (a presigned URL on S3)."""
    keys = env.panoramas or {}
    if not keys:
        return {}
    store = get_store()
    now = int(time.time())
    expires = (math.floor(now / 3600) + URL_HOURS + 1) * 3600 - now
    return {v: store.url(k, expires_s=expires) for v, k in keys.items()}
