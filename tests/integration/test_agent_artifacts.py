"""Agent uploads (docs/agents.md): what a researcher sees when uploading a speaker or listener.

Uploads go through the API with an API token; the validation job runs in this process, as the
embedded worker would run it (jobs.run_queued_once). Models are tiny built-in ones (hidden 16).
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as save_safetensors
from sqlalchemy import func, select
from torch import Tensor, nn

from app import jobs
from app.agents import artifacts
from app.kinds.navigation import architectures
from app.agents.models import Agent, AgentArtifact
from app.auth.security import create_token
from app.config import get_settings
from app.studies import services
from tests.conftest import make_user
from workers.navigation import features
from workers.navigation.features import Vocabulary
from workers.navigation.listener import Listener
from workers.navigation.loading import load_artifact
from workers.navigation.speaker import Speaker

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "model files checked and validated in the sandbox; the rows are plain inserts"
)


WORDS = Vocabulary.build(["walk past the bed and turn left into the kitchen . stop by the red sofa"]).words


def scripted(model: nn.Module) -> bytes:
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buf)
    return buf.getvalue()


class HalfListener(nn.Module):
    """A listener that forgot act()."""

    def __init__(self):
        super().__init__()
        self.inner = Listener(WORDS, hidden=16, embed=8)

    @torch.jit.export
    def feature_version(self) -> str:
        return self.inner.features

    @torch.jit.export
    def vocabulary(self) -> list[str]:
        return self.inner.words

    @torch.jit.export
    def encode(self, tokens: Tensor, token_mask: Tensor) -> tuple[Tensor, Tensor]:
        return self.inner.encode(tokens, token_mask)

    def forward(self, tokens: Tensor, token_mask: Tensor) -> tuple[Tensor, Tensor]:
        return self.encode(tokens, token_mask)


class WideScoreSpeaker(Speaker):
    """score() keeps a trailing axis: [B, 1] instead of [B]."""

    @torch.jit.export
    def score(self, steps: Tensor, step_mask: Tensor, tokens: Tensor, token_mask: Tensor) -> Tensor:
        logp = self.forward(steps, step_mask, tokens)
        picked = logp.gather(2, tokens.unsqueeze(-1)).squeeze(-1)
        return (picked * token_mask.to(picked.dtype)).sum(1, keepdim=True)


@pytest.fixture
def researcher(session, client):
    owner = make_user(session, "researcher")
    agent = services.register_agent(session, owner, "navigation", "tiny")
    token = create_token(session, owner)
    session.commit()
    client.headers["Authorization"] = f"Bearer {token}"
    return agent


def upload(client, agent_id, data: bytes, role: str, fmt: str, config: dict | None = None, **kw):
    form = {"role": role, "format": fmt}
    if config is not None:
        form["config"] = json.dumps(config)
    return client.post(
        f"/api/v1/agents/{agent_id}/artifacts",
        data=form,
        files={"file": ("model.bin", data, "application/octet-stream")},
        **kw,
    )


def verdicts(client, agent_id) -> dict[int, dict]:
    jobs.run_queued_once()  # what the worker does
    r = client.get(f"/api/v1/agents/{agent_id}/artifacts")
    assert r.status_code == 200, r.text
    return {a["version"]: a for a in r.json()}


def blobs(tmp_path: Path) -> list[Path]:
    root = tmp_path / "blobs" / "agents"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def count(session) -> int:
    session.expire_all()
    return session.scalar(select(func.count()).select_from(AgentArtifact))


def test_the_app_copy_of_the_feature_version_matches_the_workers():
    assert architectures.FEATURES_VERSION == features.FEATURES_VERSION
    assert architectures.SPECIALS == features.SPECIALS


def test_valid_uploads_become_valid_and_versions_count_up(client, researcher, session):
    speaker = Speaker(WORDS, hidden=16, embed=8)
    r = upload(client, researcher.id, scripted(speaker), "speaker", "torchscript")
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "pending" and r.json()["version"] == 1

    listener = Listener(WORDS, hidden=16, embed=8)
    r = upload(
        client, researcher.id, save_safetensors(listener.state_dict()), "listener", "safetensors", listener.config()
    )
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 2

    got = verdicts(client, researcher.id)
    assert got[1]["state"] == "valid" and "speaker" in got[1]["verdict"], got[1]
    assert got[2]["state"] == "valid" and "listener" in got[2]["verdict"], got[2]

    # what generation will load: the same model, giving the same scores
    row = session.scalar(select(AgentArtifact).where(AgentArtifact.version == 2))
    loaded = load_artifact(session, row)
    tokens = torch.tensor([[4, 5, 2]])
    mask = tokens != 0
    with torch.no_grad():
        assert torch.allclose(loaded.encode(tokens, mask)[1], listener.eval().encode(tokens, mask)[1])


def test_a_listener_without_act_is_invalid_and_cannot_be_loaded(client, researcher, session):
    r = upload(client, researcher.id, scripted(HalfListener()), "listener", "torchscript")
    assert r.status_code == 201, r.text
    got = verdicts(client, researcher.id)[1]
    assert got["state"] == "invalid"
    assert "missing method act()" in got["verdict"]
    row = session.scalar(select(AgentArtifact))
    with pytest.raises(ValueError, match="invalid"):
        load_artifact(session, row)


def test_a_wrong_output_shape_names_the_method_and_the_shape(client, researcher):
    r = upload(client, researcher.id, scripted(WideScoreSpeaker(WORDS, hidden=16, embed=8)), "speaker", "torchscript")
    assert r.status_code == 201, r.text
    got = verdicts(client, researcher.id)[1]
    assert got["state"] == "invalid"
    assert got["verdict"] == "score() returned shape [3, 1], expected [3]"


class WordySpeaker(Speaker):
    """vocabulary() answers with more than any vocabulary: many words, or one very long word."""

    def __init__(self, words, n: int, chars: int):
        super().__init__(words, hidden=8, embed=8)
        self.n, self.chars = n, chars

    @torch.jit.export
    def vocabulary(self) -> list[str]:
        stem = ""
        for _ in range(self.chars):
            stem += "w"
        out = list(self.words)
        for i in range(self.n):
            out.append(stem + str(i))
        return out


@pytest.mark.parametrize(
    "n, chars, verdict",
    [
        (60_000, 1, f"vocabulary() must hold at most 50000 words, not {60_000 + len(WORDS)}"),
        (1, 10_000, "vocabulary() has an empty word, a word with a space or one longer than 64 characters"),
    ],
)
def test_a_speakers_vocabulary_is_bounded_in_words_and_word_length(client, researcher, n, chars, verdict):
    """Issue 26.9: as A3DS and Hexagons bound theirs, before generation builds on it."""
    upload(client, researcher.id, scripted(WordySpeaker(WORDS, n, chars)), "speaker", "torchscript")
    got = verdicts(client, researcher.id)[1]
    assert got["state"] == "invalid" and got["verdict"] == verdict, got


def test_a_speaker_uploaded_as_a_listener_is_told_what_is_missing(client, researcher):
    upload(client, researcher.id, scripted(Speaker(WORDS, hidden=16, embed=8)), "listener", "torchscript")
    got = verdicts(client, researcher.id)[1]
    assert got["state"] == "invalid" and "encode(), act()" in got["verdict"]


@pytest.mark.parametrize("fmt", ["torchscript", "safetensors"])
def test_pickles_are_refused_and_nothing_is_stored(client, researcher, session, tmp_path, fmt):
    state = Speaker(WORDS, hidden=16, embed=8).state_dict()
    raw = pickle.dumps({"weights": [1, 2, 3]})
    buf = io.BytesIO()
    torch.save(state, buf)  # a zip of pickled objects: looks like a zip, is a pickle
    for data in (raw, buf.getvalue()):
        config = Speaker(WORDS, hidden=16, embed=8).config() if fmt == "safetensors" else None
        r = upload(client, researcher.id, data, "speaker", fmt, config)
        assert r.status_code == 422, r.text
        assert "never unpickled" in r.json()["detail"], r.json()
    assert count(session) == 0 and blobs(tmp_path) == []
    assert jobs.run_queued_once() == 0


def test_an_oversize_upload_is_refused(client, researcher, session, tmp_path, monkeypatch):
    data = scripted(Speaker(WORDS, hidden=16, embed=8))
    monkeypatch.setenv("MAX_ARTIFACT_BYTES", str(len(data) - 1))
    get_settings.cache_clear()
    r = upload(client, researcher.id, data, "speaker", "torchscript")
    assert r.status_code == 422 and "larger than the" in r.json()["detail"], r.text
    assert r.json()["field"] == "file"
    assert count(session) == 0 and blobs(tmp_path) == []
    monkeypatch.delenv("MAX_ARTIFACT_BYTES")
    get_settings.cache_clear()


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"architecture": "transformer"}, "config.architecture", "unknown architecture"),
        ({"architecture": "gru-speaker"}, "config.architecture", "is a speaker"),
        ({"feature_version": "x"}, "config.feature_version", "does not match proctor.nav.features/1"),
        ({"hidden": "big"}, "config.hidden", "integer"),
        ({"words": ["go", "left"]}, "config.words", "must start with <pad>"),
    ],
)
def test_a_wrong_config_names_the_field(client, researcher, session, tmp_path, change, field, words):
    listener = Listener(WORDS, hidden=16, embed=8)
    r = upload(
        client,
        researcher.id,
        save_safetensors(listener.state_dict()),
        "listener",
        "safetensors",
        {**listener.config(), **change},
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and words in r.json()["detail"], r.json()
    assert count(session) == 0 and blobs(tmp_path) == []


def test_weights_that_do_not_fit_the_config_are_invalid(client, researcher):
    listener = Listener(WORDS, hidden=16, embed=8)
    r = upload(
        client,
        researcher.id,
        save_safetensors(listener.state_dict()),
        "listener",
        "safetensors",
        {**listener.config(), "hidden": 32},
    )
    assert r.status_code == 201, r.text
    got = verdicts(client, researcher.id)[1]
    assert got["state"] == "invalid" and "size mismatch" in got["verdict"], got


def test_another_researcher_can_neither_see_nor_upload(client, researcher, session):
    upload(client, researcher.id, scripted(Speaker(WORDS, hidden=16, embed=8)), "speaker", "torchscript")
    other = make_user(session, "researcher")
    token = create_token(session, other)
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get(f"/api/v1/agents/{researcher.id}/artifacts", headers=headers).status_code == 404
    r = upload(
        client, researcher.id, scripted(Speaker(WORDS, hidden=16, embed=8)), "speaker", "torchscript", headers=headers
    )
    assert r.status_code == 404
    assert count(session) == 1


def test_only_navigation_agents_take_models(client, researcher, session):
    from app.auth.models import User

    tom = services.register_agent(session, session.get(User, researcher.owner_id), "tom", "tom-agent")
    session.commit()
    r = upload(client, tom.id, scripted(Speaker(WORDS, hidden=16, embed=8)), "speaker", "torchscript")
    # The stored agent's kind refuses it, not the request's fields: a conflict (issue 26).
    assert r.status_code == 409 and r.json()["field"] == "agent", r.text


def test_the_agents_page_uploads_and_shows_the_verdict(client, session):
    from tests.conftest import login

    owner = make_user(session, "researcher")
    session.commit()
    csrf = login(client, owner)
    assert 'href="/agents"' in client.get("/studies").text  # linked from the nav
    r = client.post("/agents", data={"csrf_token": csrf, "name": "page-speaker"}, follow_redirects=True)
    assert r.status_code == 200 and "page-speaker" in r.text
    agent_id = session.scalar(select(Agent.id).where(Agent.name == "page-speaker"))
    files = {"file": ("speaker.pt", scripted(Speaker(WORDS, hidden=16, embed=8)), "application/octet-stream")}
    r = client.post(
        f"/agents/{agent_id}/artifacts",
        files=files,
        follow_redirects=True,
        data={"csrf_token": csrf, "role": "speaker", "format": "torchscript"},
    )
    assert r.status_code == 200 and "pending" in r.text
    assert f'hx-get="/agents/{agent_id}/artifacts"' in r.text  # polls while pending
    jobs.run_queued_once()
    rows = client.get(f"/agents/{agent_id}/artifacts").text
    assert 'class="state valid"' in rows and "score() and sample() ran" in rows and "hx-get" not in rows

    r = client.post(
        f"/agents/{agent_id}/artifacts",
        data={"csrf_token": csrf, "role": "speaker", "format": "torchscript"},
        files={"file": ("w.pkl", pickle.dumps([1]), "application/octet-stream")},
    )
    assert r.status_code == 422 and "never unpickled" in r.text


# ---- refusals judged from the bytes: zip bombs and malformed safetensors ---------------------


def torchscript_zip(members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    """A zip shaped like torch.jit.save's (a code/ folder and data.pkl), built here."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return buf.getvalue()


