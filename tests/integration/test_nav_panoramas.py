"""Panoramas of a building: uploaded over the API or the command line, checked before anything
is stored (type by magic bytes, size, 2:1 shape, viewpoints of the building), kept in the blob
store (a local folder or S3) and listed with signed links in the follower's view.json.

The panoramas are written here, pixel by pixel (PNG via zlib/struct): column u of a W-wide image
shows heading 2 pi (u + 0.5) / W (docs/kinds/navigation-viewer.md), and its colour says which
column and viewpoint it is, so the browser test can check what the viewer shows."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import urllib.request
import zlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.kinds.navigation.environments import get_graph, import_connectivity
from app.kinds.navigation.models import Environment
from app.storage import get_store
from tests.conftest import login, make_user
from tests.nav_fixtures import grid_file

# The storage tests' moto server (S3 on loopback), for the S3 case.
from tests.integration.test_storage import moto_endpoint, no_aws_environment  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
GRID = grid_file()
REAL = ROOT.parent / "shared" / "data" / "r2r" / "connectivity"
WIDTH = 720  # columns of the test panoramas: half a degree each


def colour(u: int, row_up: bool, tag: int) -> tuple[int, int, int]:
    """The test panoramas' colour of column u: red and green spell the column, blue whether the
    row is above the horizon (bright) and which viewpoint (`tag`)."""
    return u % 240, 20 + (u // 240) % 4 * 60, (200 if row_up else 20) + tag


def _png(width: int, height: int, row) -> bytes:
    """An 8-bit RGB PNG; row(y) -> the row's width x 3 bytes."""
    raw = b"".join(b"\x00" + row(y) for y in range(height))  # filter type 0 on every row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def png(width: int, height: int, pixel) -> bytes:
    """pixel(x, y) -> (r, g, b)."""
    return _png(width, height, lambda y: bytes(c for x in range(width) for c in pixel(x, y)))


def panorama_png(tag: int = 0, width: int = WIDTH) -> bytes:
    """An equirectangular test panorama (width x width/2) coloured by column (`colour`)."""
    height = width // 2
    rows = {up: bytes(c for u in range(width) for c in colour(u, up, tag)) for up in (True, False)}
    return _png(width, height, lambda y: rows[y < height // 2])


def jpeg_header(width: int, height: int, exif: int = 5000) -> bytes:
    """The start of a baseline JPEG: SOI, an APP1 segment (as large EXIF data would be) and the
    frame header with the size; enough for the upload's checks, not a picture to decode."""
    app1 = b"\xff\xe1" + struct.pack(">H", exif + 2) + b"\x00" * exif
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app1 + sof + b"\xff\xd9"


def grid(session, owner=None) -> None:
    """Scan "grid": g00 ... g32 on a 4 x 3 grid, 1 m apart; the owner's to change (None: the
    operator's, admins only)."""
    import_connectivity(session, GRID, actor=owner)


def stored_blobs() -> list[str]:
    root = get_store().root / "panoramas"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def upload(client, scan: str, files: list[tuple[str, bytes]]):
    return client.post(
        f"/api/v1/environments/{scan}/panoramas",
        files=[("files", (name, data, "application/octet-stream")) for name, data in files],
    )


@pytest.fixture
def researcher(session, app):
    user = make_user(session, "researcher")
    with TestClient(app) as c:
        c.headers["X-CSRF-Token"] = login(c, user)
        c.user = user  # the buildings the tests upload to are this researcher's
        yield c


def test_upload_and_view(session, researcher):
    grid(session, researcher.user)
    r = upload(researcher, "grid", [("g00.png", panorama_png(1)), ("g10.jpg", jpeg_header(4096, 2048))])
    assert r.status_code == 200, r.text
    assert r.json() == {"scan": "grid", "stored": ["g00", "g10"], "panoramas": 2}
    session.expire_all()
    env = session.scalar(select(Environment).where(Environment.scan == "grid"))
    assert set(env.panoramas) == {"g00", "g10"}
    assert env.panoramas["g00"].startswith("panoramas/grid/g00.") and env.panoramas["g00"].endswith(".png")
    assert env.panoramas["g10"].endswith(".jpg")  # by the bytes: a JPEG

    view = researcher.get("/env/grid/view.json").json()
    assert view["semantics"] is None
    assert set(v for v, d in view["viewpoints"].items() if "panorama" in d) == {"g00", "g10"}
    graph = get_graph("grid")
    n = view["viewpoints"]["g00"]["neighbours"][0]
    assert n["elevation"] == graph.elevation("g00", n["id"])
    link = view["viewpoints"]["g00"]["panorama"]
    assert "sig=" in link and researcher.get(link).content == panorama_png(1)
    assert researcher.get(link.replace("sig=", "sig=0")).status_code == 403

    # Again for g00, with another picture: the new one is served, the old blob is gone.
    old = env.panoramas["g00"]
    r = upload(researcher, "grid", [("g00.png", panorama_png(2))])
    assert r.status_code == 200 and r.json()["panoramas"] == 2
    session.expire_all()
    env = session.scalar(select(Environment).where(Environment.scan == "grid"))
    assert env.panoramas["g00"] != old and not get_store().exists(old)
    link = researcher.get("/env/grid/view.json").json()["viewpoints"]["g00"]["panorama"]
    assert researcher.get(link).content == panorama_png(2)
    assert len(stored_blobs()) == 2


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("g20.png", b"GIF89a" + b"\x00" * 200, "g20.png: not a JPEG or PNG image"),
        ("g20.png", b"<html>not a picture</html>", "g20.png: not a JPEG or PNG image"),
        ("g20.gif", b"GIF89a" + b"\x00" * 200, "g20.gif: name a panorama <viewpoint>.jpg"),
        ("nowhere.png", None, "nowhere.png: 'nowhere' is not a viewpoint in building 'grid'"),
        ("hidden.png", None, "hidden.png: 'hidden' is excluded from the simulator"),
        ("g20.png", "square", "g20.png: 64 x 64 pixels is not an equirectangular panorama"),
        ("g20.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF", "g20.jpg: a broken JPEG file"),
        ("g20.png", b"", "g20.png: the file is empty"),
    ],
)
def test_bad_files_are_refused_and_nothing_is_stored(session, researcher, name, data, says):
    grid(session, researcher.user)
    if data is None:
        data = panorama_png()
    elif data == "square":
        data = png(64, 64, lambda x, y: (x, y, 0))
    # A good file comes first: it must not be stored either.
    r = upload(researcher, "grid", [("g00.png", panorama_png()), (name, data)])
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "files" and says in r.json()["detail"], r.json()
    session.expire_all()
    assert session.scalar(select(Environment.panoramas).where(Environment.scan == "grid")) == {}
    assert stored_blobs() == []


