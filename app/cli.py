"""The `proctor` command: serve, worker, migrate, demo, export, plan, user, kinds, train, remote (a
server's API from afar: proctor_client/cli.py); each task kind
adds its own group (e.g. `proctor tom check`, `proctor navigation score`)."""

from __future__ import annotations

import copy
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from app.commands import blaming, input_file, json_option, number_option
from app.config import ROOT, ensure_local_dirs, get_settings

if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config(url: str | None = None) -> Config:
    """The core's revisions plus each kind's own branch (its package's migrations/versions)."""
    from alembic.config import Config

    from app.kinds import all_kinds

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url or get_settings().database_url)
    folders = [str(ROOT / "migrations" / "versions")]
    folders += [str(d) for k in all_kinds().values() if (d := k.migrations_dir()) is not None]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(folders))
    return cfg


def migrate_db(url: str | None = None) -> None:
    from alembic import command

    # "heads": the core's line and every kind's branch (each depends on the core revision it
    # needs, so Alembic orders them).
    command.upgrade(alembic_config(url), "heads")


# `proctor remote` talks to a server over HTTP and needs no kind, table or database here:
# it skips loading them (seconds of imports on every call of a script's loop).
CLIENT_ONLY = ("remote",)


class _Main(click.Group):
    """The core's commands; the kinds' groups and trainers are added the first time a command
    other than a client-only one is looked up (or the list shown), which imports every kind."""

    kinds_added = False

    def _add_kinds(self) -> None:
        if not self.kinds_added:
            self.kinds_added = True
            _add_kind_commands()

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in CLIENT_ONLY:
            self._add_kinds()
        return super().get_command(ctx, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_kinds()
        return super().list_commands(ctx)


@click.group(cls=_Main)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Proctor: human evaluation of grounded language agents."""
    if ctx.invoked_subcommand in CLIENT_ONLY:
        return
    from app.models import load_models

    load_models()  # every table, the kinds' too, before any command opens a session


@main.command()
def migrate() -> None:
    """Bring the database schema up to date (the core's and every kind's migrations)."""
    ensure_local_dirs()
    migrate_db()
    click.echo("database is at the newest schema")


def server_options() -> dict[str, Any]:
    """uvicorn's options for `proctor serve` (the tests' live server takes the same). The app
    takes the client's address from X-Forwarded-For itself, and only from the proxies in
    TRUSTED_PROXIES (app/main.py); uvicorn's own handling (on by default, trusting 127.0.0.1 or
    FORWARDED_ALLOW_IPS) would let anything connecting from there pick its address."""
    return {"log_level": "warning", "proxy_headers": False}


def _serve(host: str, port: int) -> None:
    import uvicorn

    from app.jobs import start_inprocess_worker
    from app.main import InsecureSettings, create_app

    try:
        web = create_app()  # imports everything before the worker thread starts
    except InsecureSettings as exc:
        raise click.ClickException(str(exc)) from None
    if not get_settings().redis_url:
        start_inprocess_worker()
        click.echo("jobs run in this process (no REDIS_URL set)")
    # The request log (app/middleware.py) to stderr; uvicorn's own access log stays off.
    import logging

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("proctor.requests").addHandler(handler)
    uvicorn.run(web, host=host, port=port, **server_options())


@main.command()
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
def serve(host: str, port: int) -> None:
    """Run the web server (with an in-process worker unless REDIS_URL is set)."""
    _serve(host, port)


@main.command()
@click.option("--concurrency", default=2, type=int)
@click.option("--beat", is_flag=True, help="Also run the schedule (the job sweeper, every minute): in one worker only.")
@click.option(
    "--queues",
    default="models,exports",
    show_default=True,
    help="The queues this worker takes jobs from: models (validation, generation, "
    "training), exports (exports, aggregation). Give each its own worker so an "
    "export never waits behind a model.",
)
def worker(concurrency: int, beat: bool, queues: str) -> None:
    """Run a Celery worker for jobs (needs REDIS_URL)."""
    from app.config import SECRET_KEY_HELP, weak_secret_key
    from app.jobs import celery_queue
    from app.kinds import QUEUES

    names = [q.strip() for q in queues.split(",") if q.strip()]
    if not names or set(names) - set(QUEUES):
        raise click.BadParameter(f"{queues!r}: name one or more of {', '.join(QUEUES)}", param_hint="--queues")

    if not get_settings().redis_url:
        raise click.ClickException("set REDIS_URL to run a separate worker")
    if (why := weak_secret_key(get_settings().secret_key)) is not None:  # it signs download links
        raise click.ClickException(f"{why}: {SECRET_KEY_HELP}")
    os.execvp(
        sys.executable,
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "worker",
            "--loglevel=INFO",
            f"--concurrency={concurrency}",
            "-Q",
            ",".join(celery_queue(q) for q in names),
            *(["-B"] if beat else []),
        ],
    )


@main.command()
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
@click.option("--no-serve", is_flag=True, help="Seed and print, then exit.")
def demo(host: str, port: int, no_serve: bool) -> None:
    """Migrate, seed demo data, print the logins and links, then serve."""
    from app.config import demo_secret_key
    from app.db import session_scope
    from app.demo import seed

    # The demo's rows are made to be thrown away: SQLite need not wait for the disk at each of
    # its ~1,800 commits (its seed took 15.4 s, 12.6 without). SQLITE_SYNCHRONOUS=full waits.
    os.environ.setdefault("SQLITE_SYNCHRONOUS", "normal")
    get_settings.cache_clear()
    demo_secret_key()  # SECRET_KEY, or a random one of the demo's own in var/
    ensure_local_dirs()
    migrate_db()
    with session_scope() as session:
        click.echo("seeding the demo (a live study per task kind, with agents and simulated workers)...")
        info = seed(session)
        served = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        base = get_settings().base_url.rstrip("/") or served  # the study page's links too
        studies = info["studies"]
        click.echo("")
        click.echo(f"Proctor demo at {served}")
        click.echo(f"  researcher login: {info['researcher'][0]}  password: {info['researcher'][1]}")
        click.echo(f"  admin login:      {info['admin'][0]}  password: {info['admin'][1]}")
        click.echo(
            f"  {len(studies)} {'study' if len(studies) == 1 else 'studies'}, live; "
            "a worker's entry link to each (another PROLIFIC_PID is another worker):"
        )
        for study in studies:
            click.echo(f"  {study.title} ({study.kind})")
            click.echo(f"    {base}/s/{study.slug}?PROLIFIC_PID=you&STUDY_ID=demo&SESSION_ID=1")
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
                assert job is not None  # made above (only its study's deletion takes it)
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


@main.command("plan")
@click.option(
    "--scores", required=True, help="Agents' expected true scores, e.g. 0.8,0.7,0.6 (or one baseline with --agents)."
)
@click.option("--agents", default=None, help="How many agents: with one score, each --difference below the one before.")
@click.option("--items", required=True, help="Items each agent is judged on.")
@click.option(
    "--annotations", default="3", show_default=True, help="Annotations per item (people's majority scores it)."
)
@click.option("--error", default=None, help="The chance a worker's judgement is flipped, 0-0.5 (default 0).")
@click.option("--accuracy", default=None, help="Workers' accuracy instead of --error (error = 1 - accuracy).")
@click.option("--difference", default=None, help="The gap to separate (default: the closest two scores).")
@click.option("--judge-agreement", default=None, help="An automatic judge's agreement with people, 0.5-1: PPI++.")
@click.option("--people", default=None, help="With a judge: items people judge (default half); the judge does all.")
@click.option("--payment", default=None, help="Payment per annotation, for the cost.")
@click.option("--studies", default="1000", show_default=True, help="Simulated studies.")
@click.option("--seed", default="0", show_default=True, help="The simulation's seed.")
@json_option("Print the plan as JSON.")
def plan_cmd(as_json: bool, **options: Any) -> None:
    """Plan a study: simulate it and say each agent's expected 95% interval half-width, the
    power to separate two agents, and the cost (docs/statistics.md, "Planning a study")."""
    import json

    from app.errors import InputError
    from app.leaderboards import plan

    try:
        result = plan.run_plan(plan.make_input(**options, max_studies=200_000, budget=False))
    except InputError as exc:
        option = f"--{exc.field.replace('_', '-')}" if exc.field else None
        raise click.BadParameter(exc.message, param_hint=option) from None
    if as_json:
        click.echo(json.dumps(result, indent=2, allow_nan=False))
    else:
        for line in plan.summary_lines(result):
            click.echo(line)


@main.group()
def user() -> None:
    """Manage accounts."""


@user.command("create")
@click.option("--email", required=True)
@click.option("--role", type=click.Choice(["researcher", "admin"]), required=True)
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
def user_create(email: str, role: str, password: str) -> None:
    from app.auth.security import password_problem
    from app.db import session_scope

    if (why := password_problem(password)) is not None:
        raise click.ClickException(why)
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
def prolific() -> None:
    """Prolific, with a researcher's API token (docs/crowd.md)."""


