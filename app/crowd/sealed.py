"""A researcher's platform token, sealed at rest: Fernet (AES-128-CBC with an HMAC) under a key
derived from SECRET_KEY by HKDF, so a copy of the database without the key reads nothing.
A token sealed under another SECRET_KEY cannot be opened: the researcher stores it again."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.config import get_settings


class Unreadable(Exception):
    """The sealed token does not open under this SECRET_KEY."""


def _fernet() -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"proctor/crowd-token", info=b"fernet").derive(
        get_settings().secret_key.encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))


def seal(token: str) -> str:
    return _fernet().encrypt(token.encode()).decode("ascii")


def unseal(sealed: str) -> str:
    try:
        return _fernet().decrypt(sealed.encode("ascii")).decode()
    except InvalidToken as exc:
        raise Unreadable(
            "the stored platform token was sealed under another SECRET_KEY: store the token again"
        ) from exc
