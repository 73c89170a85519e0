"""A typed client for Proctor's JSON API (/api/v1), on httpx. It imports nothing from the
server (`app`), so a researcher's script needs only this package and httpx.

    from proctor_client import Client

    with Client("http://127.0.0.1:8000", token="pct_...") as pc:
        study = pc.create_study("questions.csv", title="Pilot", kind="tom")
        pc.set_state(study.id, "live")
        print(pc.leaderboard(study.id).to_csv())

Every refusal of the server raises ApiError (or its subclass for the status) carrying the
server's own message, and the field or line it names.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Union
from urllib.parse import urljoin, urlsplit

import httpx

from proctor_client.types import (
    FINAL_STATES,
    Agent,
    Artifact,
    GenerationRun,
    Job,
    Kind,
    Leaderboard,
    Study,
)

# A file to upload: a path, its bytes, or an open binary file.
FileLike = Union[str, os.PathLike, bytes, IO[bytes]]


class ProctorError(Exception):
    """Anything the client could not do."""


class ServerUnreachable(ProctorError):
    """No answer from the server (wrong URL, server down, network error, timeout)."""


class ApiError(ProctorError):
    """The server refused the request: `status` (4xx or 5xx), its message `detail`, and the
    `field` or upload `line` it names when the input says where."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        method: str = "",
        path: str = "",
        field: str | None = None,
        line: int | None = None,
        body: Any = None,
    ):
        self.status, self.detail, self.method, self.path = status, detail, method, path
        self.field, self.line, self.body = field, line, body
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" ({self.method} {self.path})" if self.method else ""
        return f"{self.status}{where}: {self.detail}"


class Unauthorized(ApiError):
    """401: no token, or a wrong, revoked or expired one."""


class Forbidden(ApiError):
    """403: the account may not do this (e.g. a researcher calling an admin route)."""


class NotFound(ApiError):
    """404: no such thing among yours (another researcher's are not revealed to exist)."""


class InvalidInput(ApiError):
    """400 or 422: bad input; `field` / `line` say where."""


class JobFailed(ProctorError):
    """A job watched to its end finished failed or cancelled (the Job is `job`)."""

    def __init__(self, job: Job):
        self.job = job
        last = (job.log or "").strip().splitlines()
        super().__init__(f"job {job.id} ({job.task}) {job.state}" + (f": {last[-1]}" if last else ""))


class WatchTimeout(ProctorError):
    """watch_job gave up waiting; the job goes on (`job` is its last state seen)."""

    def __init__(self, job: Job, seconds: float):
        self.job = job
        super().__init__(f"job {job.id} still {job.state} after {seconds:g} s ({job.done} of {job.total})")


_BY_STATUS = {401: Unauthorized, 403: Forbidden, 404: NotFound, 400: InvalidInput, 422: InvalidInput}


def _error(response: httpx.Response) -> ApiError:
    """The server's message: its `detail` (a text; FastAPI's own validation errors, a list,
    are joined with where each one is)."""
    req = response.request
    try:
        body = response.json()
    except ValueError:
        body = None
    field = line = None
    detail: Any = body.get("detail") if isinstance(body, dict) else None
    if isinstance(body, dict):
        field, line = body.get("field"), body.get("line")
    if isinstance(detail, list):
        parts = []
        for e in detail:
            if isinstance(e, dict):
                loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
                parts.append(f"{loc}: {e.get('msg', '')}" if loc else str(e.get("msg", "")))
                field = field or (loc or None)
            else:
                parts.append(str(e))
        detail = "; ".join(parts)
    if not detail:
        text = response.text.strip()
        detail = text[:300] if text and not text.lstrip().startswith("<") else response.reason_phrase
    cls = _BY_STATUS.get(response.status_code, ApiError)
    return cls(
        response.status_code, str(detail), method=req.method, path=req.url.path, field=field, line=line, body=body
    )


def _file(value: FileLike, default_name: str) -> tuple[str, bytes]:
    """(file name, bytes) of a path, bytes or an open binary file."""
    if isinstance(value, (bytes, bytearray)):
        return default_name, bytes(value)
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        return path.name, path.read_bytes()
    data = value.read()
    if isinstance(data, str):
        data = data.encode("utf-8")
    return Path(getattr(value, "name", "") or default_name).name, data


