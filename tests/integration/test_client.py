"""The Python client and `proctor remote` against a live `proctor serve` (issue 15,
"Researchers who script"): a study created, agents' outputs uploaded, a leaderboard and an
export fetched, a generation run started, watched and cancelled, jobs listed, and refusals
surfacing as the server's own message, from the client and from the command line."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from proctor_client import (
    ApiError,
    Client,
    InvalidInput,
    JobFailed,
    Leaderboard,
    NotFound,
    ServerUnreachable,
    Study,
    Unauthorized,
)
from tests.conftest import REDIS_URL, ROOT

TOM_CSV = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"
# An A3DS study's pairs (docs/kinds/a3ds.md): three, each captioned by a built-in speaker.
A3DS_DESIGN = {"pairs": {"z": {"1": 2, "3": 1}}, "speakers": ["literal"], "seed": 3}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`proctor serve` in a subprocess on its own SQLite file, with two researchers' tokens."""

    def __init__(self, folder: Path, template: Path, redis_url: str = ""):
        folder.mkdir(parents=True, exist_ok=True)
        db = folder / "proctor.db"
        shutil.copyfile(template, db)
        self.db_url = f"sqlite:///{db}"
        self.env = {
            **os.environ,
            "DATABASE_URL": self.db_url,
            "STORAGE_URL": f"file://{folder / 'blobs'}",
            "REDIS_URL": redis_url,
        }
        self.token, self.other_token = self._token("owner@example.org"), self._token("other@example.org")
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(folder / "serve.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        for _ in range(300):
            try:
                if urllib.request.urlopen(f"{self.url}/healthz", timeout=2).status == 200:
                    return
            except OSError:
                assert self.proc.poll() is None, (folder / "serve.log").read_text()
                time.sleep(0.1)
        raise AssertionError("proctor serve did not answer: " + (folder / "serve.log").read_text())

    def _token(self, email: str) -> str:
        from app.auth.security import create_token
        from app.db import get_sessionmaker
        from app.demo import ensure_user

        with get_sessionmaker(self.db_url)() as s:
            token = create_token(s, ensure_user(s, email, "researcher", "pw-" + "x" * 8), "client test")
            s.commit()
        return token

    def client(self, token: str | None = None) -> Client:
        return Client(self.url, token or self.token)

    def remote(self, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
        """`proctor remote ...` as a user types it, URL and token from the environment."""
        env = {**self.env, "PROCTOR_URL": self.url, "PROCTOR_TOKEN": token or self.token}
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "remote", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def template(sqlite_template) -> Path:
    return sqlite_template


@pytest.fixture(scope="module")
def server(tmp_path_factory, template):
    """Jobs run in the server's own process (no REDIS_URL), as in `make demo`."""
    s = Server(tmp_path_factory.mktemp("serve"), template)
    yield s
    s.stop()


@pytest.fixture
def queued_server(tmp_path, template, redis_server):
    """A server whose jobs go to a Redis queue with no worker: they stay queued, so a run can be
    cancelled before it starts whatever the machine's speed."""
    import redis

    from app.jobs import celery_queue
    from app.kinds import QUEUES

    try:
        broker = redis.Redis.from_url(REDIS_URL)
        broker.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis at {REDIS_URL} does not answer: {exc}")
    queues = [celery_queue(q) for q in QUEUES]
    broker.delete(*queues)
    s = Server(tmp_path / "queued", template, redis_url=REDIS_URL)
    yield s
    s.stop()
    broker.delete(*queues)  # no later worker may pick up these jobs


def _tom_rows() -> list[dict]:
    return list(csv.DictReader(io.StringIO(TOM_CSV.read_text(encoding="utf-8"))))


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_the_client_needs_nothing_of_the_server():
    # What a researcher's script imports: the package alone, with httpx; never `app`.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, proctor_client, proctor_client.cli\n"
            "server = sorted(m for m in sys.modules if m == 'app' or m.startswith(('app.', 'workers')))\n"
            "print(server)\nsys.exit(1 if server else 0)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    # ...and `pip install .` ships it with the server.
    from setuptools import find_packages

    try:
        import tomllib
    except ImportError:  # Python 3.10
        pytest.skip("needs tomllib")
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert "proctor_client" in find_packages(str(ROOT), include=include)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("httpx") for d in deps)


def test_a_researcher_scripts_a_study_from_upload_to_export(server):
    rows = _tom_rows()
    with server.client() as pc:
        assert "tom" in {k.name for k in pc.kinds()}
        study = pc.create_study(
            TOM_CSV.read_bytes(),
            title="Scripted",
            kind="tom",
            settings={"bundle_size": 5, "payment": "£2"},
            gold_count=5,
        )
        assert isinstance(study, Study) and study.state == "draft" and study.kind == "tom"
        assert study.id in {s.id for s in pc.studies()}
        items = pc.all_items(study.id, page=100)
        assert len(items) == len(rows) and sum(i["is_gold"] for i in items) == 5

        perfect = pc.create_agent("oracle", kind="tom")
        yes_man = pc.find_or_create_agent("yes-man", kind="tom")
        assert pc.find_or_create_agent("yes-man", kind="tom") == yes_man  # found, not made twice
        answers = {r["question_id"]: r["answer"] for r in rows}
        assert pc.upload_outputs(
            study.id, perfect.id, _jsonl({"question_id": q, "answer": a} for q, a in answers.items())
        ) == len(rows)
        assert pc.upload_outputs(
            study.id, yes_man.id, _jsonl({"question_id": q, "answer": "Yes"} for q in answers)
        ) == len(rows)
        assert pc.set_state(study.id, "live").state == "live"

        board = pc.leaderboard(study.id)
        assert isinstance(board, Leaderboard) and board.kind == "tom"
        by_name = {r.name: r for r in board.rows}
        scored = [i for i in items if not i["is_gold"]]
        yes_share = sum(answers[i["id"]] == "Yes" for i in scored) / len(scored)
        assert by_name["oracle v1"].accuracy.mean == 1.0 and by_name["oracle v1"].accuracy.n == len(scored)
        assert by_name["yes-man v1"].accuracy.mean == pytest.approx(yes_share)
        table = list(csv.DictReader(io.StringIO(board.to_csv())))
        assert {"type": "agent", "name": "yes-man v1", "metric": "accuracy", "category": "all"}.items() <= next(
            r for r in table if r["name"] == "yes-man v1"
        ).items()

        progress = []
        job = pc.export(study.id, on_progress=progress.append)
        assert job.state == "done" and progress[-1].state == "done"
        assert set(job.files) == {
            "annotations.jsonl",
            "annotations.csv",
            "completions.csv",
            "scores.json",
            "scores.csv",
        }
        scores = list(csv.DictReader(io.StringIO(pc.download(job, "scores.csv").decode())))
        assert {r["name"] for r in scores} >= {"oracle v1", "yes-man v1"}
        assert json.loads(pc.download(job, "scores.json"))["study"] == study.slug

        listed = pc.jobs(study_id=study.id)
        assert [j.id for j in listed] == [job.id] and listed[0].task == "export"
        assert pc.jobs(state="done", study_id=study.id)[0].id == job.id
        assert pc.jobs(state="queued", study_id=study.id) == []


def test_refusals_reach_the_script_as_the_servers_message(server, tmp_path):
    with server.client() as pc:
        with pytest.raises(InvalidInput) as bad:
            pc.create_study(b"question_id,answer\nq1,Maybe\n", title="Broken", kind="tom")
        assert bad.value.status == 422 and bad.value.detail and "POST /api/v1/studies" in str(bad.value)
        with pytest.raises(InvalidInput) as bad:
            pc.create_study(TOM_CSV, title="", kind="tom")
        assert bad.value.field == "title" and "at least 1 character" in bad.value.detail
        with pytest.raises(InvalidInput) as bad:
            pc.create_study(TOM_CSV, title="x", kind="no-such-kind")
        assert bad.value.field == "kind" and "unknown task kind 'no-such-kind'" in bad.value.detail
        with pytest.raises(InvalidInput) as bad:
            pc.jobs(state="sleeping")
        assert bad.value.field == "state" and "Input should be 'queued', 'running'" in bad.value.detail
        mine = pc.create_study(TOM_CSV, title="Mine", kind="tom")
        done = pc.export(mine.id)
        with pytest.raises(ApiError, match="only a queued or running job can be cancelled") as ended:
            pc.cancel_job(done.id)
        assert ended.value.status == 409
    with server.client(server.other_token) as other:
        with pytest.raises(NotFound, match="no such study among yours"):
            other.leaderboard(mine.id)
        with pytest.raises(NotFound):
            other.jobs(study_id=mine.id)
        assert other.jobs() == []  # another's jobs are not listed
    with Client(server.url, "pct_not-a-token") as bad_token:
        with pytest.raises(Unauthorized, match="invalid or revoked API token"):
            bad_token.studies()
    with Client(f"http://127.0.0.1:{_free_port()}", server.token, timeout=2) as nowhere:
        with pytest.raises(ServerUnreachable, match="cannot reach"):
            nowhere.studies()


def test_a_generation_run_is_started_watched_and_listed(server):
    with server.client() as pc:
        study = pc.create_study(json.dumps(A3DS_DESIGN).encode(), title="Captions", kind="a3ds", format="design")
        before = len(pc.all_items(study.id))
        run = pc.start_generation(study.id, speaker="short", batch_size=1, kind="a3ds")  # kind=: as before
        assert run.kind == "a3ds"
        seen = []
        job = pc.watch_job(run.job_id, interval=0.2, on_progress=seen.append)
        assert job.state == "done" and job.done == job.total > 0
        assert seen[-1].state == "done"
        now = pc.generation(run)
        assert now.state == "done" and now.raw["detail"]["items"] == 3
        assert len(pc.all_items(study.id)) == before + 3
        assert run.id in {r.id for r in pc.generations(study.id)}
        assert run.job_id in {j.id for j in pc.jobs(study_id=study.id)}
        with pytest.raises(InvalidInput) as bad:
            pc.start_generation(study.id, speaker="poet")
        assert bad.value.field == "speaker"


@pytest.mark.redis
def test_a_queued_run_is_cancelled_and_watching_it_says_so(queued_server):
    with queued_server.client() as pc:
        study = pc.create_study(json.dumps(A3DS_DESIGN).encode(), title="Captions", kind="a3ds", format="design")
        run = pc.start_generation(study.id, speaker="short")
        assert pc.job(run.job_id).state == "queued"
        assert pc.cancel_generation(run).state == "cancelled"
        with pytest.raises(JobFailed, match="cancelled"):
            pc.watch_job(run.job_id, interval=0.1, timeout=30)
        assert pc.generation(run).raw["detail"]["items"] == 0
    # The command line: start without watching, cancel, then watch reports the end.
    out = queued_server.remote("generate", str(study.id), "--param", "speaker=short", "--no-watch")
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.split("(job ")[1].split(")")[0])
    out = queued_server.remote("cancel", str(job_id))
    assert out.returncode == 0 and f"job {job_id} (a3ds.generate) cancelled" in out.stdout, out.stderr
    out = queued_server.remote("watch", str(job_id))
    assert out.returncode == 1 and f"job {job_id} (a3ds.generate) cancelled" in out.stderr
    assert "Traceback" not in out.stderr


