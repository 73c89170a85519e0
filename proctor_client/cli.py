"""`proctor remote ...`: the client from the command line, against a running server (its URL
and an API token from --url/--token or PROCTOR_URL/PROCTOR_TOKEN). Also `python -m
proctor_client ...` where only the client is installed."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click

from proctor_client.client import Client, JobFailed, ProctorError
from proctor_client.types import Job, Leaderboard

EXPORT_FILES = ("annotations.csv", "annotations.jsonl", "completions.csv", "scores.csv", "scores.json")


def _value(text: str):
    """A --param/--setting value: JSON when it parses (3, 0.5, true, [3, 4]), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pairs(pairs: tuple[str, ...], option: str) -> dict:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{p!r}: give KEY=VALUE", param_hint=option)
        out[key.strip()] = _value(value)
    return out


def _echo_json(data) -> None:
    click.echo(json.dumps(data, indent=1, ensure_ascii=False, default=str))


class _Remote(click.Group):
    """Every client error ends the command with its message (exit 1), never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ProctorError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Remote)
@click.option("--url", envvar="PROCTOR_URL", metavar="URL", help="The server (or PROCTOR_URL).")
@click.option("--token", envvar="PROCTOR_TOKEN", metavar="TOKEN", help="An API token, pct_... (or PROCTOR_TOKEN).")
@click.pass_context
def remote(ctx: click.Context, url: str | None, token: str | None) -> None:
    """Work with a Proctor server over its API: create studies, upload outputs, run generations,
    fetch leaderboards and exports (docs/client.md)."""
    ctx.obj = (url, token)


def pass_client(f):
    """Give the command a Client, made only when it runs (so `--help` needs no server)."""

    @click.pass_context
    def run(ctx: click.Context, *args, **kwargs):
        url, token = ctx.obj  # the group's options
        if not url:
            raise click.UsageError("give the server: --url or PROCTOR_URL")
        if not token:
            raise click.UsageError(
                "give an API token: --token or PROCTOR_TOKEN (Account page, or `proctor user token --email ...`)"
            )
        return f(ctx.with_resource(Client(url, token)), *args, **kwargs)

    return functools.update_wrapper(run, f)


@remote.command("kinds")
@pass_client
def kinds_cmd(pc: Client) -> None:
    """The server's task kinds, their item formats and study options."""
    for k in pc.kinds():
        click.echo(f"{k.name}: {k.title}")
        click.echo(f"  formats: {', '.join(k.formats) or '-'}")
        click.echo(f"  options: {', '.join(k.options) or '-'}")


@remote.command("studies")
@click.option("--json", "as_json", is_flag=True, help="The API's JSON.")
@pass_client
def studies_cmd(pc: Client, as_json: bool) -> None:
    """Your studies."""
    studies = pc.studies()
    if as_json:
        _echo_json([s.raw for s in studies])
        return
    for s in studies:
        click.echo(f"{s.id:>5}  {s.state:<7} {s.kind:<12} {s.title}")


@remote.command("create-study")
@click.argument("items", type=click.Path(exists=True, dir_okay=False))
@click.option("--title", required=True)
@click.option("--kind", default=None, help="A task kind (default: the server's first).")
@click.option("--format", "fmt", default=None, help="The items' format (default: the kind's first).")
@click.option(
    "--setting",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A study setting, e.g. bundle_size=20, payment='£2'. Repeatable.",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="One of the kind's options (`proctor remote kinds`). Repeatable.",
)
@click.option("--launch", is_flag=True, help="Make it live at once.")
@click.option("--json", "as_json", is_flag=True)
@pass_client
def create_study_cmd(
    pc: Client,
    items: str,
    title: str,
    kind: str | None,
    fmt: str | None,
    settings: tuple,
    options: tuple,
    launch: bool,
    as_json: bool,
) -> None:
    """Create a study from an item file (the kind's format). Prints its id alone on stdout
    (`id=$(proctor remote create-study ...)`), a summary and the worker entry link on stderr;
    --json prints the whole study instead."""
    study = pc.create_study(
        items, title=title, kind=kind, format=fmt, settings=_pairs(settings, "--setting"), **_pairs(options, "--option")
    )
    if launch:
        study = pc.set_state(study.id, "live")
    if as_json:
        _echo_json(study.raw)
        return
    n = pc.progress(study.id).get("items", "?")
    click.echo(study.id)
    click.echo(f"study {study.id} ({study.kind}, {study.state}): {study.title}, {n} items besides gold", err=True)
    click.echo(f"  worker entry: {pc.url}{study.entry_path}", err=True)


