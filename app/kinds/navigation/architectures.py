"""The built-in navigation architectures an agent may upload as safetensors weights plus a
config (docs/agents.md): what each config must hold. No torch here (the web side checks it)."""

from __future__ import annotations

from app.agents.configs import check_architecture
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
MAX_SIZE = 4096  # hidden/embed: far above what a navigation agent needs, far below a memory bomb
MAX_WORDS = 100_000


def check_config(role: str, config: object) -> dict:
    """The config of a built-in architecture; each problem names its field."""
    check_architecture(role, config, ARCHITECTURES, {"hidden": MAX_SIZE, "embed": MAX_SIZE},
                       "the .json file `proctor train` writes beside the .safetensors")
    if config.get("feature_version") != FEATURES_VERSION:
        raise InputError(f"feature_version {config.get('feature_version')!r} does not match "
                         f"{FEATURES_VERSION}", field="config.feature_version")
    words = config.get("words")
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise InputError("words must be a list of strings (the vocabulary)", field="config.words")
    if tuple(words[:4]) != SPECIALS:
        raise InputError(f"words must start with {', '.join(SPECIALS)}", field="config.words")
    if len(words) > MAX_WORDS or len(set(words)) != len(words):
        raise InputError(f"words must be distinct and at most {MAX_WORDS}", field="config.words")
    if "step_size" in config and not isinstance(config["step_size"], int):
        raise InputError("step_size must be an integer", field="config.step_size")
    return config