def test_proctor_remote_does_a_study_from_the_command_line(server, tmp_path):
    rows = _tom_rows()
    out = server.remote(
        "create-study",
        str(TOM_CSV),
        "--title",
        "From the shell",
        "--kind",
        "tom",
        "--setting",
        "bundle_size=5",
        "--option",
        "gold_count=5",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    study = json.loads(out.stdout)
    assert study["title"] == "From the shell" and study["bundle_size"] == 5 and study["state"] == "draft"
    sid = str(study["id"])

    outputs = tmp_path / "oracle.jsonl"
    outputs.write_bytes(_jsonl({"question_id": r["question_id"], "answer": r["answer"]} for r in rows))
    out = server.remote("upload-outputs", sid, str(outputs), "--agent", "oracle")
    assert out.returncode == 0 and f"imported {len(rows)} outputs" in out.stdout, out.stderr
    assert server.remote("state", sid, "live").stdout.strip() == f"study {sid} is live"

    table = server.remote("leaderboard", sid)
    assert table.returncode == 0, table.stderr
    line = next(x for x in table.stdout.splitlines() if "oracle v1" in x)
    assert line.split()[0] == "agent" and "100.0" in line.split()
    board = json.loads(server.remote("leaderboard", sid, "--json").stdout)
    assert board["study"] == study["slug"] and any(r["name"] == "oracle v1" for r in board["rows"])
    as_csv = list(csv.DictReader(io.StringIO(server.remote("leaderboard", sid, "--csv").stdout)))
    assert any(r["name"] == "oracle v1" and r["mean"] == "1.0" for r in as_csv)

    # The export: scores as CSV to stdout (the progress bar on stderr), annotations to a file.
    out = server.remote("export", sid, "--file", "scores.csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "type,name,metric,category,n,mean,low,high,method"
    assert "job " in out.stderr  # the bar
    target = tmp_path / "annotations.jsonl"
    out = server.remote("export", sid, "--file", "annotations.jsonl", "-o", str(target))
    assert out.returncode == 0 and target.exists() and out.stdout == ""
    out = server.remote("export", sid, "--all", str(tmp_path / "all"))
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == sorted(
        ["annotations.csv", "annotations.jsonl", "completions.csv", "scores.csv", "scores.json"]
    )

    out = server.remote(
        "create-study", str(TOM_CSV), "--title", "Launched", "--kind", "tom", "--launch", "--option", "gold_count=7"
    )
    assert out.returncode == 0, out.stderr
    # The id alone on stdout (`id=$(proctor remote create-study ...)`), the rest on stderr.
    with server.client() as pc:
        launched = pc.study(int(out.stdout))
    assert out.stdout == f"{launched.id}\n" and launched.title == "Launched" and launched.state == "live"
    first, entry = out.stderr.splitlines()
    assert first == f"study {launched.id} (tom, live): Launched, {len(rows) - 7} items besides gold"
    assert entry == f"  worker entry: {server.url}/s/{launched.slug}"

    # Where only the client is installed: python -m proctor_client, options instead of env.
    alone = subprocess.run(
        [sys.executable, "-m", "proctor_client", "--url", server.url, "--token", server.token, "studies", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in server.env.items() if not k.startswith("PROCTOR_")},
    )
    assert alone.returncode == 0, alone.stderr
    assert study["id"] in {s["id"] for s in json.loads(alone.stdout)}

    jobs = server.remote("jobs", "--study", sid)
    assert jobs.returncode == 0 and len(jobs.stdout.strip().splitlines()) == 3
    assert all(" export " in x and " done " in x for x in jobs.stdout.strip().splitlines())


def test_the_worked_example_in_the_docs_runs_as_written(server, tmp_path):
    text = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    example = text.split("## A worked example")[1].split("```python\n")[1].split("```")[0]
    rows = _tom_rows()
    shutil.copyfile(TOM_CSV, tmp_path / "questions.csv")
    (tmp_path / "my-model.jsonl").write_bytes(
        _jsonl({"question_id": r["question_id"], "answer": r["answer"]} for r in rows)
    )
    (tmp_path / "example.py").write_text(example, encoding="utf-8")
    env = {
        **server.env,
        "PROCTOR_URL": server.url,
        "PROCTOR_TOKEN": server.token,
        "PYTHONPATH": os.pathsep.join([str(ROOT), server.env.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "'tom'" in lines[0] and lines[1].endswith(f"draft {len(rows) - 5} items besides gold")
    assert lines[2] == f"{len(rows)} answers imported"
    assert any(x.startswith("agent") and "my-model v1" in x and " 1.000 " in x for x in lines)
    assert lines[-1].startswith("422 title field 'title': String should have at least 1 character")
    assert (tmp_path / "leaderboard.csv").read_text().startswith("type,name,metric,category,n,mean,low,high,method")
    assert (tmp_path / "annotations.csv").read_text().startswith("annotation_id,item,worker,")


def test_proctor_remote_says_what_the_server_refused(server, tmp_path):
    bad = tmp_path / "items.csv"
    bad.write_text("question_id,answer\nq1,Maybe\n")
    out = server.remote("create-study", str(bad), "--title", "Broken", "--kind", "tom")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("Error: 422 (POST /api/v1/studies): ")
    out = server.remote("leaderboard", "999999")
    assert out.returncode == 1 and "404" in out.stderr and "no such study among yours" in out.stderr
    out = server.remote("studies", token="pct_wrong")
    assert out.returncode == 1 and "401" in out.stderr and "invalid or revoked API token" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "remote", "studies"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in server.env.items() if not k.startswith("PROCTOR_")},
    )
    assert out.returncode == 2 and "--url or PROCTOR_URL" in out.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "app.cli", "remote", "generate", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in server.env.items() if not k.startswith("PROCTOR_")},
    )
    assert helped.returncode == 0 and "--param KEY=VALUE" in helped.stdout  # help needs no server
    out = server.remote("create-study", str(TOM_CSV), "--title", "x", "--setting", "bundle_size")
    assert out.returncode == 2 and "give KEY=VALUE" in out.stderr


def test_an_agents_model_is_uploaded_and_its_verdict_awaited(server, tmp_path):
    with server.client() as pc:
        agent = pc.create_agent("walker", kind="navigation")
        assert agent.kind == "navigation" and agent in pc.agents()
        with pytest.raises(InvalidInput) as bad:
            pc.upload_artifact(agent.id, b"weights", role="poet", format="torchscript")
        assert bad.value.field == "role" and "role must be one of" in bad.value.detail
    # Not a TorchScript archive at all: refused at once, the server's reason on stderr.
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a model at all")
    out = server.remote("upload-artifact", str(agent.id), str(junk), "--role", "speaker", "--format", "torchscript")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert (
        f"Error: 422 (POST /api/v1/agents/{agent.id}/artifacts): field 'file': not a TorchScript archive" in out.stderr
    )
    # A zip that is no model: taken, then found invalid by the validation job, with why.
    model = tmp_path / "speaker.pt"
    with zipfile.ZipFile(model, "w") as z:
        z.writestr("speaker/code/__torch__.py", b"nothing to run")
        z.writestr("speaker/data.pkl", b"no pickle here")
    out = server.remote("upload-artifact", str(agent.id), str(model), "--role", "speaker", "--format", "torchscript")
    assert out.returncode == 1, out.stdout + out.stderr
    uploaded, verdict = out.stdout.splitlines()
    assert uploaded.endswith("(version 1) uploaded: pending")
    assert ": invalid (" in verdict
    with server.client() as pc:
        (art,) = pc.artifacts(agent.id)
        assert art.state == "invalid" and art.verdict and str(art.verdict) in verdict