def refused(client, agent, session, tmp_path, data: bytes, fmt: str, config=None) -> str:
    r = upload(client, agent.id, data, "speaker", fmt, config)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "file", r.json()
    assert count(session) == 0 and blobs(tmp_path) == []  # no row, no blob
    assert jobs.run_queued_once() == 0  # and no validation job
    return r.json()["detail"]


def test_a_zip_bomb_is_refused_before_anything_is_unpacked(client, researcher, session, tmp_path, monkeypatch):
    # 8 MiB of zeros deflate to a few KiB: the upload is small, what it unpacks to is not.
    bomb = torchscript_zip(
        {"model/code/__torch__.py": b"", "model/data.pkl": b"\x80\x02}q\x00.", "model/data/0": bytes(8 << 20)},
        zipfile.ZIP_DEFLATED,
    )
    assert len(bomb) < 64 * 1024
    monkeypatch.setenv("MAX_ARTIFACT_BYTES", str(4 << 20))
    get_settings.cache_clear()
    try:
        detail = refused(client, researcher, session, tmp_path, bomb, "torchscript")
    finally:
        monkeypatch.delenv("MAX_ARTIFACT_BYTES")
        get_settings.cache_clear()
    assert detail == "field 'file': the archive unpacks to more than the 4 MB limit"


