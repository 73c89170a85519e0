"""Blob stores: the same behaviour from the local folder and from S3.

S3 runs against moto's server mode on loopback, started here; nothing leaves the machine and
only dummy credentials exist. Set PROCTOR_TEST_S3_ENDPOINT (plus PROCTOR_TEST_S3_ACCESS_KEY and
PROCTOR_TEST_S3_SECRET_KEY, e.g. the MinIO of docker-compose) to run the S3 cases against a real
server too; buckets made for the tests are emptied and removed afterwards.

moto does not check presigned-URL signatures or expiry (it serves a URL with a forged
X-Amz-Signature), only that an anonymous request to a private object carries one. So for moto,
tampered URLs are checked with an independent SigV4 query-signature verifier below, written from
AWS's signing spec, and over HTTP wherever the server really verifies (a real endpoint).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import io
import os
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlsplit, urlunsplit

import pytest

try:
    import app  # noqa: F401
except ModuleNotFoundError:  # the project is not installed and pytest has no pythonpath set
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.config import Settings
from app.storage import (
    BlobStore,
    LocalBlobStore,
    S3BlobStore,
    clear_store_cache,
    content_disposition,
    get_store,
)

DUMMY_KEY = "proctor-test-access"
DUMMY_SECRET = "proctor-test-secret"
REGION = "us-east-1"


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@dataclass
class S3Target:
    endpoint: str
    access_key: str
    secret_key: str
    verifies_signatures: bool  # False for moto, True for a real S3/MinIO


@pytest.fixture(scope="session")
def no_aws_environment():
    """No real credentials, config files, instance metadata or proxies reach boto3/urllib."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("AWS_") or name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
                mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", DUMMY_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET)
        mp.setenv("AWS_DEFAULT_REGION", REGION)
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("NO_PROXY", "127.0.0.1,localhost")
        yield


@pytest.fixture(scope="session")
def moto_endpoint(no_aws_environment):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1"
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def real_s3_target(no_aws_environment):
    endpoint = os.environ.get("PROCTOR_TEST_S3_ENDPOINT")
    if not endpoint:
        pytest.skip("PROCTOR_TEST_S3_ENDPOINT not set: no real S3/MinIO to test against")
    return S3Target(
        endpoint=endpoint,
        access_key=os.environ.get("PROCTOR_TEST_S3_ACCESS_KEY", ""),
        secret_key=os.environ.get("PROCTOR_TEST_S3_SECRET_KEY", ""),
        verifies_signatures=True,
    )


def _drop_bucket(store: S3BlobStore) -> None:
    client = store.client
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket)
        for page in pages:
            for obj in page.get("Contents", []):
                client.delete_object(Bucket=store.bucket, Key=obj["Key"])
        client.delete_bucket(Bucket=store.bucket)
    except Exception:  # noqa: BLE001 - cleanup must not hide the test's own result
        pass


@pytest.fixture(params=["local", "s3-moto", "s3-real"])
def store(request, tmp_path):
    """A fresh, empty store of each kind (a new bucket per test for S3)."""
    if request.param == "local":
        yield LocalBlobStore(tmp_path / "blobs", secret_key="test-signing-secret")
        return
    if request.param == "s3-moto":
        target = S3Target(request.getfixturevalue("moto_endpoint"), DUMMY_KEY, DUMMY_SECRET, False)
    else:
        target = request.getfixturevalue("real_s3_target")
    s3 = S3BlobStore(
        bucket=f"proctor-test-{uuid.uuid4().hex[:12]}",
        endpoint_url=target.endpoint,
        access_key=target.access_key,
        secret_key=target.secret_key,
        region=REGION,
    )
    s3.test_target = target  # type: ignore[attr-defined]
    try:
        yield s3
    finally:
        _drop_bucket(s3)


# --------------------------------------------------------------------------------------------
# Same behaviour from every store
# --------------------------------------------------------------------------------------------


