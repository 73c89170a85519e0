"""A failed job tells its owner why in our words, never the server's paths or code (issue
26.5): a refusal's message with any path blanked, or only the type of an unexpected error; the
traceback goes to the log and to admins (`jobs.traceback`, the API's job for an admin)."""

from __future__ import annotations

import pytest

from app import jobs
from tests.conftest import create_tom_study, login, make_user

SECRET_PATH = "/var/lib/proctor/blobs/exports/7/completions.csv"


def crash(session, job, progress):
    open(SECRET_PATH + ".missing")  # FileNotFoundError naming a server path


def refuse(session, job, progress):
    raise ValueError(f"the export could not be written to {SECRET_PATH}: the disk is full")


def leak(session, job, progress):
    # A progress line and a refusal that carry a file: URL and a URL's credentials (a store's
    # or a database's address in a connection error).
    progress(1, 2, "reading file:///var/lib/proctor/blobs/x.pt from postgresql://proctor:hunter2@db:5432/proctor")
    raise ValueError("could not reach https://AKIAEXAMPLE:s3cr3tkey@bucket.example.org/x or file:/etc/passwd")


@pytest.fixture
def failing_kind():
    from app.kinds import get_kind, register_kind, unregister_kind

    example = get_kind("wordcount")

    class Failing(type(example)):
        name = "failingjobs"
        jobs = {"crash": f"{__name__}:crash", "refuse": f"{__name__}:refuse", "leak": f"{__name__}:leak"}
        job_queues = {}

        def routers(self):
            return []

        def cli(self):
            return None

    register_kind(Failing())
    yield
    unregister_kind("failingjobs")


@pytest.mark.parametrize(
    "task, shown",
    [
        ("crash", "failed: an internal error (FileNotFoundError); an administrator can see the details"),
        ("refuse", "failed: the export could not be written to <path>: the disk is full"),
        (
            "leak",
            "reading <path> from postgresql://<credentials>@db:5432/proctor\n"
            "failed: could not reach https://<credentials>@bucket.example.org/x or <path>",
        ),
    ],
)
def test_the_owner_reads_the_reason_and_an_admin_the_traceback(client, session, failing_kind, task, shown):
    owner, admin = make_user(session, "researcher"), make_user(session, "admin")
    study = create_tom_study(session, owner, title="Failing jobs")
    job = jobs.create_job(session, f"failingjobs.{task}", study_id=study.id, owner_id=owner.id)
    session.commit()
    assert jobs.run_job(job.id) == "failed"
    session.refresh(job)
    assert job.log.strip() == shown
    assert "Traceback" in job.traceback and __name__.rsplit(".", 1)[-1] in job.traceback

    login(client, owner)
    mine = client.get("/api/v1/jobs", params={"study_id": study.id}).json()
    [row] = [r for r in mine if r["id"] == job.id]
    assert row["log"].strip() == shown and "traceback" not in row
    page = client.get(f"/studies/{study.id}").text
    assert "Traceback" not in page and "/var/lib" not in page and "test_job_failures" not in page
    for secret in ("hunter2", "s3cr3tkey", "AKIAEXAMPLE", "/etc/passwd", "file:"):
        assert secret not in page and secret not in row["log"], secret

    client.cookies.clear()
    login(client, admin)
    theirs = client.get("/api/v1/jobs", params={"study_id": study.id}).json()
    [row] = [r for r in theirs if r["id"] == job.id]
    assert "Traceback" in row["traceback"]


