"""One name per thing: each kind's commands are `proctor <kind name> ...`; the names they had
before (`nav`, `hex`, `refgame`) still answer, hidden from the help, for one release."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from app import cli
from app.kinds import all_kinds


def test_every_kind_group_is_named_as_its_kind_and_old_names_are_hidden_aliases():
    ctx = click.Context(cli.main)
    listed = cli.main.list_commands(ctx)
    help_text = CliRunner().invoke(cli.main, ["--help"]).output
    for kind in all_kinds().values():
        if kind.cli() is None:
            continue
        assert kind.name in listed and f"  {kind.name} " in help_text, kind.name
        for alias in kind.cli_aliases:
            old = cli.main.get_command(ctx, alias)
            assert old.hidden and f"  {alias} " not in help_text, alias
            # the same commands under both names
            assert old.list_commands(ctx) == cli.main.get_command(ctx, kind.name).list_commands(ctx)
    aliases = {a for k in all_kinds().values() for a in k.cli_aliases}
    assert {"nav", "hex", "refgame"} <= aliases


def test_an_old_name_still_runs_its_command():
    new = CliRunner().invoke(cli.main, ["navigation", "score", "--help"])
    old = CliRunner().invoke(cli.main, ["nav", "score", "--help"])
    assert new.exit_code == old.exit_code == 0
    assert new.output.split("\n", 1)[1] == old.output.split("\n", 1)[1]  # all but the usage line


def test_a_kind_whose_group_has_another_name_is_refused(monkeypatch):
    kind = next(k for k in all_kinds().values() if k.cli() is not None)

    @click.group("somethingelse")
    def other() -> None:
        """A group not named as its kind."""

    monkeypatch.setattr(type(kind), "cli", lambda self: other)
    monkeypatch.setattr(cli.main, "commands", {})
    with pytest.raises(click.ClickException, match="under its own name"):
        cli._add_kind_commands()
