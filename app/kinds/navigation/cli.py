"""`proctor navigation ...` (navigation's commands) and `proctor train speaker|listener`
(TaskKind.cli, TaskKind.train_commands)."""

from __future__ import annotations

import sys

import click

from app.agents.training import model_files, seed_and_device, sizes, training_command
from app.commands import blaming, echo_judged, half_width_option, input_file, json_option, read_file
from app.config import ensure_local_dirs


@click.group("navigation")
def navigation() -> None:
    """Navigation tools."""


@navigation.command("score")
@click.option("--connectivity", required=True, type=click.Path(exists=True, file_okay=False))
@input_file("--references", required=True)
@input_file("--predictions", required=True)
@json_option("One JSON object instead of a table.")
def nav_score(connectivity: str, references: str, predictions: str, as_json: bool) -> None:
    """Score R2R-format predictions (SR, SPL, nDTW, SDTW, NE, path length)."""
    from app.kinds.navigation.score import run

    sys.exit(run(connectivity, references, predictions, as_json, sys.stdout))


@navigation.command("judged")
@input_file(
    "--people",
    "people_path",
    required=True,
    help='People\'s follows of a random sample of the instructions: JSONL {"speaker", "instruction", '
    '"success": true|false} a line (several lines of one instruction: several followers).',
)
@input_file(
    "--judge",
    "judge_path",
    required=True,
    help='A listener ensemble\'s success on every instruction: the same lines, "success" true|false or its '
    "share of rollouts that reach the goal (0-1).",
)
@half_width_option("Plan for a PPI++ interval of ± this: how many instructions people must follow.", 0.5)
@json_option("One JSON object: per speaker.")
def nav_judged(people_path: str, judge_path: str, half_width: float, as_json: bool) -> None:
    """People's success rate and a listener ensemble's together (PPI++), per speaker: the
    judge's rate, its agreement with people, the PPI++ rate with its 95% interval and effective
    n, and how many instructions people must follow for ±half-width (docs/statistics.md)."""
    import json

    from app.kinds.navigation.judge import judged_offline, success_lines

    people, judge = read_file(people_path, success_lines), read_file(judge_path, success_lines)
    with blaming(people_path):
        out = judged_offline(people, judge, half_width)
    if as_json:
        click.echo(json.dumps(out))
        return
    echo_judged("success rate", 18, out, lambda x: "-" if x is None else f"{x:.3f}", half_width)


@navigation.command("trace")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--connectivity", required=True, type=click.Path(exists=True, file_okay=False))
@input_file(
    "--args",
    "args_file",
    help="The PanGEA task (args.json: scan, path, heading) to score the path against.",
)
@click.option(
    "--time-unit",
    type=click.Choice(["auto", "s", "ms"]),
    default="auto",
    help="The trace's time unit (auto: from the frame intervals).",
)
@json_option("One JSON object instead of text.")
def nav_trace(trace: str, connectivity: str, args_file: str | None, time_unit: str, as_json: bool) -> None:
    """Reduce a PanGEA pose trace (JSONL) to its viewpoint path; with --args, score it."""
    from app.kinds.navigation.traces import run_trace

    sys.exit(run_trace(trace, connectivity, args_file, time_unit, as_json, sys.stdout))


AS_HELP = (
    "Act as this account (its email): new buildings become its own, and a building of "
    "another account is refused unless it is an admin. Without it the command acts as the "
    "operator: it may replace any building, and new ones have no owner (admins only)."
)


def _account(session, email: str | None):
    """The account named by --as (None without it: the operator)."""
    from sqlalchemy import func, select

    from app.auth.models import User

    if email is None:
        return None
    user = session.scalar(select(User).where(func.lower(User.email) == email.strip().lower()))
    if user is None or user.role not in ("researcher", "admin"):
        raise click.ClickException(f"no researcher or admin account {email!r}")
    return user