def test_implements_the_interface(store):
    """Every BlobStore method, with the protocol's parameters, doing what its docstring says."""
    import inspect

    assert isinstance(store, BlobStore)
    for name in ("put", "get", "open", "exists", "delete", "size", "url"):

        def params(fn):
            return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

        assert params(getattr(type(store), name)) == params(getattr(BlobStore, name)), name

    data = os.urandom(4096 + 17)
    store.put("iface/blob.bin", data)
    assert store.exists("iface/blob.bin") is True
    assert store.size("iface/blob.bin") == len(data)
    assert store.get("iface/blob.bin") == data
    with store.open("iface/blob.bin") as f:
        assert f.read() == data
    # The signed URL gives the same bytes, for as long as was asked.
    before = int(time.time())
    url = store.url("iface/blob.bin", expires_s=90, filename="blob.bin")
    if isinstance(store, LocalBlobStore):
        key, q = _split_local_url(url)
        assert key == "iface/blob.bin" and q["filename"] == "blob.bin"
        assert before + 90 <= int(q["exp"]) <= int(time.time()) + 90
        assert store.verify(key, q["exp"], q["sig"], filename=q["filename"])
        assert not store.verify(key, q["exp"], q["sig"], filename=q["filename"], now=int(q["exp"]) + 1)
        assert store.get(key) == data
    else:
        assert dict(parse_qsl(urlsplit(url).query))["X-Amz-Expires"] == "90"
        status, body, headers = _fetch(url)
        assert (status, body) == (200, data)
        assert headers.get("Content-Disposition") == content_disposition("blob.bin")
    store.delete("iface/blob.bin")
    assert store.exists("iface/blob.bin") is False
    with pytest.raises(KeyError):
        store.get("iface/blob.bin")
    store.delete("iface/blob.bin")  # no error the second time


def test_bytes_round_trip_and_overwrite(store):
    store.put("a.txt", b"hello")
    assert store.get("a.txt") == b"hello"
    store.put("a.txt", bytearray(b"second version"), content_type="text/plain")
    assert store.get("a.txt") == b"second version"
    store.put("empty", b"")
    assert store.get("empty") == b""
    assert store.size("empty") == 0


def test_nested_and_unicode_keys(store):
    store.put("agents/7/v1/model.tar.gz", b"\x00\x01binary")
    store.put("exports/résumé 2024.csv", b"a,b\n")
    assert store.get("agents/7/v1/model.tar.gz") == b"\x00\x01binary"
    assert store.get("exports/résumé 2024.csv") == b"a,b\n"
    assert not store.exists("agents/7")  # a "folder" is not a blob


def test_file_object_round_trip_several_megabytes(store, tmp_path):
    # 12 MiB is above boto3's 8 MiB multipart threshold, so S3 takes the multipart path.
    data = os.urandom(12 * 1024 * 1024 + 123)
    store.put("big/stream.bin", io.BytesIO(data))
    assert store.size("big/stream.bin") == len(data)
    assert store.get("big/stream.bin") == data

    source = tmp_path / "upload.bin"
    source.write_bytes(data[: 3 * 1024 * 1024])
    with open(source, "rb") as f:
        store.put("big/file.bin", f)
    assert store.get("big/file.bin") == data[: 3 * 1024 * 1024]


def test_open_streams(store):
    data = os.urandom(2 * 1024 * 1024 + 7)
    store.put("stream/me.bin", data)
    parts = []
    with store.open("stream/me.bin") as f:
        while chunk := f.read(64 * 1024):
            assert len(chunk) <= 64 * 1024
            parts.append(chunk)
    assert b"".join(parts) == data
    assert f.closed


def test_exists_delete_size(store):
    assert not store.exists("x/y.bin")
    store.put("x/y.bin", b"12345")
    assert store.exists("x/y.bin")
    assert store.size("x/y.bin") == 5
    store.delete("x/y.bin")
    assert not store.exists("x/y.bin")
    store.delete("x/y.bin")  # deleting a missing blob is not an error


def test_missing_key_raises_key_error(store):
    with pytest.raises(KeyError):
        store.get("nope/missing.bin")
    with pytest.raises(KeyError):
        store.open("nope/missing.bin")
    with pytest.raises(KeyError):
        store.size("nope/missing.bin")
    assert store.exists("nope/missing.bin") is False


@pytest.mark.parametrize(
    "bad_key",
    [
        "../escape",
        "a/../../etc/passwd",
        "a/..",
        "..",
        "./a",
        "/etc/passwd",
        "a\\b",
        "..\\x",
        "",
        "a//b",
        "a/",
        "c:/x",
        "line\nbreak",
        "nul\x00",
        ".~tmp-abc",
    ],
)
def test_bad_keys_are_refused(store, bad_key):
    with pytest.raises(ValueError):
        store.put(bad_key, b"x")
    for call in (store.get, store.open, store.exists, store.delete, store.size, store.url):
        with pytest.raises(ValueError):
            call(bad_key)