@remote.command("state")
@click.argument("study_id", type=int)
@click.argument("state", type=click.Choice(["live", "paused", "closed"]))
@pass_client
def state_cmd(pc: Client, study_id: int, state: str) -> None:
    """Launch (live), pause or close a study."""
    study = pc.set_state(study_id, state)
    click.echo(f"study {study.id} is {study.state}")


@remote.command("upload-outputs")
@click.argument("study_id", type=int)
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--agent", required=True, help="The agent's id, or a name (made if new).")
@click.option("--version", default="1", show_default=True, help="A new agent's version.")
@pass_client
def upload_outputs_cmd(pc: Client, study_id: int, file: str, agent: str, version: str) -> None:
    """Import an agent's outputs for a study (its kind's format, e.g. JSONL)."""
    if agent.isdigit():
        agent_id = int(agent)
    else:
        agent_id = pc.find_or_create_agent(agent, kind=pc.study(study_id).kind, version=version).id
    n = pc.upload_outputs(study_id, agent_id, file)
    click.echo(f"imported {n} outputs of agent {agent_id} into study {study_id}")


@remote.command("upload-artifact")
@click.argument("agent_id", type=int)
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--role", required=True, help="The kind's role for it (e.g. speaker, listener).")
@click.option("--format", "fmt", required=True, help="torchscript or safetensors.")
@click.option("--config", default=None, help="JSON: a built-in architecture's config (safetensors).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the verdict.")
@pass_client
def upload_artifact_cmd(
    pc: Client, agent_id: int, file: str, role: str, fmt: str, config: str | None, wait: bool
) -> None:
    """Upload a new version of an agent's model; a worker validates it."""
    try:
        cfg = json.loads(config) if config else None
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--config") from None
    art = pc.upload_artifact(agent_id, file, role=role, format=fmt, config=cfg)
    click.echo(f"artifact {art.id} (version {art.version}) uploaded: {art.state}")
    if wait:
        art = pc.wait_artifact(agent_id, art.id)
        click.echo(f"artifact {art.id}: {art.state}" + (f" ({art.verdict})" if art.state != "valid" else ""))
        if art.state != "valid":
            sys.exit(1)


def _watch(pc: Client, job_id: int, unit: str = "step") -> Job:
    """Follow a job with a progress bar (on stderr) until it ends."""
    from tqdm import tqdm

    with tqdm(desc=f"job {job_id}", unit=unit, file=sys.stderr) as bar:

        def show(job: Job) -> None:
            bar.total = job.total or None
            bar.n = job.done
            bar.set_postfix_str(job.state, refresh=False)
            bar.refresh()

        try:
            return pc.watch_job(job_id, on_progress=show)
        except KeyboardInterrupt:
            raise click.ClickException(
                f"stopped watching; job {job_id} goes on (`proctor remote cancel {job_id}` stops it)"
            ) from None


@remote.command("generate")
@click.argument("study_id", type=int)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="A parameter of the kind's run, e.g. speaker=short, n=5. Repeatable.",
)
@click.option(
    "--file",
    "file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A file the kind's run takes (navigation: the R2R paths).",
)
@click.option("--watch/--no-watch", default=True, show_default=True, help="Follow it with a progress bar.")
@pass_client
def generate_cmd(pc: Client, study_id: int, params: tuple, file: str | None, watch: bool) -> None:
    """Start a generation run on a study (its kind's parameters: docs/client.md)."""
    run = pc.start_generation(study_id, file=file, **_pairs(params, "--param"))
    click.echo(f"{run.kind} {run.raw.get('noun', 'run')} {run.id} started (job {run.job_id})")
    if watch:
        try:
            job = _watch(pc, run.job_id)
        except JobFailed as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"job {job.id} {job.state}: {job.done} of {job.total}")


