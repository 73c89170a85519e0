"""What every kind checks first in the config of safetensors weights for one of its built-in
architectures (TaskKind.check_artifact_config): a JSON object, a known architecture of the
upload's role, and whole-number sizes within their caps. The kind checks the rest (its
vocabulary, versions, other fields)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.errors import InputError
from app.jsonsafe import unshowable


def written_by(name: str, command: str) -> str:
    """check_architecture's `written_by` for a config that `proctor train <command>` writes as
    <name>.json beside <name>.safetensors."""
    return f"{name}.json, which `proctor train {command}` writes beside {name}.safetensors"


def check_architecture(
    role: str,
    config: object,
    architectures: Mapping[str, tuple[str, tuple[str, ...]]],
    max_sizes: Mapping[str, int],
    written_by: str,
) -> dict[str, Any]:
    """`config` as a dict once the common checks pass; InputError naming the field otherwise.
    `architectures`: name -> (role, size fields); `written_by`: which file the config is and
    what writes it, for the message when it is not a JSON object."""
    if not isinstance(config, dict):
        raise InputError(f"the config must be a JSON object ({written_by})", field="config")
    arch = config.get("architecture")
    if not isinstance(arch, str) or arch not in architectures:
        raise InputError(
            f"unknown architecture {arch!r}: use one of {', '.join(architectures)}", field="config.architecture"
        )
    arch_role, sizes = architectures[arch]
    if arch_role != role:
        article = "an" if arch_role[:1] in "aeiou" else "a"
        raise InputError(
            f"architecture {arch} is {article} {arch_role}, but the upload's role is {role}",
            field="config.architecture",
        )
    for name in sizes:
        value, cap = config.get(name), max_sizes[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
            raise InputError(f"{name} must be an integer from 1 to {cap}, got {value!r}", field=f"config.{name}")
    return config


def word_problem(words: list[str], max_chars: int) -> str | None:
    """Why a vocabulary's words cannot be a speaker's or a captioner's (whose words generation
    writes into items that workers read), or None: an empty word, a space, a word past
    `max_chars`, a character no page shows as itself (a bidi override reversed the words after
    it: issue 26, round 14), a word twice. The reason never repeats the words."""
    if any(not w or len(w) > max_chars or any(c.isspace() for c in w) for w in words):
        return f"has an empty word, a word with a space or one longer than {max_chars} characters"
    if any(unshowable(w) for w in words):
        return "has a word with a control or format character (a bidi override, a zero-width space)"
    if len(set(words)) != len(words):
        return "has a word twice"
    return None


def check_words(config: dict[str, Any], check_vocabulary: Callable[[object], list[str] | str]) -> list[str]:
    """The config's `words`, checked by the kind's `check_vocabulary` (the vocabulary or why it
    is not one); InputError naming config.words otherwise."""
    words = check_vocabulary(config.get("words"))
    if isinstance(words, str):
        raise InputError(f"words (the vocabulary) {words}", field="config.words")
    return words


def only_fields(config: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The config's `fields`, refusing any other: a typo ("hiden") would otherwise be ignored
    and the default built."""
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise InputError(
            f"unknown config field {unknown[0]!r}: the fields are {', '.join(fields)}", field=f"config.{unknown[0]}"
        )
    return {k: config[k] for k in fields}