def test_put_rejects_text(store):
    with pytest.raises(TypeError):
        store.put("t.txt", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.put("t.txt", io.StringIO("not bytes"))  # type: ignore[arg-type]
    assert not store.exists("t.txt")


# --------------------------------------------------------------------------------------------
# Local folder specifics
# --------------------------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs", secret_key="test-signing-secret")


def _split_local_url(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    assert parts.path.startswith("/blobs/")
    key = unquote(parts.path[len("/blobs/") :])
    return key, {k: v[0] for k, v in parse_qs(parts.query).items()}


def test_local_signed_url_verifies(local):
    local.put("exports/run 1.csv", b"x")
    url = local.url("exports/run 1.csv", expires_s=60)
    assert url.startswith("/blobs/exports/run%201.csv?exp=")
    key, q = _split_local_url(url)
    assert key == "exports/run 1.csv"
    assert abs(int(q["exp"]) - (time.time() + 60)) < 5
    assert local.verify(key, q["exp"], q["sig"])
    assert local.verify(key, int(q["exp"]), q["sig"])


def test_local_signed_url_rejects_tampering(local):
    key, q = _split_local_url(local.url("a/b.bin", expires_s=60))
    exp, sig = q["exp"], q["sig"]
    assert local.verify(key, exp, sig)
    assert not local.verify("a/c.bin", exp, sig)  # another key
    assert not local.verify(key, str(int(exp) + 3600), sig)  # extended expiry
    flipped = ("0" if sig[0] != "0" else "1") + sig[1:]
    assert not local.verify(key, exp, flipped)  # tampered signature
    assert not local.verify(key, exp, sig.upper())
    assert not local.verify(key, exp, "")
    assert not local.verify(key, exp, None)
    assert not local.verify(key, exp, "ü" * 64)  # non-ASCII: False, not an exception
    assert not local.verify(key, "soon", sig)
    assert not local.verify(key, None, sig)
    assert not local.verify("../a/b.bin", exp, sig)
    other = LocalBlobStore(local.root, secret_key="another-secret")
    assert not other.verify(key, exp, sig)  # signed with a different SECRET_KEY


def test_local_signed_url_expires(local):
    key, q = _split_local_url(local.url("a.bin", expires_s=30))
    exp = int(q["exp"])
    assert local.verify(key, exp, q["sig"], now=exp)  # valid through its last second
    assert not local.verify(key, exp, q["sig"], now=exp + 1)
    assert not local.verify(key, exp, q["sig"], now=time.time() + 3600)


def test_local_signed_url_with_filename(local):
    url = local.url("exports/7.csv", filename="study 7 results.csv")
    key, q = _split_local_url(url)
    assert q["filename"] == "study 7 results.csv"
    assert local.verify(key, q["exp"], q["sig"], filename=q["filename"])
    assert not local.verify(key, q["exp"], q["sig"])  # the filename is signed too
    assert not local.verify(key, q["exp"], q["sig"], filename="evil.exe")


def test_local_url_base_path(tmp_path):
    store = LocalBlobStore(tmp_path, secret_key="s", base_path="/files/")
    assert store.url("k.bin").startswith("/files/k.bin?exp=")


def test_local_put_is_atomic(local, monkeypatch):
    local.put("model.bin", b"old complete version")

    class Exploding(io.RawIOBase):
        def __init__(self):
            self.sent = False

        def readable(self):
            return True

        def read(self, n=-1):
            if not self.sent:
                self.sent = True
                return b"half of the new"
            raise OSError("disk pulled out mid-upload")

    with pytest.raises(OSError, match="mid-upload"):
        local.put("model.bin", Exploding())
    assert local.get("model.bin") == b"old complete version"
    with pytest.raises(OSError):
        local.put("fresh.bin", Exploding())
    assert not local.exists("fresh.bin")
    # No temporary file was left behind next to the blobs.
    assert sorted(p.name for p in local.root.iterdir()) == ["model.bin"]


def test_local_symlink_cannot_escape_root(local, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"secret")
    (local.root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError):
        local.get("link/secret.txt")


# --------------------------------------------------------------------------------------------
# S3 specifics: presigned URLs over HTTP
# --------------------------------------------------------------------------------------------


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _fetch(url: str) -> tuple[int, bytes, Any]:
    """(status, body, headers); headers look up names case-insensitively."""
    try:
        with _OPENER.open(url, timeout=30) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers


def _sigv4_query_valid(url: str, access_key: str, secret_key: str, now: float | None = None) -> bool:
    """Check an S3 presigned GET URL the way S3 does (AWS Signature Version 4, query form)."""
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    query = dict(params)
    if query.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or "X-Amz-Signature" not in query:
        return False
    credential = query["X-Amz-Credential"].split("/")
    if len(credential) != 5 or credential[0] != access_key or credential[4] != "aws4_request":
        return False
    date, region, service = credential[1], credential[2], credential[3]
    amz_date = query["X-Amz-Date"]
    signed_at = dt.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    if not amz_date.startswith(date):
        return False
    if (now if now is not None else time.time()) > signed_at.timestamp() + int(query["X-Amz-Expires"]):
        return False
    signed_headers = query["X-Amz-SignedHeaders"].split(";")
    if signed_headers != ["host"]:
        return False

    def enc(text: str) -> str:
        return quote(text, safe="-_.~")

    canonical_query = "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted(params) if k != "X-Amz-Signature")
    canonical_request = "\n".join(
        ["GET", parts.path or "/", canonical_query, f"host:{parts.netloc}", "", "host", "UNSIGNED-PAYLOAD"]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    signing_key = ("AWS4" + secret_key).encode()
    for part in (date, region, service, "aws4_request"):
        signing_key = hmac.new(signing_key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(signing_key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, query["X-Amz-Signature"])


def _with_param(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    pairs = [(k, value if k == name else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in pairs)
    return urlunsplit(parts._replace(query=query))


def _without_signature(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=""))


@pytest.fixture
def s3(store):
    if not isinstance(store, S3BlobStore):
        pytest.skip("S3 only")
    return store


def test_s3_presigned_url_downloads(s3):
    data = os.urandom(300_000)
    s3.put("episodes/3/video.mp4", data, content_type="video/mp4")
    url = s3.url("episodes/3/video.mp4", expires_s=120)
    assert url.startswith(s3.endpoint_url + "/")
    target = s3.test_target
    assert _sigv4_query_valid(url, target.access_key, target.secret_key)
    status, body, headers = _fetch(url)
    assert status == 200
    assert body == data
    assert headers.get("Content-Type") == "video/mp4"


def test_s3_presigned_url_with_filename(s3):
    s3.put("exports/9.csv", b"a,b\n1,2\n", content_type="text/csv")
    url = s3.url("exports/9.csv", filename="study 9 – résultats.csv")
    status, body, headers = _fetch(url)
    assert status == 200 and body == b"a,b\n1,2\n"
    assert headers.get("Content-Disposition") == content_disposition("study 9 – résultats.csv")
    assert "attachment;" in headers["Content-Disposition"]
    assert "filename*=UTF-8''study%209%20%E2%80%93%20r%C3%A9sultats.csv" in headers["Content-Disposition"]


def test_s3_tampered_presigned_url_is_refused(s3):
    s3.put("private/artifact.bin", b"secret weights")
    target = s3.test_target
    url = s3.url("private/artifact.bin", expires_s=120, filename="weights.bin")
    assert _sigv4_query_valid(url, target.access_key, target.secret_key)

    # Without a signature an anonymous request to a private object is refused (moto enforces
    # this too).
    status, body, _ = _fetch(_without_signature(url))
    assert status == 403 and b"secret weights" not in body

    sig = dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    tampered = {
        "signature": _with_param(url, "X-Amz-Signature", ("0" if sig[0] != "0" else "1") + sig[1:]),
        "key": url.replace("/private/artifact.bin?", "/private/artifact.bi?"),
        "expiry": _with_param(url, "X-Amz-Expires", "604800"),
        "filename": _with_param(url, "response-content-disposition", 'attachment; filename="x.exe"'),
    }
    for what, bad_url in tampered.items():
        assert bad_url != url, what
        assert not _sigv4_query_valid(bad_url, target.access_key, target.secret_key), what
        if target.verifies_signatures:
            status, body, _ = _fetch(bad_url)
            assert status == 403, what
            assert b"secret weights" not in body, what

    # Signed for another secret: invalid; and the URL stops being valid once it expires.
    assert not _sigv4_query_valid(url, target.access_key, "some-other-secret")
    assert not _sigv4_query_valid(url, target.access_key, target.secret_key, now=time.time() + 121)


def test_s3_stores_content_type(s3):
    s3.put("panoramas/p1.jpg", b"\xff\xd8jpeg", content_type="image/jpeg")
    head = s3.client.head_object(Bucket=s3.bucket, Key="panoramas/p1.jpg")
    assert head["ContentType"] == "image/jpeg"


def test_s3_bucket_is_created_on_first_use(moto_endpoint):
    store = S3BlobStore(
        bucket=f"proctor-new-{uuid.uuid4().hex[:12]}",
        endpoint_url=moto_endpoint,
        access_key=DUMMY_KEY,
        secret_key=DUMMY_SECRET,
    )
    try:
        names = {b["Name"] for b in store.client.list_buckets().get("Buckets", [])}
        assert store.bucket not in names
        assert not store.exists("anything")  # first use creates the bucket
        names = {b["Name"] for b in store.client.list_buckets().get("Buckets", [])}
        assert store.bucket in names
        # A second store on the same, now existing, bucket works without complaint.
        again = S3BlobStore(
            bucket=store.bucket, endpoint_url=moto_endpoint, access_key=DUMMY_KEY, secret_key=DUMMY_SECRET
        )
        again.put("k", b"v")
        assert store.get("k") == b"v"
    finally:
        _drop_bucket(store)


def test_s3_prefix_keeps_keys_under_it(moto_endpoint):
    store = S3BlobStore(
        bucket=f"proctor-pfx-{uuid.uuid4().hex[:12]}",
        endpoint_url=moto_endpoint,
        access_key=DUMMY_KEY,
        secret_key=DUMMY_SECRET,
        prefix="/proctor/staging/",
    )
    try:
        store.put("a/b.txt", b"x")
        listed = store.client.list_objects_v2(Bucket=store.bucket)["Contents"]
        assert [o["Key"] for o in listed] == ["proctor/staging/a/b.txt"]
        assert store.get("a/b.txt") == b"x"
        assert _fetch(store.url("a/b.txt"))[1] == b"x"
    finally:
        _drop_bucket(store)


# --------------------------------------------------------------------------------------------
# get_store
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_cache():
    clear_store_cache()
    yield
    clear_store_cache()


def test_get_store_local(tmp_path, fresh_cache):
    settings = Settings(storage_url=f"file://{tmp_path / 'blob store'}", secret_key="k")
    store = get_store(settings)
    assert isinstance(store, LocalBlobStore)
    assert store.root == (tmp_path / "blob store").resolve()
    assert get_store(settings) is store  # cached
    assert get_store(Settings(storage_url=f"file://{tmp_path / 'other'}", secret_key="k")) is not store
    # Percent-encoded paths and file://localhost/ are accepted.
    encoded = get_store(Settings(storage_url=f"file://localhost{quote(str(tmp_path / 'a b'))}"))
    assert isinstance(encoded, LocalBlobStore) and encoded.root == (tmp_path / "a b").resolve()


def test_get_store_s3(moto_endpoint, fresh_cache):
    bucket = f"proctor-cfg-{uuid.uuid4().hex[:12]}"
    settings = Settings(
        storage_url=f"s3://{bucket}",
        s3_endpoint_url=moto_endpoint,
        s3_access_key=DUMMY_KEY,
        s3_secret_key=DUMMY_SECRET,
        s3_region=REGION,
    )
    store = get_store(settings)
    assert isinstance(store, S3BlobStore)
    assert store.bucket == bucket and store.endpoint_url == moto_endpoint and store.prefix == ""
    assert get_store(settings) is store
    try:
        store.put("k.bin", b"v")
        assert store.get("k.bin") == b"v"
    finally:
        _drop_bucket(store)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/var/blobs",
        "relative/blobs",
        "file://relative/blobs",
        "file:relative",
        "s3://",
        "gs://bucket",
        "http://minio:9000/bucket",
    ],
)
def test_get_store_refuses_unknown_urls(url, fresh_cache):
    with pytest.raises(ValueError, match="STORAGE_URL"):
        get_store(Settings(storage_url=url))


def test_content_disposition_plain_and_unicode():
    assert content_disposition("results.csv") == 'attachment; filename="results.csv"'
    value = content_disposition('naïve "quote".csv')
    assert value.startswith("attachment; filename=\"na_ve _quote_.csv\"; filename*=UTF-8''")
    with pytest.raises(ValueError):
        content_disposition("a\r\nSet-Cookie: x")
    with pytest.raises(ValueError):
        content_disposition("../x")