def test_a_zip_that_declares_a_huge_member_is_refused(client, researcher, session, tmp_path):
    """The declared size counts (nothing is inflated to find out): a member whose central
    directory entry claims ~4 GB is refused at the default 200 MB limit."""
    data = bytearray(
        torchscript_zip(
            {"model/code/__torch__.py": b"", "model/data.pkl": b"\x80\x02}q\x00.", "model/data/0": b"x" * 100}
        )
    )
    entry = data.rfind(b"PK\x01\x02")  # the last central directory entry: model/data/0
    assert data[entry + 46 : entry + 46 + 12] == b"model/data/0"
    data[entry + 24 : entry + 28] = struct.pack("<I", 0xFFFFFFF0)  # its uncompressed size
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        assert z.getinfo("model/data/0").file_size == 0xFFFFFFF0
    detail = refused(client, researcher, session, tmp_path, bytes(data), "torchscript")
    assert detail == "field 'file': the archive unpacks to more than the 200 MB limit"


def safetensors_bytes(header: dict | bytes, body: bytes, length: int | None = None) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + body


GOOD = {
    "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
}


def test_a_well_formed_safetensors_file_passes_the_checks():
    """The checks below refuse only what is broken: the real library's files pass them."""
    import numpy as np
    from safetensors.numpy import save

    artifacts.check_safetensors(safetensors_bytes(GOOD, bytes(40)))
    artifacts.check_safetensors(
        save(
            {
                "w": np.zeros((3, 5), np.float32),
                "b": np.zeros(7, np.int64),
                "h": np.zeros((2, 2), np.float16),
                "e": np.zeros((0, 4), np.float32),
            }
        )
    )
    artifacts.check_safetensors(save_safetensors(Listener(WORDS, hidden=16, embed=8).state_dict()))


