"""STS continuations per second: batched (one policy call per step for the whole batch) against
one episode at a time, and the ratio (issue 11's target: >= 5x on CPU).

Both runs get the same jobs: scenarios mined from expert recordings of five level families
(one per recording, by `--rule`), C continuations each of `--length` steps, and the same policy.
Policies (untrained: speed depends on the shapes, not the weights):

- `cnn-gru`: a BabyAI-style network in torch (one thread): a 3-layer conv over the 7x7x3 view,
  a GRU over the mission's words, an MLP head; 39k parameters, like the small baselines
  of minigrid's rl-starter-files. What a behavioural-cloning baseline costs.
- `mlp`: a numpy MLP over the flattened view, direction and a bag of words (2 x 128 hidden).
  Cheaper than the environment's own step: shows where batching stops paying.
- `builtin`: our own uploadable architecture (workers/sts/policy.py, `film-cnn-gru`, the
  behavioural-cloning baseline's default sizes: 576k parameters) through the wrapper uploaded
  policies run in (`TorchPolicy`), on `--device` (cpu, or cuda where there is one).
- `sandboxed`: the same network as a researcher uploads it, scripted to TorchScript and run as
  uploaded archives run: in the sandbox (workers/sandbox.py: its own process, seccomp filter,
  limits), on `--device` there, each call's observations and answers sent through pipes.

Both answer action probabilities; the rollout samples them with each continuation's own
generator, so the two modes must produce the same continuations (the run says whether they do).

    python bench/sts_generate.py                    # both policies, 32 scenarios x 4 x 32 steps
    python bench/sts_generate.py --policy cnn-gru --scenarios 64 --batch 128
    python bench/sts_generate.py --policy builtin --device cuda     # our architecture on the GPU
    python bench/sts_generate.py --policy sandboxed --device cuda   # as an upload, on the GPU
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# One thread for numpy's BLAS as for torch: the cores are shared, and a batch of 64 gains
# nothing from threads here (it lost 50x to thread start-up on a loaded machine).
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from app.kinds.sts.env import ACTIONS, BabyAISimulator  # noqa: E402
from app.kinds.sts.mining import mine  # noqa: E402
from app.kinds.sts.recordings import expert_recording  # noqa: E402
from app.kinds.sts.rollout import (  # noqa: E402
    batch_observations,
    jobs_for,
    rollout_batched,
    rollout_sequential,
    start,
)

LEVELS = (
    "BabyAI-GoToLocal-v0",
    "BabyAI-GoTo-v0",
    "BabyAI-PickupLoc-v0",
    "BabyAI-Pickup-v0",
    "BabyAI-OpenDoor-v0",
    "BabyAI-Open-v0",
    "BabyAI-PutNextLocal-v0",
    "BabyAI-SynthSeq-v0",
)
# BabyAI's whole vocabulary is small; unknown words share one index.
WORDS = (
    "go to the a pick up open put next you your on left right in front of behind and then after "
    "red green blue purple yellow grey ball box key door object"
).split()


class Words:
    def __init__(self):
        self.index = {w: i + 1 for i, w in enumerate(WORDS)}  # 0 pads

    def tokens(self, missions: list[str], width: int = 32) -> np.ndarray:
        out = np.zeros((len(missions), width), dtype=np.int64)
        for i, m in enumerate(missions):
            ids = [self.index.get(w.strip(","), len(WORDS) + 1) for w in m.split()][:width]
            out[i, : len(ids)] = ids
        return out


class MLPPolicy:
    def __init__(self, hidden: int = 128, seed: int = 0):
        rng = np.random.default_rng(seed)
        d = 7 * 7 * 3 + 4 + len(WORDS) + 2
        self.words = Words()
        self.w1 = rng.normal(0, d**-0.5, (d, hidden)).astype(np.float32)
        self.w2 = rng.normal(0, hidden**-0.5, (hidden, hidden)).astype(np.float32)
        self.w3 = rng.normal(0, hidden**-0.5, (hidden, len(ACTIONS))).astype(np.float32)

    def __call__(self, obs):
        b = len(obs["mission"])
        tok = self.words.tokens(obs["mission"])
        n = len(WORDS) + 2
        bag = np.bincount((np.arange(b)[:, None] * n + tok).ravel(), minlength=b * n).reshape(b, n)
        x = np.concatenate(
            [
                obs["image"].reshape(b, -1).astype(np.float32) / 10.0,
                np.eye(4, dtype=np.float32)[obs["direction"]],
                bag.astype(np.float32),
            ],
            axis=1,
        )
        z = np.tanh(np.tanh(x @ self.w1) @ self.w2) @ self.w3
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)


def cnn_gru_policy(seed: int = 0):
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(seed)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(3, 16, 2),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 2),
                nn.ReLU(),
                nn.Conv2d(32, 64, 2),
                nn.ReLU(),
            )
            self.emb = nn.Embedding(len(WORDS) + 2, 32, padding_idx=0)
            self.gru = nn.GRU(32, 64, batch_first=True)
            self.head = nn.Sequential(nn.Linear(64 + 64 + 4, 64), nn.Tanh(), nn.Linear(64, len(ACTIONS)))

        def forward(self, image, direction, tokens, lengths):
            x = self.conv(image.permute(0, 3, 1, 2).float()).flatten(1)
            packed = nn.utils.rnn.pack_padded_sequence(
                self.emb(tokens), lengths, batch_first=True, enforce_sorted=False
            )
            _, h = self.gru(packed)
            d = nn.functional.one_hot(direction, 4).float()
            return torch.softmax(self.head(torch.cat([x, h[-1], d], 1)), dim=1)

    net = Net().eval()
    words = Words()

    def policy(obs):
        tok = words.tokens(obs["mission"])
        lengths = torch.from_numpy((tok > 0).sum(1).clip(min=1))
        with torch.inference_mode():
            return (
                net(torch.from_numpy(obs["image"]), torch.from_numpy(obs["direction"]), torch.from_numpy(tok), lengths)
                .double()
                .numpy()
            )

    policy.parameters = sum(p.numel() for p in net.parameters())
    return policy


def builtin_policy(device: str = "cpu", seed: int = 0):
    import torch

    from workers.sts.policy import FilmPolicy, TorchPolicy

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    net = FilmPolicy().eval().to(device)
    policy = TorchPolicy(net, device)
    policy.parameters = sum(p.numel() for p in net.parameters())
    return policy


def sandboxed_policy(device: str = "cpu", seed: int = 0):
    import io

    import torch

    from workers.sandbox import SandboxedModel
    from workers.sts.loading import LOADER
    from workers.sts.policy import FilmPolicy, TorchPolicy

    torch.manual_seed(seed)
    buf = io.BytesIO()
    net = FilmPolicy().eval()
    torch.jit.save(torch.jit.script(net), buf)
    # As app.kinds.sts.policies.uploaded_policy runs one: observations leave on the CPU.
    policy = TorchPolicy(SandboxedModel(LOADER, "torchscript", buf.getvalue(), None, device=device).start(), "cpu")
    policy.parameters = sum(p.numel() for p in net.parameters())
    return policy


def build_jobs(args, sim):
    per_level = -(-args.scenarios // len(LEVELS))
    recs = [
        expert_recording(level, seed, simulator=sim, id=f"{level}:{seed}")
        for level in LEVELS
        for seed in range(per_level)
    ][: args.scenarios]
    kw = {"k": args.k, "skip_inapplicable": True} if args.rule == "before success" else {}
    scenarios = mine(recs, args.rule, args.length, simulator=sim, **kw)
    return jobs_for(scenarios, {r.id: r for r in recs}, args.continuations)


def call_cost(policy, obs, repeats: int = 50) -> float:
    policy(obs)
    t = time.perf_counter()
    for _ in range(repeats):
        policy(obs)
    return (time.perf_counter() - t) / repeats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--policy",
        choices=("cnn-gru", "mlp", "builtin", "sandboxed", "both", "ours", "all"),
        default="both",
        help="both: cnn-gru and mlp; ours: builtin and sandboxed; all: the four",
    )
    ap.add_argument("--device", default="cpu", help="where builtin and sandboxed run: cpu or cuda")
    ap.add_argument("--scenarios", type=int, default=32)
    ap.add_argument("--continuations", type=int, default=4)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rule", choices=("first step", "before success"), default="first step")
    ap.add_argument("--k", type=int, default=8, help="steps before success, with --rule 'before success'")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each mode; the median is printed")
    args = ap.parse_args()
    if args.device != "cpu":
        import torch

        if args.device.startswith("cuda") and not torch.cuda.is_available():
            ap.error(f"--device {args.device}: CUDA is not available here")
        if args.policy in ("cnn-gru", "mlp", "both"):
            ap.error("--device applies to the builtin and sandboxed policies: --policy builtin, sandboxed, ours or all")

    sim = BabyAISimulator()
    jobs = build_jobs(args, sim)
    context = sum(j.takeover for j in jobs)
    print(
        f"{len(jobs)} continuations ({len(jobs) // args.continuations} scenarios x {args.continuations}), "
        f"up to {args.length} steps each after {context / len(jobs):.1f} forced context steps on average; "
        f"batch {args.batch}; levels: {', '.join(lv[7:-3] for lv in LEVELS)}"
    )

    # What one step costs without a policy: the simulator (obs, verifier) and the rollout's bookkeeping.
    zero = lambda obs: np.zeros(len(obs["mission"]), dtype=np.int64)  # noqa: E731
    t = time.perf_counter()
    res = rollout_batched(jobs, zero, sim, batch_size=args.batch)
    steps_zero = sum(len(c.actions) + j.takeover for c, j in zip(res, jobs))
    print(
        f"environment alone (a policy that costs nothing): {(time.perf_counter() - t) / steps_zero * 1e6:.0f} "
        f"us per step (reset and forced context included)"
    )

    policies = {
        "cnn-gru": cnn_gru_policy,
        "mlp": MLPPolicy,
        "builtin": lambda: builtin_policy(args.device),
        "sandboxed": lambda: sandboxed_policy(args.device),
    }
    names = {"both": ["cnn-gru", "mlp"], "ours": ["builtin", "sandboxed"], "all": list(policies)}.get(
        args.policy, [args.policy]
    )
    continuations = {}
    for name in names:
        policy = policies[name]()
        sample = [start(j, sim) for j in jobs[: args.batch]]
        one = call_cost(policy, batch_observations(sample[:1]))
        many = call_cost(policy, batch_observations(sample))
        seq_t, bat_t = [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            seq = rollout_sequential(jobs, policy, sim)
            seq_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            bat = rollout_batched(jobs, policy, sim, batch_size=args.batch)
            bat_t.append(time.perf_counter() - t)
        steps = sum(len(c.actions) for c in bat)
        s, b = statistics.median(seq_t), statistics.median(bat_t)
        params = getattr(policy, "parameters", None)
        print(
            f"\n[{name}]"
            + (f" {params:,} parameters" if params else "")
            + (f" on {args.device}" if name in ("builtin", "sandboxed") else "")
        )
        print(
            f"  policy call: {one * 1e3:.3f} ms for 1 observation, {many * 1e3:.3f} ms for {len(sample)} "
            f"({many / len(sample) * 1e6:.0f} us each)"
        )
        print(f"  one at a time: {len(jobs) / s:8.1f} continuations/s  ({steps / s:7.0f} agent steps/s, {s:.2f} s)")
        print(f"  batched:       {len(jobs) / b:8.1f} continuations/s  ({steps / b:7.0f} agent steps/s, {b:.2f} s)")
        print(
            f"  ratio: {s / b:.2f}x   same continuations in both modes: {'yes' if seq == bat else 'NO'}   "
            f"successes: {sum(c.success_step is not None for c in bat)}/{len(bat)}"
        )
        getattr(policy, "close", lambda: None)()  # a sandbox's process
        continuations[name] = bat
    if "builtin" in continuations and "sandboxed" in continuations:
        # One seed, one network: the sandbox may cost time, never change an answer.
        same = continuations["builtin"] == continuations["sandboxed"]
        print(f"\nsandboxed and builtin gave the same continuations: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