@navigation.command("import-graphs")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--source", type=click.Choice(["matterport", "generated"]), default="matterport")
@click.option("--as", "as_email", metavar="EMAIL", default=None, help=AS_HELP)
def nav_import_graphs(directory: str, source: str, as_email: str | None) -> None:
    """Import every <scan>_connectivity.json in DIRECTORY as a building (replacing earlier ones
    that the account may change)."""
    from pathlib import Path

    from tqdm import tqdm

    from app.db import session_scope
    from app.errors import InputError
    from app.kinds.navigation.environments import NotYours, import_connectivity
    from app.kinds.navigation.graph import CONNECTIVITY_SUFFIX

    files = sorted(Path(directory).glob(f"*{CONNECTIVITY_SUFFIX}"))
    if not files:
        raise click.ClickException(f"no *{CONNECTIVITY_SUFFIX} files in {directory}")
    ensure_local_dirs()
    with session_scope() as session:
        actor = _account(session, as_email)
        for path in tqdm(files, desc="importing buildings", unit="building"):
            try:
                import_connectivity(session, path, source=source, actor=actor)
            except (InputError, NotYours) as e:
                raise click.ClickException(f"{path.name}: {e}") from None
    click.echo(f"imported {len(files)} buildings")


@navigation.command("import-house")
@click.argument("seed", type=click.IntRange(min=0))
@click.option(
    "--floors", default=1, show_default=True, type=click.IntRange(1, 3), help="Floors, joined by stairs rooms."
)
@click.option(
    "--paths",
    "n_paths",
    type=click.IntRange(1, 1000),
    default=None,
    help="Also write N of the house's paths, each with a grammar instruction, as an R2R "
    "file (--out): the paths file a generation run starts from.",
)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Where --paths writes.")
@click.option("--as", "as_email", metavar="EMAIL", default=None, help=AS_HELP)
def nav_import_house(seed: int, floors: int, n_paths: int | None, out: str | None, as_email: str | None) -> None:
    """Generate house SEED (the same seed and floors always give the same house:
    docs/kinds/navigation-houses.md) and import it as a building with its semantics, which a
    generation run's speaker needs."""
    import json

    from app.db import session_scope
    from app.errors import InputError
    from app.kinds.navigation.environments import NotYours, import_house
    from app.kinds.navigation.grammar import describe_path
    from app.kinds.navigation.house import generate_house, sample_paths, to_r2r

    if (n_paths is None) != (out is None):
        raise click.UsageError("give --paths N and --out FILE together")
    house = generate_house(seed, floors)
    ensure_local_dirs()
    with session_scope() as session:
        try:
            import_house(session, house, actor=_account(session, as_email))
        except (InputError, NotYours) as e:
            raise click.ClickException(str(e)) from None
    click.echo(f"imported {house.scan}: {len(house.rooms)} rooms, {len(house.viewpoints)} viewpoints")
    if n_paths is not None:
        paths = sample_paths(house, n_paths, rng=seed)
        records = to_r2r(house, paths, [describe_path(house, p, rng=seed * 1000 + k, n=1) for k, p in enumerate(paths)])
        with open(out, "w", encoding="utf-8") as f:
            json.dump(records, f, indent=1)
            f.write("\n")
        click.echo(
            f"wrote {len(records)} paths of {house.scan} to {out}"
            + (f" (the house has no more than {len(records)})" if len(records) < n_paths else "")
        )


@navigation.command("import-panoramas")
@click.argument("scan")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--as", "as_email", metavar="EMAIL", default=None, help=AS_HELP)
def nav_import_panoramas(scan: str, directory: str, as_email: str | None) -> None:
    """Import DIRECTORY's <viewpoint>.jpg|png equirectangular panoramas for building SCAN (all
    checked first; nothing is stored if one is refused)."""
    from app.db import session_scope
    from app.errors import InputError
    from app.kinds.navigation.environments import NotYours
    from app.kinds.navigation.panoramas import import_directory

    ensure_local_dirs()
    with session_scope() as session:
        try:
            summary, others = import_directory(session, scan, directory, actor=_account(session, as_email))
        except (InputError, NotYours) as e:
            raise click.ClickException(str(e)) from None
    if others:
        click.echo(
            f"left alone {len(others)} other files ({', '.join(others[:5])}{', ...' if len(others) > 5 else ''})"
        )
    click.echo(f"stored {len(summary['stored'])} panoramas; {scan} has {summary['panoramas']}")


