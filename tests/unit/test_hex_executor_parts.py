"""The executor's parts without a database: tokenisation, the config's tensor shapes against
the module's, and execution from gold or own boards."""

from __future__ import annotations

import torch

from app.kinds.hexagons.architectures import encode, expected_shapes, tokenize
from workers.hexagons.executor import HexExecutor, execute_procedures


def test_tokens_are_lower_cased_words_numbers_and_marks():
    assert tokenize("Paint the 2nd tile, RED!") == ["paint", "the", "2", "nd", "tile", ",", "red", "!"]
    words = ["<pad>", "<unk>", "paint", "red"]
    assert encode(["Paint it red", "", "x" * 3], words) == [[2, 1, 3], [1], [1]]
    assert len(encode(["a " * 1000], words)[0]) == 256


def test_the_config_names_every_tensor_of_the_module_with_its_shape():
    model = HexExecutor(["<pad>", "<unk>", "red"], embed=5, hidden=6, channels=7)
    state = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert state == expected_shapes(model.config())
    assert list(state) == list(expected_shapes(model.config()))


def test_an_untrained_executor_paints_nothing_so_gold_and_own_boards_differ():
    torch.manual_seed(0)
    model = HexExecutor(["<pad>", "<unk>"]).eval()
    initial = [0] * 180
    gold = [[4] + [0] * 179, [4, 5] + [0] * 178]
    spec = [(["tile 0 red", "tile 1 blue"], initial, gold)]
    # From the gold board before each step it keeps that board; from its own, the blank one.
    assert execute_procedures(model, spec, "gold") == [[initial, gold[0]]]
    assert execute_procedures(model, spec, "own") == [[initial, initial]]