def _form(values: dict) -> dict[str, str]:
    """Form fields as the server reads them: None left out, lists as "3,4", dicts as JSON."""
    out = {}
    for k, v in values.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        elif isinstance(v, dict):
            v = json.dumps(v)
        out[k] = str(v)
    return out


class Client:
    """Proctor's API for one account: `url` is the server (e.g. http://127.0.0.1:8000),
    `token` an API token (Account page, or `proctor user token --email ...`)."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0, transport: httpx.BaseTransport | None = None):
        if not url:
            raise ProctorError("no server URL: give one (or set PROCTOR_URL)")
        if not token:
            raise ProctorError("no API token: give one (or set PROCTOR_TOKEN)")
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            transport=transport,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                "User-Agent": "proctor-client/0.1",
            },
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the one place requests are made --------------------------------------------------

    def request(self, method: str, path: str, **kwargs) -> Any:
        """Any API route (a kind's own, say): the decoded JSON answer, or the text for a
        non-JSON one. Raises ApiError for a 4xx/5xx, ServerUnreachable without an answer."""
        response = self._send(method, path, **kwargs)
        if not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ServerUnreachable(f"cannot reach {self.url}: {exc}") from None
        if response.status_code >= 400:
            raise _error(response)
        return response

    # ---- account and kinds ----------------------------------------------------------------

    def kinds(self) -> list[Kind]:
        """The installed task kinds, their item formats and study options."""
        return [Kind.from_json(k) for k in self.request("GET", "/api/v1/kinds")]

    def tokens(self) -> list[dict]:
        return self.request("GET", "/api/v1/tokens")

    def revoke_token(self, token_id: int) -> dict:
        return self.request("POST", f"/api/v1/tokens/{token_id}/revoke")

    # ---- studies ----------------------------------------------------------------------------

    def studies(self) -> list[Study]:
        return [Study.from_json(s) for s in self.request("GET", "/api/v1/studies")]

    def study(self, study_id: int) -> Study:
        return Study.from_json(self.request("GET", f"/api/v1/studies/{study_id}"))

    def create_study(
        self,
        items: FileLike,
        *,
        title: str,
        kind: str | None = None,
        format: str | None = None,
        settings: dict | None = None,
        **options,
    ) -> Study:
        """A draft study from an item upload (`items`: a path, bytes or binary file) in the
        kind's `format` (default: its first); `settings` are the study's (annotations_per_item,
        bundle_size, gold_rate, consent_text, payment, ...), `options` the kind's own
        (Client.kinds() lists them)."""
        name, data = _file(items, "items")
        form = _form(
            {"settings": {**(settings or {}), "title": title}, "kind": kind or "", "format": format or "", **options}
        )
        return Study.from_json(
            self.request("POST", "/api/v1/studies", data=form, files={"file": (name, data, "application/octet-stream")})
        )

    def edit_study(self, study_id: int, **fields) -> Study:
        """Change consent text, instructions or the crowd caps (fields left out stay)."""
        return Study.from_json(self.request("PATCH", f"/api/v1/studies/{study_id}", json=fields))

    def set_state(self, study_id: int, state: str) -> Study:
        """Launch ("live"), pause ("paused"), close ("closed") or reopen a study."""
        return Study.from_json(self.request("POST", f"/api/v1/studies/{study_id}/state", json={"state": state}))

    def progress(self, study_id: int) -> dict:
        return self.request("GET", f"/api/v1/studies/{study_id}/progress")

    def items(self, study_id: int, *, offset: int = 0, limit: int = 100) -> list[dict]:
        return self.request("GET", f"/api/v1/studies/{study_id}/items", params={"offset": offset, "limit": limit})

    def all_items(self, study_id: int, page: int = 1000) -> list[dict]:
        """Every item, a page at a time."""
        out: list[dict] = []
        while True:
            got = self.items(study_id, offset=len(out), limit=page)
            out += got
            if len(got) < page:
                return out

    def import_annotations(self, study_id: int, file: FileLike, *, source: str = "") -> dict:
        """People's annotations from an earlier study, as external annotators."""
        name, data = _file(file, "annotations.jsonl")
        return self.request(
            "POST",
            f"/api/v1/studies/{study_id}/annotations/import",
            data=_form({"source": source}),
            files={"file": (name, data)},
        )

    # ---- agents -----------------------------------------------------------------------------

    def agents(self) -> list[Agent]:
        return [Agent.from_json(a) for a in self.request("GET", "/api/v1/agents")]

    def create_agent(self, name: str, *, kind: str | None = None, version: str = "1", description: str = "") -> Agent:
        body = {"name": name, "version": version, "description": description}
        if kind:
            body["kind"] = kind
        return Agent.from_json(self.request("POST", "/api/v1/agents", json=body))

    def find_or_create_agent(self, name: str, *, kind: str | None = None, version: str = "1") -> Agent:
        """Your agent of that name, kind and version, made if there is none."""
        for a in self.agents():
            if a.name == name and a.version == version and (kind is None or a.kind == kind):
                return a
        return self.create_agent(name, kind=kind, version=version)

    def upload_outputs(self, study_id: int, agent_id: int, file: FileLike) -> int:
        """Import an agent's outputs for a study (in its kind's format); how many stored."""
        name, data = _file(file, "outputs.jsonl")
        return self.request(
            "POST", f"/api/v1/studies/{study_id}/agents/{agent_id}/outputs", files={"file": (name, data)}
        )["imported"]

    def upload_artifact(
        self, agent_id: int, file: FileLike, *, role: str, format: str, config: dict | None = None
    ) -> Artifact:
        """A new version of an agent's model in one of its kind's roles; it is pending until a
        worker validates it (wait_artifact)."""
        name, data = _file(file, "model.bin")
        return Artifact.from_json(
            self.request(
                "POST",
                f"/api/v1/agents/{agent_id}/artifacts",
                files={"file": (name, data)},
                data=_form({"role": role, "format": format, "config": config}),
            )
        )

    def artifacts(self, agent_id: int) -> list[Artifact]:
        return [Artifact.from_json(a) for a in self.request("GET", f"/api/v1/agents/{agent_id}/artifacts")]

    def wait_artifact(
        self, agent_id: int, artifact_id: int, *, interval: float = 1.0, timeout: float | None = 600
    ) -> Artifact:
        """The artifact once validated (valid or invalid)."""
        start = time.monotonic()
        while True:
            art = next((a for a in self.artifacts(agent_id) if a.id == artifact_id), None)
            if art is None:
                raise ProctorError(f"agent {agent_id} has no artifact {artifact_id}")
            if art.state != "pending":
                return art
            if timeout is not None and time.monotonic() - start > timeout:
                raise ProctorError(f"artifact {artifact_id} still pending after {timeout:g} s")
            time.sleep(interval)

    # ---- leaderboards and exports -----------------------------------------------------------

    def leaderboard(self, study_id: int) -> Leaderboard:
        return Leaderboard.from_json(self.request("GET", f"/api/v1/studies/{study_id}/leaderboard"))

    def start_export(self, study_id: int) -> Job:
        got = self.request("POST", f"/api/v1/studies/{study_id}/exports")
        return self.job(got["job"])

    def export(
        self,
        study_id: int,
        *,
        interval: float = 0.5,
        timeout: float | None = 600,
        on_progress: Callable[[Job], None] | None = None,
    ) -> Job:
        """Export a study and wait for it: the finished Job, whose `files` download() reads
        (annotations.jsonl, annotations.csv, completions.csv, scores.json, scores.csv)."""
        job = self.start_export(study_id)
        return self.watch_job(job.id, interval=interval, timeout=timeout, on_progress=on_progress)

    def download(self, job: Job | int, name: str) -> bytes:
        """One of a finished job's files, by name."""
        if isinstance(job, int):
            job = self.job(job)
        if name not in job.files:
            raise ProctorError(f"job {job.id} has no file {name!r}; it has: {', '.join(sorted(job.files)) or 'none'}")
        link = urljoin(self.url + "/", job.files[name])
        if urlsplit(link).netloc == urlsplit(self.url).netloc:
            return self._send("GET", link).content
        # A presigned link to object storage: our token is not for that host.
        try:
            response = httpx.get(link, timeout=self._http.timeout)
        except httpx.TransportError as exc:
            raise ServerUnreachable(f"cannot download {name}: {exc}") from None
        if response.status_code >= 400:
            raise _error(response)
        return response.content

    # ---- jobs -------------------------------------------------------------------------------

    def jobs(self, *, study_id: int | None = None, state: str | None = None, limit: int = 100) -> list[Job]:
        """Your jobs, newest first (an admin: everyone's)."""
        params = {k: v for k, v in (("study_id", study_id), ("state", state), ("limit", limit)) if v is not None}
        return [Job.from_json(j) for j in self.request("GET", "/api/v1/jobs", params=params)]

    def job(self, job_id: int) -> Job:
        return Job.from_json(self.request("GET", f"/api/v1/jobs/{job_id}"))

    def cancel_job(self, job_id: int) -> Job:
        """Cancel a queued or running job (any: an export, a generation run); what it stored
        stays. ApiError (409) if it has already ended."""
        self.request("POST", f"/api/v1/jobs/{job_id}/cancel")
        return self.job(job_id)

    def watch_job(
        self,
        job_id: int,
        *,
        interval: float = 0.5,
        timeout: float | None = None,
        on_progress: Callable[[Job], None] | None = None,
        raise_on_failure: bool = True,
    ) -> Job:
        """Poll a job until it ends; `on_progress(job)` after each poll. Returns the finished
        job; JobFailed if it failed or was cancelled (unless raise_on_failure=False),
        WatchTimeout after `timeout` seconds (the job goes on)."""
        start = time.monotonic()
        while True:
            job = self.job(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.state in FINAL_STATES:
                if raise_on_failure and job.state != "done":
                    raise JobFailed(job)
                return job
            if timeout is not None and time.monotonic() - start >= timeout:
                raise WatchTimeout(job, timeout)
            time.sleep(interval)

    # ---- agent runs: one path for every kind (docs/runs.md) ----------------------------------

    @staticmethod
    def _run(got: dict) -> GenerationRun:
        return GenerationRun(kind=got["kind"], id=got["id"], job_id=got["job_id"], state=got["state"], raw=got)

    def start_generation(
        self, study_id: int, *, file: FileLike | None = None, kind: str | None = None, **params
    ) -> GenerationRun:
        """Start an agent run on a study, with its kind's fields (docs/runs.md lists them);
        `file` for a kind that takes one (navigation: the R2R paths file). Watch it with
        watch_job(run.job_id); cancel with cancel_generation(run). `kind` is accepted, as the
        earlier client took it, and not needed: the server knows the study's kind."""
        path = f"/api/v1/studies/{study_id}/runs"
        if file is not None:
            name, data = _file(file, "paths.json")
            return self._run(self.request("POST", path, data=_form(params), files={"file": (name, data)}))
        return self._run(self.request("POST", path, json={k: v for k, v in params.items() if v is not None}))

    def start_suite_generation(
        self, suite_id: int, version: int, *, agent: str | None = None, agent_id: int | None = None, **params
    ) -> GenerationRun:
        """A Standardised Test Suite version's continuations by an agent (`agent_id`) or a
        built-in (`agent`: expert, random)."""
        body = {k: v for k, v in (("agent", agent), ("agent_id", agent_id)) if v is not None}
        return self._run(
            self.request(
                "POST",
                "/api/v1/runs",
                json={"kind": "sts", "target": {"suite_id": suite_id, "version": version}, **body, **params},
            )
        )

    def generation(self, run: GenerationRun | int) -> GenerationRun:
        """The run now: its job's state and progress, and what it stored (`raw["detail"]`)."""
        return self._run(self.request("GET", f"/api/v1/runs/{getattr(run, 'id', run)}"))

    def generations(self, study_id: int | None = None, *, kind: str | None = None) -> list[GenerationRun]:
        """Your runs, newest first: a study's, a kind's, or all."""
        query = {k: v for k, v in (("study_id", study_id), ("kind", kind)) if v is not None}
        return [self._run(r) for r in self.request("GET", "/api/v1/runs", params=query)]

    def cancel_generation(self, run: GenerationRun | int) -> GenerationRun:
        """Stop the run at its next progress check; what it stored stays."""
        return self._run(self.request("POST", f"/api/v1/runs/{getattr(run, 'id', run)}/cancel"))