@prolific.command("check")
@click.option("--email", default="", help="Check the token this account stored (PUT /api/v1/prolific/token).")
@click.option("--api-url", default="", help="Prolific's API address (default: PROLIFIC_API_URL, else Prolific's own).")
def prolific_check(email: str, api_url: str) -> None:
    """Ask Prolific whose account a token opens: PROLIFIC_TOKEN's, or the one --email stored."""
    import os

    from app.crowd.prolific_api import ProlificClient, ProlificError

    token = os.environ.get("PROLIFIC_TOKEN", "").strip()
    if email:
        from sqlalchemy import select

        from app.auth.models import User
        from app.crowd import service
        from app.db import session_scope
        from app.errors import InputError

        with session_scope() as session:
            u = session.scalar(select(User).where(User.email == email.strip().lower()))
            if u is None:
                raise click.ClickException(f"no account {email}")
            try:
                token = service.token_of(session, u)
            except InputError as exc:
                raise click.ClickException(f"{email}: {exc}") from None
    if not token:
        raise click.ClickException("no token: set PROLIFIC_TOKEN, or name an account that stored one (--email)")
    with ProlificClient(token, api_url or None) as client:
        try:
            me = client.me()
        except ProlificError as exc:
            why = "Prolific does not accept this token" if exc.refused else str(exc)
            raise click.ClickException(f"{client.base_url}: {why}") from None
        click.echo(f"Prolific at {client.base_url}: the token opens the account {me.get('email') or me.get('id')}")