@pytest.mark.parametrize(
    "data, message",
    [
        (
            safetensors_bytes(GOOD, bytes(40), length=10_000),
            f"the safetensors header length (10000 bytes) runs past the end of the file "
            f"({8 + len(json.dumps(GOOD)) + 40} bytes)",
        ),
        (
            safetensors_bytes(b'{"a": {"dtype": "F32", "shape": [2, 3]', bytes(40)),
            "the safetensors header is not valid JSON: Expecting ',' delimiter at byte 38",
        ),
        (safetensors_bytes(b'{"a": 1, "a\xff": 2}', bytes(8)), "the safetensors header is not UTF-8 JSON"),
        (
            safetensors_bytes({**GOOD, "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 48]}}, bytes(40)),
            "tensor 'b': data_offsets [24, 48] run past the end of the data (40 bytes)",
        ),
        (
            safetensors_bytes({**GOOD, "b": {"dtype": "I64", "shape": [2], "data_offsets": [16, 32]}}, bytes(40)),
            "tensors 'a' and 'b' overlap (bytes 0-24 and 16-32)",
        ),
        (
            safetensors_bytes({**GOOD, "b": {"dtype": "Q8", "shape": [2], "data_offsets": [24, 40]}}, bytes(40)),
            "tensor 'b' has an unknown dtype 'Q8'",
        ),
        (
            safetensors_bytes({**GOOD, "a": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 24]}}, bytes(40)),
            "tensor 'a': shape [2, 4] of F32 needs 32 bytes, but data_offsets span 24",
        ),
        (
            safetensors_bytes({**GOOD, "a": {"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 24]}}, bytes(40)),
            "tensor 'a': shape [2, 3] of F64 needs 48 bytes, but data_offsets span 24",
        ),
        (
            safetensors_bytes({**GOOD, "a": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 24]}}, bytes(40)),
            "tensor 'a': the shape must be a list of non-negative integers, got [2, -3]",
        ),
        (
            safetensors_bytes({**GOOD, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [24, 0]}}, bytes(40)),
            "tensor 'a': data_offsets must be [begin, end] with 0 <= begin <= end, got [24, 0]",
        ),
        (safetensors_bytes({"__metadata__": {"format": "pt"}}, b""), "the safetensors file holds no tensors"),
    ],
    ids=[
        "header-past-end",
        "header-not-json",
        "header-not-utf8",
        "offsets-past-end",
        "overlap",
        "unknown-dtype",
        "shape-vs-span",
        "dtype-vs-span",
        "negative-shape",
        "offsets-reversed",
        "no-tensors",
    ],
)
def test_malformed_safetensors_are_refused_naming_the_problem(client, researcher, session, tmp_path, data, message):
    config = Speaker(WORDS, hidden=16, embed=8).config()
    detail = refused(client, researcher, session, tmp_path, data, "safetensors", config)
    assert detail == f"field 'file': {message}"