def test_too_big_and_other_refusals(session, researcher, monkeypatch):
    from app.config import get_settings

    grid(session, researcher.user)
    r = upload(researcher, "grid", [("g00.png", panorama_png()), ("g00.jpg", jpeg_header(800, 400))])
    assert r.status_code == 422 and "g00.jpg: viewpoint 'g00' already has g00.png" in r.json()["detail"]
    r = upload(researcher, "no-such-building", [("g00.png", panorama_png())])
    assert r.status_code == 404 and r.json()["field"] == "scan"  # a row not there, as a path's id

    monkeypatch.setenv("MAX_UPLOAD_BYTES", "4000")
    get_settings.cache_clear()
    big = panorama_png(width=2048)
    assert len(big) > 4000
    r = upload(researcher, "grid", [("g00.png", panorama_png(width=64)), ("g10.png", big)])
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "files" and "g10.png" in r.json()["detail"] and "limit" in r.json()["detail"]
    session.expire_all()
    assert session.scalar(select(Environment.panoramas).where(Environment.scan == "grid")) == {}
    assert stored_blobs() == []


def test_only_researchers_upload(session, app, client):
    grid(session)
    assert upload(client, "grid", [("g00.png", panorama_png())]).status_code in (401, 403)
    worker_view = client.get("/env/grid/view.json")
    assert worker_view.status_code == 403
    assert stored_blobs() == []


def test_command_line(session, db_url, tmp_path):
    """`proctor nav import-panoramas SCAN DIR`: all or nothing, naming a bad file."""
    if not db_url.startswith("sqlite"):
        pytest.skip("the command runs in its own process; one backend is enough")
    grid(session)
    folder = tmp_path / "panos"
    folder.mkdir()
    (folder / "g00.png").write_bytes(panorama_png(3))
    (folder / "g01.jpeg").write_bytes(jpeg_header(1024, 512))
    (folder / "README.txt").write_text("how these were made")
    (folder / "g11.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    env = {**os.environ, "DATABASE_URL": db_url, "STORAGE_URL": os.environ["STORAGE_URL"], "REDIS_URL": ""}

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "nav", "import-panoramas", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )

    out = run("grid", str(folder))
    assert out.returncode != 0 and "g11.png: a broken PNG file" in out.stderr, out.stderr
    session.expire_all()
    assert session.scalar(select(Environment.panoramas).where(Environment.scan == "grid")) == {}
    assert stored_blobs() == []

    (folder / "g11.png").unlink()
    out = run("grid", str(folder))
    assert out.returncode == 0, out.stderr
    assert "stored 2 panoramas; grid has 2" in out.stdout and "README.txt" in out.stdout
    session.expire_all()
    keys = session.scalar(select(Environment.panoramas).where(Environment.scan == "grid"))
    assert set(keys) == {"g00", "g01"} and get_store().get(keys["g00"]) == panorama_png(3)


