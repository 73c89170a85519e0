"""A3DS captioners as models (docs/kinds/a3ds.md, "Captioner models"): the interface every
uploaded captioner implements, how its token ids become a caption, and the config of our
built-in architecture, uploaded as safetensors weights plus that config. No torch here: the web
side checks a config at upload; the validation job (workers/a3ds/validate.py) runs the model.

The interface (TorchScript uploads implement the same two methods):

    vocabulary() -> List[str]     token id -> word; 0 "<pad>", 1 "<start>", 2 "<end>"
    caption(target uint8 [B, 64, 64, 3], distractor uint8 [B, 64, 64, 3]) -> int64 [B, L]

The pictures are the rendered scenes (app/kinds/a3ds/render.py, 64 x 64 RGB). A captioner that
does not look at the distractor (the paper's literal setting) still takes it. A caption is its
row's words up to the first "<pad>" or "<end>", joined by spaces; "<start>" is skipped. A
caption must not depend on the other pairs of the batch (the validation job checks it).
"""

from __future__ import annotations

from app.agents.configs import check_architecture, check_words, only_fields, word_problem, written_by
from app.errors import InputError
from app.kinds.a3ds.captions import FUNCTION_WORDS
from app.kinds.a3ds.scenes import WORDS

PAD, START, END = "<pad>", "<start>", "<end>"
SPECIALS = (PAD, START, END)
IMAGE_SIZE = 64
MAX_CAPTION_TOKENS = 48  # the exhaustive grammar's longest sentence is 20 words
MAX_WORDS = 10_000
MAX_WORD_CHARS = 64

ARCHITECTURE = "cnn-gru-captioner"
ARCHITECTURES = {ARCHITECTURE: ("captioner", ("embed", "hidden", "channels"))}
MAX_SIZES = {"embed": 512, "hidden": 1024, "channels": 256}
FIELDS = ("architecture", "words", "with_distractor", "max_length", *MAX_SIZES)


def grammar_words() -> list[str]:
    """The built-in captioner's vocabulary: the specials, then every word the grammars use."""
    words = set(FUNCTION_WORDS) | {w for values in WORDS.values() for v in values for w in v.split()}
    return [*SPECIALS, *sorted(words)]


def check_vocabulary(words: object) -> list[str] | str:
    """The vocabulary, or why it is not one (the reason never repeats the words)."""
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return "must be a list of strings"
    if not 4 <= len(words) <= MAX_WORDS:
        return f"must hold 4 to {MAX_WORDS} words, not {len(words)}"
    if tuple(words[:3]) != SPECIALS:
        return f"must start with {PAD!r} (id 0), {START!r} (id 1) and {END!r} (id 2)"
    return word_problem(words, MAX_WORD_CHARS) or words


def decode(ids: list[int], words: list[str]) -> str:
    """A row of token ids as caption text; ValueError for an id outside the vocabulary."""
    out = []
    for i in ids:
        if not 0 <= i < len(words):
            raise ValueError(f"token id {i} is outside the vocabulary (0 to {len(words) - 1})")
        if i == 0 or i == 2:
            break
        if i != 1:
            out.append(words[i])
    return " ".join(out)


def encode(caption: str, words: list[str]) -> list[int]:
    """<start>, the caption's words, <end> (training targets; every word must be known)."""
    index = {w: i for i, w in enumerate(words)}
    return [1, *(index[w] for w in caption.split()), 2]


def check_config(role: str, config: object) -> dict:
    """The config of the built-in captioner; each problem names its field."""
    config = check_architecture(role, config, ARCHITECTURES, MAX_SIZES, written_by("captioner", "a3ds-captioner"))
    check_words(config, check_vocabulary)
    if not isinstance(config.get("with_distractor"), bool):
        raise InputError(
            "with_distractor must be true (the captioner sees the distractor) or false", field="config.with_distractor"
        )
    length = config.get("max_length")
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_CAPTION_TOKENS:
        raise InputError(
            f"max_length must be an integer from 1 to {MAX_CAPTION_TOKENS}, got {length!r}", field="config.max_length"
        )
    return only_fields(config, FIELDS)


def expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """The state_dict of cnn-gru-captioner (workers/a3ds/captioner.py) for a config, name ->
    shape, in the module's order (a test keeps the two equal)."""
    e, h, c, v = int(config["embed"]), int(config["hidden"]), int(config["channels"]), len(config["words"])
    seen = 2 if config["with_distractor"] else 1
    return {
        "conv1.weight": (c, 3, 4, 4),
        "conv1.bias": (c,),
        "conv2.weight": (2 * c, c, 4, 4),
        "conv2.bias": (2 * c,),
        "conv3.weight": (2 * c, 2 * c, 4, 4),
        "conv3.bias": (2 * c,),
        "conv4.weight": (2 * c, 2 * c, 4, 4),
        "conv4.bias": (2 * c,),
        "project.weight": (h, 2 * c * 16),
        "project.bias": (h,),
        "init.weight": (h, seen * h),
        "init.bias": (h,),
        "tokens.weight": (v, e),
        "gru.weight_ih_l0": (3 * h, e + h),
        "gru.weight_hh_l0": (3 * h, h),
        "gru.bias_ih_l0": (3 * h,),
        "gru.bias_hh_l0": (3 * h,),
        "out.weight": (v, h),
        "out.bias": (v,),
    }