def test_failure_reasons_blank_every_server_path():
    assert jobs.failure_reason(KeyError("no installed kind offers 'x'")) == "\"no installed kind offers 'x'\""
    assert jobs.failure_reason(ValueError("read /tmp/proctor-x/a.json and /home/me/b")) == "read <path> and <path>"
    assert jobs.failure_reason(ValueError("see https://example.org/var/x")) == "see https://example.org/var/x"
    # Found by the issue-26 re-attack: roots outside a fixed list, and a root's prefix.
    for path in (
        "/code/app/x.py",
        "/nix/store/abc-py/lib",
        "/run/secrets/key",
        "/dev/shm/x",
        "/workspace/proctor/x.py",
        "~/proctor/x.py",
        "/Users/me/p",
    ):
        assert jobs.failure_reason(ValueError(f"no file {path} here")) == "no file <path> here", path
    assert jobs.failure_reason(ValueError("3/4 done, a/b")) == "3/4 done, a/b"
    assert jobs.failure_reason(ValueError("error:/srv/secret/x")) == "error:<path>"
    # file: URLs (any number of slashes) and a URL's user and password (issue 26's fourth round).
    for url, shown in (
        ("file:///etc/passwd", "<path>"),
        ("file:/etc/passwd", "<path>"),
        ("FILE://host/share/x", "<path>"),
        ("redis://:pw@127.0.0.1:6379/0", "redis://<credentials>@127.0.0.1:6379/0"),
        ("postgresql://u:p@db/x", "postgresql://<credentials>@db/x"),
        ("https://token@github.com/a/b", "https://<credentials>@github.com/a/b"),
        ("https://example.org/a@b", "https://example.org/a@b"),  # an @ in the path: no user
        # round 5: SQLite URLs and relative paths are paths; a query's token, a DSN's password
        ("sqlite:////var/lib/proctor/app.db", "<path>"),
        ("sqlite:///tmp/x.db", "<path>"),
        ("./var/blobs/ab/cd.bin", "<path>"),
        ("../../srv/proctor/x", "<path>"),
        ("https://h/x?token=abc&sig=1", "https://h/x?token=<credentials>&sig=<credentials>"),
        ("https://h/x?page=2", "https://h/x?page=2"),
        ("host=db user=p password=hunter2", "host=db user=p password=<credentials>"),
    ):
        assert jobs.failure_reason(ValueError(f"at {url} now")) == f"at {shown} now", url
    # Round 6: a path with spaces is blanked whole, quoted (as Python's errors write it) or not.
    for text, shown in (
        ("No such file or directory: '/srv/my data/secret plans.csv'", "No such file or directory: '<path>'"),
        ('cannot open "~/Jane Doe/keys/a b.json" now', 'cannot open "<path>" now'),
        ("could not write /srv/proctor data/blobs/ab/cd.bin: full", "could not write <path>: full"),
        ("read /home/jane/My Documents/private notes.txt and stopped", "read <path> and stopped"),
        ("./var/my blobs/x.bin is gone", "<path> is gone"),
        ("at /opt/app (2)/x.py line 3", "at <path> line 3"),
        ("read /srv/x\tab file/y now", "read <path> now"),
        ("saved in /srv/My Big Folder/x.csv twice", "saved in <path> twice"),
        # ...and the sentence after a path stays: versions, numbers, hosts, a file it names
        ("model /opt/models/m.pt has version 1.2 but needs 1.3", "model <path> has version 1.2 but needs 1.3"),
        ("score in [0, 1] for /data/a.csv row 3 got 1.5", "score in [0, 1] for <path> row 3 got 1.5"),
        ("HTTP 404 for /api/v1/studies/3 from proctor.example.com", "HTTP 404 for <path> from proctor.example.com"),
        ("path ./x/y.json was loaded with config.yaml settings", "path <path> was loaded with config.yaml settings"),
        ("KeyError: '/'", "KeyError: '/'"),
        # Round 7: no word of a path with spaces is left, whatever its spacing and punctuation,
        # under "~/", at the root, or more than three words deep...
        ("load ~/My Documents/x.pt now", "load <path> now"),
        ("load ~/x.pt now", "load <path> now"),
        ("load /My Documents/x.pt now", "load <path> now"),
        ("load /home/me/My  Documents/x.pt now", "load <path> now"),
        ("load /home/me/My\u00a0Documents/x.pt now", "load <path> now"),
        ("load /home/me/Q1, Q2/x.pt now", "load <path> now"),
        ("load /home/me/My:Documents/x.pt now", "load <path> now"),
        ('load /home/me/My "Docs"/x.pt now', "load <path> now"),
        ("load /home/me/[old] data/x.pt now", "load <path> now"),
        ("load /home/me/a b c d e f g/x.pt now", "load <path> now"),
        ("(/home/me/My Documents/x.pt)", "(<path>)"),
        # ...and what a sentence holds stays: fractions, a lone slash, a route, the next line
        ("model /opt/m.pt: expected 3/4 got 1/4", "model <path>: expected 3/4 got 1/4"),
        ("ratio 1 / 2 of a/b for /api", "ratio 1 / 2 of a/b for /api"),
        ("read /srv/x.\nthen a/b", "read <path>.\nthen a/b"),
        ("could not read /srv/x.csv: expected JSON/CSV", "could not read <path>: expected JSON/CSV"),
        ("model /srv/m.pt; see docs/agents.md", "model <path>; see docs/agents.md"),
    ):
        assert jobs.failure_reason(ValueError(text)) == shown, text
    assert (
        jobs.failure_reason(RuntimeError("/srv/app/secret"))
        == "an internal error (RuntimeError); an administrator can see the details"
    )
