"""Blob storage: a local folder (embedded default) or an S3 bucket (production, MinIO in compose).

Everything that stores bytes outside the database (agent artifacts, panoramas, episode videos,
exports) goes through a :class:`BlobStore`, obtained with :func:`get_store` from ``STORAGE_URL``:

* ``file:///abs/path`` -> :class:`LocalBlobStore` rooted at that folder. Download links are
  ``/blobs/<key>?exp=<unix>&sig=<hex>[&filename=<name>]``, signed with ``SECRET_KEY``; the web
  app's ``GET /blobs/{key:path}`` route checks them with :meth:`LocalBlobStore.verify` and streams
  :meth:`LocalBlobStore.open`, sending :func:`content_disposition` when a filename is given.
* ``s3://bucket`` (or ``s3://bucket/prefix``) -> :class:`S3BlobStore` using ``S3_ENDPOINT_URL``,
  ``S3_ACCESS_KEY``, ``S3_SECRET_KEY`` and ``S3_REGION``. Download links are presigned GET URLs.

Keys are relative POSIX paths such as ``agents/42/model.tar.gz``. The same rules apply to both
stores (see :func:`validate_key`), so a key that works locally also works on S3 and no key can
climb out of the local root. A missing key raises ``KeyError`` from ``get``, ``open`` and
``size`` in both stores; ``delete`` of a missing key is a no-op.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, runtime_checkable
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:  # pragma: no cover
    from app.config import Settings

__all__ = [
    "BlobStore",
    "LocalBlobStore",
    "S3BlobStore",
    "clear_store_cache",
    "content_disposition",
    "get_store",
    "validate_key",
]

# Temporary files of an unfinished local put() are named with this prefix, in the target's folder
# (so os.replace stays on one filesystem). Keys may not use it, so a temp file is never a blob.
_TMP_PREFIX = ".~tmp-"
_MAX_KEY_BYTES = 1024  # S3's limit on key length
_CHUNK = 1024 * 1024

Data = bytes | bytearray | memoryview | BinaryIO


# --------------------------------------------------------------------------------------------
# The interface
# --------------------------------------------------------------------------------------------


@runtime_checkable
class BlobStore(Protocol):
    """What the rest of the app may rely on, whichever backend is configured."""

    def put(self, key: str, data: Data, content_type: str = "application/octet-stream") -> None:
        """Store ``data`` (bytes or a binary file object, read to its end) under ``key``.

        Replaces an existing blob. Readers see either the old or the new blob, never a part.
        """

    def get(self, key: str) -> bytes:
        """The whole blob. ``KeyError`` if missing."""

    def open(self, key: str) -> BinaryIO:
        """A binary file object that streams the blob; close it (or use ``with``). ``KeyError``."""

    def exists(self, key: str) -> bool: ...

    def delete(self, key: str) -> None:
        """Remove the blob; no error if it is not there."""

    def size(self, key: str) -> int:
        """Size in bytes. ``KeyError`` if missing."""

    def url(self, key: str, expires_s: int = 3600, filename: str | None = None) -> str:
        """A signed download URL valid for ``expires_s`` seconds.

        With ``filename`` the download is served as an attachment with that name.
        """


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def _has_control_chars(text: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in text)


def validate_key(key: str) -> str:
    """Return ``key`` if it is an acceptable blob key, else raise ``ValueError`` saying why.

    A key is a relative POSIX path: non-empty segments separated by ``/``, no ``.`` or ``..``
    segments, no leading ``/``, no backslashes, no control characters, at most 1024 bytes.
    """
    if not isinstance(key, str):
        raise ValueError(f"blob key must be a string, got {type(key).__name__}")
    if not key:
        raise ValueError("blob key must not be empty")
    if len(key.encode("utf-8")) > _MAX_KEY_BYTES:
        raise ValueError(f"blob key is longer than {_MAX_KEY_BYTES} bytes")
    if "\\" in key:
        raise ValueError(f"blob key {key!r} contains a backslash; use '/' between parts")
    if _has_control_chars(key):
        raise ValueError(f"blob key {key!r} contains control characters")
    if key.startswith("/"):
        raise ValueError(f"blob key {key!r} is absolute; keys are relative paths")
    if len(key) >= 2 and key[1] == ":" and key[0].isalpha():
        raise ValueError(f"blob key {key!r} looks like a drive path; keys are relative paths")
    for part in key.split("/"):
        if part == "":
            raise ValueError(f"blob key {key!r} has an empty part (leading, trailing or '//')")
        if part in (".", ".."):
            raise ValueError(f"blob key {key!r} contains '{part}' as a part")
        if part.startswith(_TMP_PREFIX):
            raise ValueError(f"blob key {key!r}: parts starting with {_TMP_PREFIX!r} are reserved")
    return key


def _validate_filename(filename: str) -> str:
    if not isinstance(filename, str) or not filename.strip():
        raise ValueError("download filename must be a non-empty string")
    if _has_control_chars(filename) or "/" in filename or "\\" in filename:
        raise ValueError(f"download filename {filename!r} may not contain slashes or control characters")
    return filename


def content_disposition(filename: str) -> str:
    """``Content-Disposition`` value that makes a browser save the download as ``filename``.

    Non-ASCII names are sent as RFC 6266/5987 ``filename*`` with an ASCII fallback.
    """
    filename = _validate_filename(filename)
    fallback = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"%;' else "_" for ch in filename)
    value = f'attachment; filename="{fallback}"'
    if fallback != filename:
        value += f"; filename*=UTF-8''{quote(filename, safe='')}"
    return value


def _as_reader(data: Data) -> BinaryIO:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(data))
    if hasattr(data, "read"):
        return data
    raise TypeError(f"put() takes bytes or a binary file object, not {type(data).__name__}")


def _copy(reader: BinaryIO, write: Any) -> None:
    while True:
        chunk = reader.read(_CHUNK)
        if not chunk:
            return
        if isinstance(chunk, str):
            raise TypeError("put() needs a binary file object; this one returned str")
        write(chunk)


# --------------------------------------------------------------------------------------------
# Local folder
# --------------------------------------------------------------------------------------------


class LocalBlobStore:
    """Blobs as files under ``root``; links signed with HMAC-SHA256 of ``secret_key``.

    ``put`` writes a temporary file next to the target, fsyncs it and ``os.replace``s it into
    place, so a crash never leaves a half-written blob under a key. ``content_type`` is not
    stored; the download route can guess it from the key's extension.
    """

    def __init__(self, root: Path | str, secret_key: str, base_path: str = "/blobs"):
        if not secret_key:
            raise ValueError("LocalBlobStore needs a non-empty secret_key to sign download URLs")
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        # Blobs are the store's user's alone: a model's sandbox runs as another user (nobody).
        if self.root.stat().st_uid == os.geteuid():
            os.chmod(self.root, 0o700)
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else ""
        # A key of its own, derived from SECRET_KEY, so a blob signature is never valid elsewhere.
        self._signing_key = hmac.new(
            secret_key.encode("utf-8"), b"proctor/storage/blob-url/v1", hashlib.sha256
        ).digest()

    def __repr__(self) -> str:
        return f"LocalBlobStore(root={str(self.root)!r})"

    # paths ----------------------------------------------------------------------------------

    def path(self, key: str) -> Path:
        """The file that holds ``key`` (it may not exist). ``ValueError`` for a bad key."""
        validate_key(key)
        path = self.root.joinpath(*key.split("/"))
        # Defence in depth: a symlink inside the root must not lead outside it.
        resolved = path.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ValueError(f"blob key {key!r} resolves outside the storage root")
        return path

    # BlobStore --------------------------------------------------------------------------------

    def put(self, key: str, data: Data, content_type: str = "application/octet-stream") -> None:
        path = self.path(key)
        reader = _as_reader(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        fd = os.open(tmp, flags, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                _copy(reader, out.write)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def get(self, key: str) -> bytes:
        with self.open(key) as f:
            return f.read()

    def open(self, key: str) -> BinaryIO:
        path = self.path(key)
        try:
            return open(path, "rb")  # noqa: SIM115 - the caller closes it
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(key) from None

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def delete(self, key: str) -> None:
        path = self.path(key)
        try:
            if path.is_file():
                path.unlink()
        except FileNotFoundError:
            pass

    def size(self, key: str) -> int:
        path = self.path(key)
        if not path.is_file():
            raise KeyError(key)
        try:
            return path.stat().st_size
        except FileNotFoundError:
            raise KeyError(key) from None

    def url(self, key: str, expires_s: int = 3600, filename: str | None = None) -> str:
        validate_key(key)
        if expires_s <= 0:
            raise ValueError("expires_s must be positive")
        if filename is not None:
            _validate_filename(filename)
        exp = int(time.time()) + int(expires_s)
        sig = self._sign(key, exp, filename)
        url = f"{self.base_path}/{quote(key, safe='/')}?exp={exp}&sig={sig}"
        if filename is not None:
            url += f"&filename={quote(filename, safe='')}"
        return url

    # signatures -------------------------------------------------------------------------------

    def _sign(self, key: str, exp: int, filename: str | None) -> str:
        # Key and filename have no control characters, so "\n" separates fields unambiguously.
        message = "\n".join(("v1", key, str(exp), filename or "")).encode("utf-8")
        return hmac.new(self._signing_key, message, hashlib.sha256).hexdigest()

    def verify(
        self,
        key: str,
        exp: int | str | None,
        sig: str | None,
        filename: str | None = None,
        *,
        now: float | None = None,
    ) -> bool:
        """True if ``sig`` is this store's signature of (key, exp, filename) and exp is not past.

        Pass the route's decoded path and query values as they come (``exp`` may be a string;
        ``filename`` is the ``filename`` query parameter or ``None``). Malformed input gives
        ``False``, never an exception. The comparison is constant-time.
        """
        try:
            validate_key(key)
            if filename is not None:
                _validate_filename(filename)
            if isinstance(exp, bool):
                return False
            exp_int = int(exp) if isinstance(exp, int) else int(str(exp).strip(), 10)
            if not isinstance(sig, str):
                return False
            sig_bytes = sig.encode("ascii")
        except (ValueError, TypeError, UnicodeEncodeError):
            return False
        if exp_int < (time.time() if now is None else now):
            return False
        expected = self._sign(key, exp_int, filename).encode("ascii")
        return hmac.compare_digest(expected, sig_bytes)


# --------------------------------------------------------------------------------------------
# S3 (AWS, MinIO, anything S3-compatible)
# --------------------------------------------------------------------------------------------


class _BodyRaw(io.RawIOBase):
    """Adapts botocore's StreamingBody to io.RawIOBase so callers get a real BinaryIO."""

    def __init__(self, body: Any):
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        chunk = self._body.read(len(view))
        n = len(chunk)
        view[:n] = chunk
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._body.close()
            finally:
                super().close()


