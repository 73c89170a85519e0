"""Every `proctor ...` command that README.md and docs/ name exists: each answers `--help` with
status 0, and the installed `proctor` runs. The docs once sent researchers to a
`proctor nav import-house` that did not exist."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

import click

from tests.conftest import untraced

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
PROCTOR = Path(sys.executable).parent / "proctor"  # the installed command, as a user runs it
# `proctor` as a command (not proctor_client, proctor-x, proctor.requests), then its words: one
# name, alternatives (`speaker|listener`, `demo | serve`) or a glob (`import-*`).
MENTION = re.compile(r"(?<![\w./-])proctor(?![\w.-])")
WORD = re.compile(r" ?([a-z*][a-z0-9*-]*(?: ?\| ?[a-z*][a-z0-9*-]*)*)(?![\w.-])")


def _sub(group: click.Group, ctx: click.Context, pattern: str) -> list[tuple[str, click.Command]]:
    names = fnmatch.filter(group.list_commands(ctx), pattern) if "*" in pattern else [pattern]
    return [(n, c) for n in names if (c := group.get_command(ctx, n)) is not None]


def named_commands() -> tuple[dict[tuple[str, ...], str], list[str]]:
    """The command paths the documents name (each with where it is first named), and the
    mentions that name no command."""
    from app.cli import main

    ctx = click.Context(main)
    found: dict[tuple[str, ...], str] = {}
    unknown: list[str] = []
    for doc in DOCUMENTS:
        # One line per code block line or paragraph line; a code span may wrap, so runs of
        # whitespace are one space (a backtick or any other character ends the words).
        text = re.sub(r"\s+", " ", doc.read_text(encoding="utf-8"))
        for m in MENTION.finditer(text):
            where = f"{doc.relative_to(ROOT)}: {text[m.start() : m.start() + 60]!r}"
            paths = [((), main)]
            pos = m.end()
            while (w := WORD.match(text, pos)) and all(isinstance(c, click.Group) for _, c in paths):
                pos = w.end()
                deeper = []
                for path, group in paths:
                    for pattern in re.split(r" ?\| ?", w.group(1)):
                        matched = _sub(group, ctx, pattern)
                        if not matched:
                            unknown.append(f"{where}: no command {' '.join((*path, pattern))!r}")
                        deeper += [((*path, n), c) for n, c in matched]
                paths = deeper
            for path, _ in paths:
                if path:
                    found.setdefault(path, where)
    return found, unknown


def test_every_command_the_docs_name_answers_help():
    found, unknown = named_commands()
    assert unknown == []
    # The commands the README's own list names are among those found (the parser reads them).
    assert {
        ("navigation", "import-house"),
        ("remote", "create-study"),
        ("train", "listener"),
        ("demo",),
        ("navigation", "import-graphs"),
        ("navigation", "import-panoramas"),
    } <= set(found)

    # Each help through the CLI's own objects, in this process (44 processes of the installed
    # command took 76 s of CPU untraced): what `--help` reads is the commands' definitions,
    # which a process imports the same way; one run of the installed command shows that it
    # starts and reaches the same groups.
    from click.testing import CliRunner

    from app.cli import main

    failed = []
    for path in sorted(found):
        ran = CliRunner().invoke(main, [*path, "--help"], prog_name="proctor")
        if ran.exit_code != 0 or "Usage: proctor " + " ".join(path) not in ran.output:
            failed.append(
                f"proctor {' '.join(path)} --help: status {ran.exit_code} ({found[path]})\n{ran.output[-300:]}"
            )
    assert failed == []
    deepest = max(found, key=len)
    with untraced():
        ran = subprocess.run([str(PROCTOR), *deepest, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ran.returncode == 0 and "Usage: proctor " + " ".join(deepest) in ran.stdout, ran.stdout + ran.stderr
