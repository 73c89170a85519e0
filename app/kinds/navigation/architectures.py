"""The built-in navigation architectures an agent may upload as safetensors weights plus a
config (docs/agents.md): what each config must hold. No torch here (the web side checks it)."""

from __future__ import annotations

from app.agents.configs import check_architecture, check_words, only_fields, word_problem
from app.errors import InputError

# The step/node/action layouts an agent is built for. The same string as
# workers.navigation.features.FEATURES_VERSION (a test keeps the two equal); copied because the
# web side never imports the torch code.
FEATURES_VERSION = "proctor.nav.features/1"
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
# Built-in architectures: which role each plays and the integer sizes its config needs.
ARCHITECTURES = {
    "gru-speaker": ("speaker", ("hidden", "embed")),
    "gru-listener": ("listener", ("hidden", "embed")),
}
FIELDS = ("architecture", "feature_version", "hidden", "embed", "words")  # and step_size, optional
MAX_SIZE = 4096  # hidden/embed: far above what a navigation agent needs, far below a memory bomb
# A vocabulary (R2R's is about 3,100 words) bounded as A3DS's and Hexagons' are: a model's list
# (vocabulary()) and a config's `words` alike, 50,000 words of up to 64 characters, which keeps
# vocabulary()'s answer under the sandbox's 4 MB for a call without tensors.
MAX_WORDS = 50_000
MAX_WORD_CHARS = 64


def check_vocabulary(words: object) -> list[str] | str:
    """The vocabulary, or why it is not one (the reason never repeats the words)."""
    if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
        return "must return a list of strings"
    if tuple(words[:4]) != SPECIALS:
        return f"must start with {', '.join(SPECIALS)}"
    if len(words) > MAX_WORDS:
        return f"must hold at most {MAX_WORDS} words, not {len(words)}"
    return word_problem(list(words), MAX_WORD_CHARS) or list(words)


def vocabulary_of(model: object, what: str) -> list[str]:
    """A model's vocabulary() checked where a run uses it, not only at validation: a TorchScript
    model may answer otherwise then (issue 26.9). ValueError, saying what is wrong, otherwise."""
    words = check_vocabulary(model.vocabulary())  # type: ignore[attr-defined]
    if isinstance(words, str):
        raise ValueError(f"the {what}'s vocabulary() {words}")
    return words


def check_config(role: str, config: object) -> dict:
    """The config of a built-in architecture; each problem names its field."""
    config = check_architecture(
        role,
        config,
        ARCHITECTURES,
        {"hidden": MAX_SIZE, "embed": MAX_SIZE},
        "the .json file `proctor train` writes beside the .safetensors",
    )
    if config.get("feature_version") != FEATURES_VERSION:
        raise InputError(
            f"feature_version {config.get('feature_version')!r} does not match {FEATURES_VERSION}",
            field="config.feature_version",
        )
    check_words(config, check_vocabulary)
    if "step_size" in config and (isinstance(config["step_size"], bool) or not isinstance(config["step_size"], int)):
        raise InputError("step_size must be an integer", field="config.step_size")
    # Any other field refused, as the other kinds' are (issue 26, round 16: 500 KB of a field of
    # its own was stored with the weights and sent back in every listing of the agent's models).
    return only_fields(config, (*FIELDS, *(["step_size"] if "step_size" in config else [])))
