"""The `proctor` command: serve, worker, migrate, demo, user, tom check."""

from __future__ import annotations

import os
import sys

import click

from app.config import ROOT, get_settings


def migrate_db(url: str | None = None) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url or get_settings().database_url)
    command.upgrade(cfg, "head")


def _ensure_local_dirs() -> None:
    s = get_settings()
    if s.database_url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(s.database_url.removeprefix("sqlite:///")) or ".", exist_ok=True)
    if s.storage_url.startswith("file://"):
        os.makedirs(s.storage_url.removeprefix("file://"), exist_ok=True)


@click.group()
def main() -> None:
    """Proctor: human evaluation of grounded language agents."""


@main.command()
def migrate() -> None:
    """Bring the database schema up to date (alembic upgrade head)."""
    _ensure_local_dirs()
    migrate_db()
    click.echo("database is at the newest schema")


def _serve(host: str, port: int) -> None:
    import uvicorn

    from app.jobs import start_inprocess_worker
    from app.main import create_app

    web = create_app()  # imports everything before the worker thread starts
    if not get_settings().redis_url:
        start_inprocess_worker()
        click.echo("jobs run in this process (no REDIS_URL set)")
    uvicorn.run(web, host=host, port=port, log_level="warning")


@main.command()
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
def serve(host: str, port: int) -> None:
    """Run the web server (with an in-process worker unless REDIS_URL is set)."""
    _serve(host, port)


@main.command()
@click.option("--concurrency", default=2, type=int)
def worker(concurrency: int) -> None:
    """Run a Celery worker for jobs (needs REDIS_URL)."""
    if not get_settings().redis_url:
        raise click.ClickException("set REDIS_URL to run a separate worker")
    os.execvp(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
                               "--loglevel=INFO", f"--concurrency={concurrency}"])


@main.command()
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
@click.option("--no-serve", is_flag=True, help="Seed and print, then exit.")
def demo(host: str, port: int, no_serve: bool) -> None:
    """Migrate, seed demo data, print the logins and links, then serve."""
    from app.db import session_scope
    from app.demo import seed

    _ensure_local_dirs()
    migrate_db()
    with session_scope() as session:
        click.echo("seeding the demo (a study, two agents, simulated annotators)...")
        info = seed(session)
        base = f"http://{host}:{port}"
        click.echo("")
        click.echo(f"Proctor demo at {base}")
        click.echo(f"  researcher login: {info['researcher'][0]}  password: {info['researcher'][1]}")
        click.echo(f"  admin login:      {info['admin'][0]}  password: {info['admin'][1]}")
        for study in info["studies"]:
            click.echo(f"  worker entry ({study.kind}): {base}/s/{study.slug}"
                       f"?PROLIFIC_PID=you&STUDY_ID=demo&SESSION_ID=1")
    if not no_serve:
        _serve(host, port)


@main.command("export")
@click.argument("study_id", type=int)
@click.option("--out", type=click.Path(file_okay=False), default=".", help="Folder for the files.")
def export_cmd(study_id: int, out: str) -> None:
    """Export a study's annotations and scores (JSONL, CSV), with a progress bar."""
    import threading
    import time

    from tqdm import tqdm

    from app.db import get_sessionmaker
    from app.jobs import Job, create_job, run_job
    from app.storage import get_store
    from app.studies.models import Study

    sm = get_sessionmaker()
    with sm() as s:
        if s.get(Study, study_id) is None:
            raise click.ClickException(f"no study {study_id}")
        job_id = create_job(s, "export", study_id=study_id).id
        s.commit()
    worker = threading.Thread(target=run_job, args=(job_id,))
    worker.start()
    with tqdm(desc="exporting", unit="annotation") as bar:
        while True:
            with sm() as s:
                job = s.get(Job, job_id)
                bar.total, bar.n = job.total or None, job.done
                bar.refresh()
                if job.state in ("done", "failed"):
                    break
            time.sleep(0.3)
    worker.join()
    if job.state == "failed":
        raise click.ClickException(job.log.strip().splitlines()[0])
    os.makedirs(out, exist_ok=True)
    store = get_store()
    for name, key in job.result["files"].items():
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(store.get(key))
        click.echo(path)


@main.group()
def user() -> None:
    """Manage accounts."""


@user.command("create")
@click.option("--email", required=True)
@click.option("--role", type=click.Choice(["researcher", "admin"]), required=True)
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
def user_create(email: str, role: str, password: str) -> None:
    from app.db import session_scope
    from app.demo import ensure_user

    with session_scope() as session:
        ensure_user(session, email.strip().lower(), role, password)
    click.echo(f"{role} {email} is ready")


@user.command("token")
@click.option("--email", required=True)
@click.option("--name", default="cli")
def user_token(email: str, name: str) -> None:
    """Create an API token for an account and print it (shown once)."""
    from sqlalchemy import select

    from app.auth.models import User
    from app.auth.security import create_token
    from app.db import session_scope

    with session_scope() as session:
        u = session.scalar(select(User).where(User.email == email.strip().lower()))
        if u is None:
            raise click.ClickException(f"no account {email}")
        click.echo(create_token(session, u, name))


@main.group()
def tom() -> None:
    """Common-ToM tools."""


@tom.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def tom_check(files: tuple[str, ...]) -> None:
    """Recompute every question's answer from its labels and report disagreements."""
    from app.kinds.tom.check import check_files

    sys.exit(check_files(list(files)))


@main.group()
def nav() -> None:
    """Navigation tools."""


@nav.command("score")
@click.option("--connectivity", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--references", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--predictions", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a table.")
def nav_score(connectivity: str, references: str, predictions: str, as_json: bool) -> None:
    """Score R2R-format predictions (SR, SPL, nDTW, SDTW, NE, path length)."""
    from app.kinds.navigation.score import run

    sys.exit(run(connectivity, references, predictions, as_json, sys.stdout))


@nav.command("import-graphs")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--source", type=click.Choice(["matterport", "generated"]), default="matterport")
def nav_import_graphs(directory: str, source: str) -> None:
    """Import every <scan>_connectivity.json in DIRECTORY as a building (replacing earlier ones)."""
    from pathlib import Path

    from tqdm import tqdm

    from app.db import session_scope
    from app.errors import InputError
    from app.kinds.navigation.environments import import_connectivity
    from app.kinds.navigation.graph import CONNECTIVITY_SUFFIX

    files = sorted(Path(directory).glob(f"*{CONNECTIVITY_SUFFIX}"))
    if not files:
        raise click.ClickException(f"no *{CONNECTIVITY_SUFFIX} files in {directory}")
    _ensure_local_dirs()
    with session_scope() as session:
        for path in tqdm(files, desc="importing buildings", unit="building"):
            try:
                import_connectivity(session, path, source=source)
            except InputError as e:
                raise click.ClickException(f"{path.name}: {e}") from None
    click.echo(f"imported {len(files)} buildings")


if __name__ == "__main__":
    main()
