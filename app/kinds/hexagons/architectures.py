"""Hexagons executors (the paper's Execution mode done by a model): the interface every
uploaded executor implements, the tokenisation that feeds it, and the config of our built-in
architecture, uploaded as safetensors weights plus that config (docs/kinds/hexagons.md,
"Executors"). No torch here: the web side checks a config at upload; the weights' tensors are
checked by the validation job (workers/hexagons/executor.py builds the module).

The interface (TorchScript uploads implement the same two methods):

    vocabulary() -> List[str]        token id -> word; 0 is "<pad>", 1 is "<unk>"
    execute(tokens int64 [B, L], board int64 [B, 180]) -> logits float [B, 180, 8]

`tokens` are an instruction's ids (tokenize + encode below), padded with 0 on the right;
`board` the colour codes of the board the step is executed on; the next board is the argmax
over the 8 colours of each tile. An answer must not depend on the padding or on the other
steps of the batch (the validation job checks both).
"""

from __future__ import annotations

import re

from app.agents.configs import check_architecture, check_words, only_fields, written_by
from app.kinds.hexagons.board import COLOURS, TILES

PAD, UNK = "<pad>", "<unk>"
# Instructions run to ~190 tokens in the release; longer ones are cut (the end is kept out).
MAX_TOKENS = 256
MAX_WORDS = 50_000
MAX_WORD_CHARS = 64
_TOKEN = re.compile(r"[a-z]+|[0-9]+|[^\sa-z0-9]")

ARCHITECTURE = "gru-attend-conv"
# name -> (role, the integer sizes its config needs); each size capped (far above what the
# task needs, far below a memory bomb).
ARCHITECTURES = {ARCHITECTURE: ("executor", ("embed", "hidden", "channels"))}
MAX_SIZES = {"embed": 512, "hidden": 1024, "channels": 512}
FIELDS = ("architecture", "words", *MAX_SIZES)


def tokenize(text: str) -> list[str]:
    """Lower-cased words, numbers and single punctuation marks ("2nd," -> 2, nd, ,)."""
    return _TOKEN.findall(text.lower())


def encode(texts: list[str], words: list[str]) -> list[list[int]]:
    """Token ids per text (unknown words: 1; at least one id, so an empty instruction is one
    "<unk>"), each at most MAX_TOKENS long; pad them with 0 on the right to batch them."""
    index = {w: i for i, w in enumerate(words)}
    out = []
    for t in texts:
        ids = [index.get(w, 1) for w in tokenize(t)][:MAX_TOKENS]
        out.append(ids or [1])
    return out


def check_vocabulary(words: object) -> list[str] | str:
    """The vocabulary, or why it is not one (the reason never repeats the words)."""
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return "must be a list of strings"
    if not 2 <= len(words) <= MAX_WORDS:
        return f"must hold 2 to {MAX_WORDS} words, not {len(words)}"
    if words[0] != PAD or words[1] != UNK:
        return f"must start with {PAD!r} (id 0) and {UNK!r} (id 1)"
    if any(len(w) > MAX_WORD_CHARS for w in words):
        return f"has a word longer than {MAX_WORD_CHARS} characters"
    if len(set(words)) != len(words):
        return "has a word twice"
    return words


def check_config(role: str, config: object) -> dict:
    """The config of the built-in executor; each problem names its field."""
    config = check_architecture(role, config, ARCHITECTURES, MAX_SIZES, written_by("executor", "hex-executor"))
    check_words(config, check_vocabulary)
    return only_fields(config, FIELDS)


def expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """The state_dict of gru-attend-conv (workers/hexagons/executor.py) for a config, name ->
    shape, in the module's order (a test keeps the two equal)."""
    e, h, c, v, k = (
        int(config["embed"]),
        int(config["hidden"]),
        int(config["channels"]),
        len(config["words"]),
        len(COLOURS),
    )
    return {
        "keep": (),
        "tokens.weight": (v, e),
        "gru.weight_ih_l0": (3 * h, e),
        "gru.weight_hh_l0": (3 * h, h),
        "gru.bias_ih_l0": (3 * h,),
        "gru.bias_hh_l0": (3 * h,),
        "colours.weight": (k, c),
        "tiles.weight": (TILES, c),
        "query.weight": (h, c),
        "query.bias": (h,),
        "value.weight": (c, h),
        "value.bias": (c,),
        "film.weight": (2 * c, h),
        "film.bias": (2 * c,),
        "conv1.weight": (c, c, 3, 3),
        "conv1.bias": (c,),
        "conv2.weight": (c, c, 3, 3),
        "conv2.bias": (c,),
        "out.weight": (k, c, 1, 1),
        "out.bias": (k,),
    }