@main.group()
def train() -> None:
    """Train an agent (each kind adds what it can train: `proctor train --help` lists them)."""


@main.group()
def pairwise() -> None:
    """Pairwise judgements of agents (which of two attempts at one item did better)."""


@pairwise.command("score")
@input_file(
    "--judgements",
    "path",
    required=True,
    help='JSONL, one judgement a line: {"judge", "item", "a", "b", "winner": "a"|"b"|"tie"} '
    "(a and b: the two agents judged on the item).",
)
@number_option("--n-boot", 1000, click.IntRange(min=1, max=100_000), "Bootstrap resamples of the items.")
@click.option("--seed", default=0, show_default=True, type=int, help="The bootstrap's random seed.")
@click.option(
    "--control-length",
    is_flag=True,
    help="Control for the two attempts' lengths (every line then gives a_length and b_length): "
    "ratings with the judges' preference for length taken out (LMArena's style control).",
)
@json_option("Print one JSON object instead of tables.")
def pairwise_score(path: str, n_boot: int, seed: int, control_length: bool, as_json: bool) -> None:
    """Rate agents from pairwise judgements: Bradley-Terry with ties (Davidson), each agent's
    rating (log-strength, centred on the agents' mean) with a 95% interval, its rank with a 95%
    rank interval (bootstrap over items) and the win-rate matrix (docs/statistics.md)."""
    import json

    from app.leaderboards.pairwise import read_judgements, score
    from app.textfiles import read_capped

    with blaming(path):
        result = score(
            read_judgements(read_capped(path, get_settings().max_upload_bytes)),
            n_boot=n_boot,
            seed=seed,
            control_length=control_length,
        )
    if as_json:
        click.echo(json.dumps(result))
        return
    _pairwise_tables(result)