@remote.command("watch")
@click.argument("job_id", type=int)
@pass_client
def watch_cmd(pc: Client, job_id: int) -> None:
    """Follow any job (an export, a generation run) with a progress bar until it ends."""
    job = _watch(pc, job_id)
    click.echo(f"job {job.id} {job.state}: {job.done} of {job.total}")


@remote.command("cancel")
@click.argument("job_id", type=int)
@pass_client
def cancel_cmd(pc: Client, job_id: int) -> None:
    """Cancel a queued or running job; what it stored stays."""
    job = pc.cancel_job(job_id)
    click.echo(f"job {job.id} ({job.task}) {job.state}")


@remote.command("jobs")
@click.option("--study", "study_id", type=int, default=None)
@click.option("--state", default=None, type=click.Choice(["queued", "running", "done", "failed", "cancelled"]))
@click.option("--limit", default=20, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True)
@pass_client
def jobs_cmd(pc: Client, study_id: int | None, state: str | None, limit: int, as_json: bool) -> None:
    """Your jobs, newest first."""
    jobs = pc.jobs(study_id=study_id, state=state, limit=limit)
    if as_json:
        _echo_json([j.raw for j in jobs])
        return
    for j in jobs:
        study = f"study {j.study_id}" if j.study_id else ""
        click.echo(f"{j.id:>6}  {j.task:<22} {j.state:<9} {j.done:>6}/{j.total:<6} {study}")


def _table(board: Leaderboard) -> str:
    def pct(v):
        return "" if v is None else f"{100 * v:.1f}"

    head = ("type", "name", "n", "accuracy %", "95% interval")
    rows = []
    for r in board.rows:
        a = r.accuracy
        rows.append(
            (
                r.type,
                r.name,
                str(a.n if a else r.answered or ""),
                pct(a.mean) if a else "",
                f"{pct(a.low)}-{pct(a.high)}" if a and a.low is not None else "",
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = [f"{board.study} ({board.kind}): {board.items} items"]
    lines += [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in (head, *rows)
    ]
    return "\n".join(line.rstrip() for line in lines)


@remote.command("leaderboard")
@click.argument("study_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="The API's JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="One line per row, metric and category.")
@pass_client
def leaderboard_cmd(pc: Client, study_id: int, as_json: bool, as_csv: bool) -> None:
    """A study's leaderboard: a table, or --json / --csv."""
    board = pc.leaderboard(study_id)
    if as_json:
        _echo_json(board.raw)
    elif as_csv:
        click.echo(board.to_csv(), nl=False)
    else:
        click.echo(_table(board))


@remote.command("export")
@click.argument("study_id", type=int)
@click.option(
    "--file",
    "name",
    default="annotations.csv",
    show_default=True,
    type=click.Choice(EXPORT_FILES),
    help="Which of the export's files.",
)
@click.option("-o", "--out", default="-", show_default=True, help="Where to write it (- : stdout).")
@click.option(
    "--all",
    "folder",
    type=click.Path(file_okay=False),
    default=None,
    help="Write every file of the export into this folder instead.",
)
@pass_client
def export_cmd(pc: Client, study_id: int, name: str, out: str, folder: str | None) -> None:
    """Export a study (annotations as CSV or JSONL, completions, scores as CSV or JSON)."""
    job = pc.start_export(study_id)
    try:
        job = _watch(pc, job.id, unit="annotation")
    except JobFailed as exc:
        raise click.ClickException(str(exc)) from None
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for f in sorted(job.files):
            # The server names the files; a name that would leave the folder is refused.
            if not f or Path(f).name != f or f in (".", ".."):
                raise click.ClickException(f"the server named an export file {f!r}: not a plain file name")
            path = Path(folder) / f
            path.write_bytes(pc.download(job, f))
            click.echo(str(path))
        return
    data = pc.download(job, name)
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        Path(out).write_bytes(data)
        click.echo(f"{out}: {len(data)} bytes", err=True)
