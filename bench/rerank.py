"""Pragmatic reranking: candidates reranked per second, batched against a per-candidate loop.

Both runs get the same inputs: P paths in generated houses, each with C candidate
instructions (grammar instructions with words dropped, so they differ in quality), followed by
an ensemble of K listeners, M sampled rollouts each, scored by nDTW against the intended path.
"batched" steps all P x C x K x M rollouts together (workers/navigation/rerank.py);
"loop" calls the same code once per candidate (K x M still batched inside). Untrained
listeners are used: the speed does not depend on the weights, only on the shapes.

    python bench/rerank.py                       # CPU (and CUDA too when there is one)
    python bench/rerank.py --paths 64 --candidates 11 --listeners 10 --rollouts 5 --device cuda
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from app.kinds.navigation.grammar import describe_path  # noqa: E402
from app.kinds.navigation.house import generate_house, sample_paths  # noqa: E402
from workers.navigation.features import Vocabulary, World  # noqa: E402
from workers.navigation.listener import Ensemble, Listener  # noqa: E402
from workers.navigation.rerank import Worlds, follow_and_score, rerank_loop  # noqa: E402


def inputs(paths: int, candidates: int, seed: int = 0):
    rng = random.Random(seed)
    worlds, rows = [], []
    houses = max(1, paths // 16)
    for h in range(houses):
        house = generate_house(500 + h)
        worlds.append(World.from_house(house))
        for p in sample_paths(house, -(-paths // houses), rng=h):
            texts = describe_path(house, p, rng=rng.randrange(1 << 30), n=3)
            cands = []
            for c in range(candidates):
                words = texts[c % 3].split()
                keep = [w for w in words if rng.random() > 0.15 * (c // 3)]
                cands.append(" ".join(keep) or words[0])
            rows.append((house.scan, list(p.path), p.heading, cands))
    return worlds, rows[:paths]


def run(device: str, args) -> dict:
    dev = torch.device(device)
    worlds_list, rows = inputs(args.paths, args.candidates)
    vocab = Vocabulary.build([c for r in rows for c in r[3]])
    torch.manual_seed(0)
    ens = Ensemble([Listener(vocab.words, hidden=args.hidden) for _ in range(args.listeners)]).to(dev)
    worlds = Worlds(worlds_list, dev)
    instr, starts, heads, refs = [], [], [], []
    for scan, path, heading, cands in rows:
        idx = worlds.index(scan, path)
        for c in cands:
            instr.append(vocab.encode(c, 60))
            starts.append(idx[0])
            heads.append(heading)
            refs.append(idx)
    steps = max(len(r) for r in refs) * 2 + 2
    n = len(instr)

    def batched():
        return follow_and_score(ens, worlds, instr, starts, heads, refs, rollouts=args.rollouts, max_steps=steps).scores

    def loop():
        return rerank_loop(ens, worlds, instr, starts, heads, refs, rollouts=args.rollouts, max_steps=steps)

    out = {}
    for name, fn in (("batched", batched), ("loop", loop)):
        fn()  # warm-up (allocations, kernels)
        times = []
        for _ in range(args.repeats):
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            fn()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        out[name] = {"seconds": med, "per_second": n / med}
    out["ratio"] = out["batched"]["per_second"] / out["loop"]["per_second"]
    out["candidates"] = n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=16)
    ap.add_argument("--candidates", type=int, default=11, help="per path (N samples + the inference output)")
    ap.add_argument("--listeners", type=int, default=3, help="K")
    ap.add_argument("--rollouts", type=int, default=3, help="M")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", action="append", help="cpu / cuda (default: cpu, and cuda when available)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.device or (["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    print(
        f"torch {torch.__version__}; {args.paths} paths x {args.candidates} candidates, K={args.listeners} "
        f"listeners x M={args.rollouts} rollouts, hidden {args.hidden}; CPU threads {torch.get_num_threads()}"
    )
    for d in devices:
        name = torch.cuda.get_device_name(0) if d == "cuda" else "cpu"
        r = run(d, args)
        print(
            f"{name:>24}: batched {r['batched']['per_second']:9.1f} candidates/s "
            f"({r['batched']['seconds']:.3f} s)  loop {r['loop']['per_second']:9.1f} candidates/s "
            f"({r['loop']['seconds']:.3f} s)  ratio {r['ratio']:.1f}x  [{r['candidates']} candidates]"
        )


if __name__ == "__main__":
    main()