_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}


def _error_code(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _http_status(err: Exception) -> int | None:
    response = getattr(err, "response", None) or {}
    status: int | None = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status


class S3BlobStore:
    """Blobs in one S3 bucket, optionally under a key prefix.

    Empty or ``None`` credentials and endpoint fall back to boto3's usual chain (environment,
    instance role), which is what production on AWS wants; MinIO needs ``endpoint_url`` and keys.
    The bucket is created on first use if it does not exist (:meth:`ensure_bucket`).
    """

    def __init__(
        self,
        bucket: str,
        endpoint_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str = "us-east-1",
        prefix: str = "",
    ):
        import boto3
        from botocore.config import Config

        if not bucket:
            raise ValueError("S3BlobStore needs a bucket name")
        self.bucket = bucket
        self.endpoint_url = endpoint_url or None
        self.region = region or "us-east-1"
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        if self.prefix:
            validate_key(self.prefix.rstrip("/"))
        s3_options: dict[str, Any] = {}
        if self.endpoint_url:
            # MinIO and other self-hosted endpoints only do path-style addressing reliably.
            s3_options["addressing_style"] = "path"
        config = Config(
            signature_version="s3v4",
            s3=s3_options or None,
            retries={"max_attempts": 4, "mode": "standard"},
            connect_timeout=10,
            read_timeout=60,
        )
        self._client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=access_key or None,
            aws_secret_access_key=secret_key or None,
            region_name=self.region,
            config=config,
        )
        self._bucket_ready = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"S3BlobStore(bucket={self.bucket!r}{where}, prefix={self.prefix!r})"

    @property
    def client(self) -> Any:
        """The underlying boto3 client, for the rare operation the interface lacks."""
        return self._client

    def _k(self, key: str) -> str:
        return self.prefix + validate_key(key)

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist; cheap after the first call."""
        if self._bucket_ready:
            return
        from botocore.exceptions import ClientError

        with self._lock:
            if self._bucket_ready:
                return
            try:
                self._client.head_bucket(Bucket=self.bucket)
            except ClientError as err:
                code, status = _error_code(err), _http_status(err)
                if status == 403 or code in ("403", "AccessDenied", "Forbidden"):
                    # Credentials limited to objects may not see the bucket itself; let the
                    # object operations succeed or fail on their own.
                    self._bucket_ready = True
                    return
                if status != 404 and code not in ("404", "NoSuchBucket", "NotFound"):
                    raise
                kwargs: dict[str, Any] = {"Bucket": self.bucket}
                if self.region != "us-east-1":
                    kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
                try:
                    self._client.create_bucket(**kwargs)
                except ClientError as create_err:
                    if _error_code(create_err) != "BucketAlreadyOwnedByYou":
                        raise
            self._bucket_ready = True

    def _head(self, key: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        self.ensure_bucket()
        try:
            head: dict[str, Any] = self._client.head_object(Bucket=self.bucket, Key=self._k(key))
            return head
        except ClientError as err:
            if _error_code(err) in _NOT_FOUND_CODES or _http_status(err) == 404:
                return None
            raise

    # BlobStore --------------------------------------------------------------------------------

    def put(self, key: str, data: Data, content_type: str = "application/octet-stream") -> None:
        full_key = self._k(key)
        reader = _as_reader(data)
        self.ensure_bucket()
        # upload_fileobj switches to a multipart upload for large bodies; S3 makes the object
        # visible only when the upload completes, so readers never see a partial blob.
        self._client.upload_fileobj(reader, self.bucket, full_key, ExtraArgs={"ContentType": content_type})

    def open(self, key: str) -> BinaryIO:
        from botocore.exceptions import ClientError

        full_key = self._k(key)
        self.ensure_bucket()
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=full_key)
        except ClientError as err:
            if _error_code(err) in _NOT_FOUND_CODES or _http_status(err) == 404:
                raise KeyError(key) from None
            raise
        return io.BufferedReader(_BodyRaw(response["Body"]), buffer_size=256 * 1024)

    def get(self, key: str) -> bytes:
        with self.open(key) as f:
            return f.read()

    def exists(self, key: str) -> bool:
        return self._head(key) is not None

    def delete(self, key: str) -> None:
        full_key = self._k(key)
        self.ensure_bucket()
        self._client.delete_object(Bucket=self.bucket, Key=full_key)

    def size(self, key: str) -> int:
        head = self._head(key)
        if head is None:
            raise KeyError(key)
        return int(head["ContentLength"])

    def url(self, key: str, expires_s: int = 3600, filename: str | None = None) -> str:
        full_key = self._k(key)
        if expires_s <= 0:
            raise ValueError("expires_s must be positive")
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": full_key}
        if filename is not None:
            params["ResponseContentDisposition"] = content_disposition(filename)
        signed: str = self._client.generate_presigned_url("get_object", Params=params, ExpiresIn=int(expires_s))
        return signed


# --------------------------------------------------------------------------------------------
# From settings
# --------------------------------------------------------------------------------------------

_stores: dict[tuple[str, ...], BlobStore] = {}
_stores_lock = threading.Lock()


def _store_from_settings(settings: Settings) -> BlobStore:
    storage_url = (settings.storage_url or "").strip()
    parts = urlsplit(storage_url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(
                f"STORAGE_URL {storage_url!r}: a local folder must be an absolute path written "
                "as file:///abs/path (three slashes)"
            )
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise ValueError(f"STORAGE_URL {storage_url!r}: the folder must be an absolute path")
        return LocalBlobStore(Path(path), secret_key=settings.secret_key)
    if scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"STORAGE_URL {storage_url!r}: write the bucket as s3://bucket-name")
        return S3BlobStore(
            bucket=parts.netloc,
            endpoint_url=settings.s3_endpoint_url or None,
            access_key=settings.s3_access_key or None,
            secret_key=settings.s3_secret_key or None,
            region=settings.s3_region or "us-east-1",
            prefix=unquote(parts.path),
        )
    raise ValueError(
        f"STORAGE_URL {storage_url!r} is not supported: use file:///absolute/folder for a local "
        "folder or s3://bucket (with S3_ENDPOINT_URL, S3_ACCESS_KEY, S3_SECRET_KEY, S3_REGION) "
        "for S3 or MinIO"
    )


def get_store(settings: Settings | None = None) -> BlobStore:
    """The blob store that ``STORAGE_URL`` names; one instance per distinct configuration."""
    if settings is None:
        from app.config import get_settings

        settings = get_settings()
    cache_key = (
        settings.storage_url,
        settings.s3_endpoint_url,
        settings.s3_access_key,
        settings.s3_secret_key,
        settings.s3_region,
        settings.secret_key,
    )
    with _stores_lock:
        store = _stores.get(cache_key)
        if store is None:
            store = _store_from_settings(settings)
            _stores[cache_key] = store
        return store


def clear_store_cache() -> None:
    """Forget cached stores (tests that change settings)."""
    with _stores_lock:
        _stores.clear()
