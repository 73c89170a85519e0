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


@nav.command("trace")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--connectivity", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--args", "args_file", type=click.Path(exists=True, dir_okay=False),
              help="The PanGEA task (args.json: scan, path, heading) to score the path against.")
@click.option("--time-unit", type=click.Choice(["auto", "s", "ms"]), default="auto",
              help="The trace's time unit (auto: from the frame intervals).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def nav_trace(trace: str, connectivity: str, args_file: str | None, time_unit: str, as_json: bool) -> None:
    """Reduce a PanGEA pose trace (JSONL) to its viewpoint path; with --args, score it."""
    from app.kinds.navigation.traces import run_trace

    sys.exit(run_trace(trace, connectivity, args_file, time_unit, as_json, sys.stdout))


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


@nav.command("import-panoramas")
@click.argument("scan")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
def nav_import_panoramas(scan: str, directory: str) -> None:
    """Import DIRECTORY's <viewpoint>.jpg|png equirectangular panoramas for building SCAN (all
    checked first; nothing is stored if one is refused)."""
    from app.db import session_scope
    from app.errors import InputError
    from app.kinds.navigation.panoramas import import_directory

    _ensure_local_dirs()
    with session_scope() as session:
        try:
            summary, others = import_directory(session, scan, directory)
        except InputError as e:
            raise click.ClickException(str(e)) from None
    if others:
        click.echo(f"left alone {len(others)} other files ({', '.join(others[:5])}"
                   f"{', ...' if len(others) > 5 else ''})")
    click.echo(f"stored {len(summary['stored'])} panoramas; {scan} has {summary['panoramas']}")



@nav.command("capability-file")
@click.option("--greedy", required=True, type=click.Path(exists=True, dir_okay=False),
              help="coop greedy file (anno_speaker-*_greedy.json).")
@click.option("--candidates", required=True, type=click.Path(exists=True, dir_okay=False),
              help="coop sampled candidates (speaker_*_sampled_*.json).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Where to write the capability file.")
@click.option("--speaker", default=None, help="The speaker's name (default: the greedy file's model).")
@click.option("--limit-paths", type=click.IntRange(min=1), default=None, help="Keep the first N paths.")
def nav_capability_file(greedy: str, candidates: str, out: str, speaker: str | None,
                        limit_paths: int | None) -> None:
    """Build a capability-analysis upload (format `capability`) from coop speaker outputs."""
    from pathlib import Path

    from app.errors import InputError
    from app.kinds.navigation.capability import coop_to_capability, dumps

    try:
        data, report = coop_to_capability(greedy, candidates, speaker, limit_paths)
    except InputError as e:
        raise click.ClickException(str(e)) from None
    Path(out).write_text(dumps(data), encoding="utf-8")
    missing = report["missing_from_candidates"]
    click.echo(f"{report['in_candidates']} of {report['greedy_paths']} greedy paths are in the candidates file"
               + (f" (missing: {', '.join(missing)})" if missing else ""))
    click.echo(f"wrote {report['paths_written']} paths for speaker {report['speaker']!r} to {out}: "
               f"samples per path {report['samples_per_path']}, {report['samples_with_scores']} samples "
               f"with a speaker score; candidate 0 was the greedy output on "
               f"{report['candidate_0_is_the_greedy_output']} paths (left out of the samples)")


@main.command("train")
@click.argument("role", type=click.Choice(["speaker", "listener"]))
@click.option("--out", default="var/models", show_default=True, type=click.Path(file_okay=False),
              help="Folder for <name>.safetensors + <name>.json (the built-in architecture upload format).")
@click.option("--name", default=None, help="File name stem (default: the role, listener-<k> per member).")
@click.option("--houses", default=30, show_default=True, type=click.IntRange(min=1), help="Training houses.")
@click.option("--held-out", default=5, show_default=True, type=click.IntRange(min=1), help="Held-out houses.")
@click.option("--paths", default=20, show_default=True, type=click.IntRange(min=1), help="Paths per house.")
@click.option("--epochs", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--hidden", default=128, show_default=True, type=click.IntRange(min=8))
@click.option("--ensemble", "k", default=1, show_default=True, type=click.IntRange(min=1, max=32),
              help="Listeners: K members, each on its own random 90%% of the paths with its own seed.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--device", default=None, help="cpu or cuda (default: cuda when available).")
def train(role: str, out: str, name: str | None, houses: int, held_out: int, paths: int, epochs: int,
          hidden: int, k: int, seed: int, device: str | None) -> None:
    """Train a baseline speaker or listener(s) on generated houses and report held-out quality."""
    from workers.navigation.cli import run_training

    run_training(role, out=out, name=name, houses=houses, held_out=held_out, paths=paths, epochs=epochs,
                 hidden=hidden, k=k, seed=seed, device=device, echo=click.echo)


if __name__ == "__main__":
    main()