@pytest.mark.parametrize(
    "fmt, data, message",
    [
        (
            "torchscript",
            safetensors_bytes(GOOD, bytes(40)),
            "not a TorchScript archive: torch.jit.save writes a zip file (it looks like safetensors: "
            "choose format safetensors and send the config)",
        ),
        ("torchscript", b"just some bytes, not a zip", "not a TorchScript archive: torch.jit.save writes a zip file"),
        (
            "torchscript",
            b"PK\x03\x04 a zip header and nothing after it",
            "not a TorchScript archive: torch.jit.save writes a zip file",
        ),
        (
            "torchscript",
            torchscript_zip({"model/weights.bin": b"0" * 8}),
            "not a TorchScript archive: the zip has no code/ folder and data.pkl that torch.jit.save writes",
        ),
        (
            "safetensors",
            torchscript_zip({"model/code/__torch__.py": b"", "model/data.pkl": b"."}),
            f"refused: {artifacts._CHECKPOINT}",
        ),
        ("safetensors", torchscript_zip({"weights.npy": b"0" * 8}), "not a safetensors file: this is a zip archive"),
        (
            "safetensors",
            b"\x05\x00\x00\x00\x00\x00\x00\x00[1,2]",
            "not a safetensors file: it must start with an 8-byte little-endian header length and a JSON header",
        ),
        (
            "safetensors",
            safetensors_bytes(b"[1, 2, 3]", b""),
            "not a safetensors file: it must start with an 8-byte little-endian header length and a JSON header",
        ),
        (
            "safetensors",
            safetensors_bytes({"a": {"dtype": "F32", "shape": [1]}}, bytes(4)),
            "the safetensors header entry 'a' lacks dtype, shape or data_offsets",
        ),
    ],
    ids=[
        "ts-given-safetensors",
        "ts-not-zip",
        "ts-broken-zip",
        "ts-no-code",
        "st-given-checkpoint",
        "st-given-zip",
        "st-no-json-object-start",
        "st-header-array",
        "st-entry-incomplete",
    ],
)
def test_check_format_names_what_the_file_is(fmt, data, message):
    with pytest.raises(artifacts.InputError) as refused_:
        artifacts.check_format(fmt, data)
    assert (refused_.value.field, refused_.value.message) == ("file", message)


def test_an_empty_file_is_refused():
    with pytest.raises(artifacts.InputError) as refused_:
        artifacts.check_size(b"")
    assert str(refused_.value) == "field 'file': the file is empty"
