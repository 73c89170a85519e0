"""workers.training.Adam against torch.optim.Adam: the same weights to the bit on the CPU,
step by step, with a parameter that has no gradient on some steps; and it trains without
importing torch._dynamo (torch's optimiser does, 1.5 s of CPU a training process)."""

from __future__ import annotations

import subprocess
import sys

import torch

from workers.training import Adam, descend


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def test_the_weights_match_torchs_adam_to_the_bit():
    ours, theirs = _net(3), _net(3)
    extra_ours = torch.nn.Parameter(torch.randn(4))
    extra_theirs = torch.nn.Parameter(extra_ours.detach().clone())
    start = extra_ours.detach().clone()
    opt_ours = Adam([*ours.parameters(), extra_ours], lr=0.01)
    opt_theirs = torch.optim.Adam([*theirs.parameters(), extra_theirs], lr=0.01)
    gen = torch.Generator().manual_seed(11)
    for step in range(40):
        x, y = torch.randn(16, 5, generator=gen), torch.randn(16, 3, generator=gen)
        for net, extra, opt in ((ours, extra_ours, opt_ours), (theirs, extra_theirs, opt_theirs)):
            loss = ((net(x) - y) ** 2).mean()
            if step % 3 == 0:  # the extra parameter's gradient only every third step
                loss = loss + (extra**2).sum()
            descend(opt, loss, net.parameters())
        for a, b in zip([*ours.parameters(), extra_ours], [*theirs.parameters(), extra_theirs]):
            assert torch.equal(a, b), step
    assert not torch.equal(extra_ours.detach(), start)  # the sometimes-idle parameter moved


def test_training_does_not_import_torch_dynamo():
    code = (
        "import sys, torch\n"
        "from workers.training import Adam, descend\n"
        "m = torch.nn.Linear(3, 1)\n"
        "descend(Adam(m.parameters(), lr=0.1), m(torch.ones(2, 3)).sum(), m.parameters())\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