def _pairwise_tables(result: dict[str, Any]) -> None:
    from app.leaderboards.pairwise import INTERVAL_METHOD
    from app.leaderboards.stats import rank_label

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    agents = result["agents"]
    width = max(6, *(len(a) for a in agents))
    click.echo(f"{'agent':<{width}} {'rating':>7} {'95% interval':>17} {'rank':>5} {'95% ranks':>9} {'n':>6}")
    for name, a in agents.items():
        interval = "-" if a["low"] is None else f"[{num(a['low'])}, {num(a['high'])}]"
        ranks = rank_label((a["rank_low"], a["rank_high"]))
        click.echo(f"{name:<{width}} {num(a['rating']):>7} {interval:>17} {a['rank']:>5} {ranks:>9} {a['n']:>6}")
    ties, how = result["ties"], result["interval"]
    tie_interval = "" if ties["low"] is None else f" [{ties['low']:.1%}, {ties['high']:.1%}]"
    click.echo(
        f"\nties: two equally strong agents tie {ties['share_if_equal']:.1%}{tie_interval} of the time "
        f"(Davidson's nu = {num(ties['nu'])}); {ties['observed']:.1%} of the judgements are ties"
    )
    if (length := result["length"]) is not None:
        interval = "" if length["low"] is None else f" [{num(length['low'])}, {num(length['high'])}]"
        click.echo(
            f"controlled for length: a judge adds {num(length['coefficient'])}{interval} log-odds for an "
            f"attempt longer by {length['scale']:.3f} in (len_a - len_b) / (len_a + len_b)"
        )
    resampled = f", {how['n_boot']} resamples, seed {how['seed']}" if how["method"] == INTERVAL_METHOD else ""
    click.echo(
        f"{result['judgements']} judgements of {result['items']} items by {result['judges']} judges; "
        f"intervals: {how['method']}{resampled}"
    )
    click.echo("\nwin rate of the row's agent against the column's: (wins + ties / 2) / n, and n")
    cells = {
        a: {b: "-" if c["share"] is None else f"{c['share']:.0%} ({c['n']})" for b, c in row.items()}
        for a, row in result["win_matrix"].items()
    }
    col = max(9, *(len(a) for a in agents), *(len(v) for row in cells.values() for v in row.values()))
    click.echo(f"{'':<{width}} " + " ".join(f"{b:>{col}}" for b in agents))
    for a in agents:
        click.echo(f"{a:<{width}} " + " ".join(f"{cells[a].get(b, ''):>{col}}" for b in agents))


@main.command("kinds")
def kinds_cmd() -> None:
    """List the installed task kinds and what each adds (routes, commands, jobs, migrations)."""
    from importlib.metadata import entry_points

    from app.kinds import GROUP, all_kinds

    dists = {
        ep.name: (ep.dist.name if ep.dist else "?", ep.dist.version if ep.dist else "?")
        for ep in entry_points(group=GROUP)
    }
    for kind in all_kinds().values():
        dist, version = dists.get(kind.name, ("registered in-process", ""))
        routes = [
            f"{'|'.join(sorted(getattr(r, 'methods', None) or ['*']))} {r.path}"
            for router in kind.routers()
            for r in router.routes
        ]
        group = kind.cli()
        click.echo(f"{kind.name}: {kind.title} ({dist} {version})".rstrip())
        click.echo(f"  formats:    {', '.join(kind.item_formats) or '-'}")
        click.echo(
            f"  commands:   {('proctor ' + group.name) if group else '-'}"
            + "".join(f", proctor train {c.name}" for c in kind.train_commands())
        )
        click.echo(f"  jobs:       {', '.join(f'{kind.name}.{j}' for j in kind.jobs) or '-'}")
        click.echo(f"  tables:     {kind.models or '-'}")
        click.echo(f"  migrations: {kind.migrations_dir() or '-'}")
        click.echo(f"  routes:     {len(routes)}")
        for route in routes:
            click.echo(f"    {route}")


def _add_remote_commands() -> None:
    """`proctor remote ...`: the API client's commands (proctor_client, which needs no server)."""
    from proctor_client.cli import remote

    main.add_command(remote)


_add_remote_commands()


def _add_kind_commands() -> None:
    """Each kind's command group (`proctor <group> ...`) and trainers (`proctor train ...`), the
    way the core's own commands are added: found through the kind registry, never named."""
    from app.kinds import all_kinds

    for kind in all_kinds().values():
        group = kind.cli()
        if group is not None:
            if group.name != kind.name:
                raise click.ClickException(
                    f"kind {kind.name!r} names its command group {group.name!r}: "
                    "a kind's commands go under its own name"
                )
            for name in (kind.name, *kind.cli_aliases):
                if name in main.commands:
                    raise click.ClickException(f"kind {kind.name!r} adds the command {name!r}, which is already taken")
            main.add_command(group)
            for alias in kind.cli_aliases:  # the same commands, out of the help's list
                old = copy.copy(group)
                old.hidden = True
                old.help = f"The old name of `proctor {kind.name}`."
                main.add_command(old, alias)
        for command in kind.train_commands():
            train.add_command(command)


if __name__ == "__main__":
    main()