def test_a_real_building(session, researcher):
    """Panoramas for two viewpoints of a released Matterport3D graph."""
    path = REAL / "17DRP5sb8fy_connectivity.json"
    if not path.exists():
        pytest.skip(f"the Matterport3D connectivity files are not at {REAL}")
    import_connectivity(session, path, actor=researcher.user)
    graph = get_graph("17DRP5sb8fy")
    a = graph.viewpoints[0]
    b = graph.neighbours(a)[0]
    r = upload(researcher, "17DRP5sb8fy", [(f"{a}.png", panorama_png(1)), (f"{b}.png", panorama_png(2))])
    assert r.status_code == 200, r.text
    view = researcher.get("/env/17DRP5sb8fy/view.json").json()
    with_pictures = {v for v, d in view["viewpoints"].items() if "panorama" in d}
    assert with_pictures == {a, b} and len(view["viewpoints"]) == len(graph)
    assert researcher.get(view["viewpoints"][b]["panorama"]).content == panorama_png(2)


def test_on_s3(session, researcher, monkeypatch, request):
    """With STORAGE_URL=s3://... the panoramas go to the bucket and view.json lists presigned
    links that fetch them (moto on loopback)."""
    from app.config import get_settings
    from app.storage import clear_store_cache
    from tests.integration.test_storage import DUMMY_KEY, DUMMY_SECRET

    endpoint = request.getfixturevalue("moto_endpoint")
    monkeypatch.setenv("STORAGE_URL", f"s3://proctor-panoramas-{os.getpid()}")
    monkeypatch.setenv("S3_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("S3_ACCESS_KEY", DUMMY_KEY)
    monkeypatch.setenv("S3_SECRET_KEY", DUMMY_SECRET)
    get_settings.cache_clear()
    clear_store_cache()
    grid(session, researcher.user)
    try:
        r = upload(researcher, "grid", [("g00.png", panorama_png(4))])
        assert r.status_code == 200, r.text
        link = researcher.get("/env/grid/view.json").json()["viewpoints"]["g00"]["panorama"]
        assert link.startswith(endpoint) and "X-Amz-Signature=" in link
        with urllib.request.urlopen(link) as resp:  # noqa: S310 - loopback moto
            assert resp.read() == panorama_png(4)
        bad = upload(researcher, "grid", [("g10.png", panorama_png(5)), ("g20.png", b"nope")])
        assert bad.status_code == 422
        keys = [
            o["Key"]
            for o in get_store()
            .client.list_objects_v2(Bucket=get_store().bucket, Prefix="panoramas/")
            .get("Contents", [])
        ]
        assert len(keys) == 1 and keys[0].startswith("panoramas/grid/g00.")
    finally:
        store = get_store()
        for o in store.client.list_objects_v2(Bucket=store.bucket).get("Contents", []):
            store.client.delete_object(Bucket=store.bucket, Key=o["Key"])
        store.client.delete_bucket(Bucket=store.bucket)
        clear_store_cache()


class _CountingReads(io.BytesIO):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.reads = 0

    def read(self, size: int | None = -1) -> bytes:
        self.reads += 1
        return super().read(size)


@pytest.mark.parametrize("fill", [b"\x01\xff", b"\xff"])
def test_a_jpeg_of_markers_or_fill_alone_is_given_up_on_early(fill):
    """Round 9 of issue 26: markers without a length (or fill bytes) walked a byte at a time
    to the end of the file, about a minute of the web process for 200 MB. The walk stops
    after a bounded number of segments and fill bytes: a broken JPEG."""
    from app.kinds.navigation.panoramas import MAX_JPEG_FILL, MAX_JPEG_SEGMENTS, _jpeg_size

    f = _CountingReads(b"\xff\xd8\xff" + fill * (1 << 20))
    assert _jpeg_size(f) is None
    assert f.reads <= 2 * (MAX_JPEG_SEGMENTS + MAX_JPEG_FILL) + 2
    assert _jpeg_size(io.BytesIO(jpeg_header(800, 400))) == (800, 400)  # a real header still reads