@navigation.command("set-owner")
@click.argument("scan")
@click.argument("email", required=False)
@click.option("--none", "no_owner", is_flag=True, help="No owner: only admins may change it.")
def nav_set_owner(scan: str, email: str | None, no_owner: bool) -> None:
    """Give building SCAN to the account EMAIL (the operator's command: e.g. for buildings
    imported before buildings had owners), or with --none to the admins only."""
    from sqlalchemy import select

    from app.audit import record
    from app.db import session_scope
    from app.kinds.navigation.models import Environment

    if no_owner == bool(email):
        raise click.UsageError("give an EMAIL or --none")
    with session_scope() as session:
        env = session.scalar(select(Environment).where(Environment.scan == scan))
        if env is None:
            raise click.ClickException(f"no building {scan!r} has been imported")
        owner = _account(session, email)
        previous, env.owner_id = env.owner_id, owner.id if owner is not None else None
        record(
            session, None, "environment.owner", "environment", env.id, scan=scan, previous=previous, owner=env.owner_id
        )
    click.echo(f"{scan} now belongs to {email}" if email else f"{scan} now has no owner (admins only)")


@navigation.command("capability-file")
@input_file("--greedy", required=True, help="coop greedy file (anno_speaker-*_greedy.json).")
@input_file("--candidates", required=True, help="coop sampled candidates (speaker_*_sampled_*.json).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where to write the capability file.")
@click.option("--speaker", default=None, help="The speaker's name (default: the greedy file's model).")
@click.option("--limit-paths", type=click.IntRange(min=1), default=None, help="Keep the first N paths.")
def nav_capability_file(greedy: str, candidates: str, out: str, speaker: str | None, limit_paths: int | None) -> None:
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
    click.echo(
        f"{report['in_candidates']} of {report['greedy_paths']} greedy paths are in the candidates file"
        + (f" (missing: {', '.join(missing)})" if missing else "")
    )
    click.echo(
        f"wrote {report['paths_written']} paths for speaker {report['speaker']!r} to {out}: "
        f"samples per path {report['samples_per_path']}, {report['samples_with_scores']} samples "
        f"with a speaker score; candidate 0 was the greedy output on "
        f"{report['candidate_0_is_the_greedy_output']} paths (left out of the samples)"
    )


def _train(role: str) -> click.Command:
    """`proctor train speaker|listener`: the baseline models' trainer, one command per role."""

    @training_command(role, "workers.navigation.cli:run_training", role=role)
    @model_files(
        "the built-in architecture upload format",
        None,
        "File name stem (default: the role, listener-<k> per member).",
        quality=False,
    )
    @click.option("--houses", default=30, show_default=True, type=click.IntRange(min=1), help="Training houses.")
    @click.option("--held-out", default=5, show_default=True, type=click.IntRange(min=1), help="Held-out houses.")
    @click.option("--paths", default=20, show_default=True, type=click.IntRange(min=1), help="Paths per house.")
    @sizes(epochs=8)
    @click.option("--hidden", default=128, show_default=True, type=click.IntRange(min=8))
    @click.option(
        "--ensemble",
        "k",
        default=1,
        show_default=True,
        type=click.IntRange(min=1, max=32),
        help="Listeners: K members, each on its own random 90% of the paths with its own seed.",
    )
    @seed_and_device(None)
    def train() -> None:
        """Train the built-in navigation model of this role on generated houses."""

    return train


def train_commands() -> list[click.Command]:
    return [_train("speaker"), _train("listener")]
