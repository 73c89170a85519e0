"""The learned executor baseline (`proctor train hex-executor`, or the job `hexagons.train`):
our built-in executor (executor.HexExecutor) trained on the released train split to predict
each step's gold board from its instruction and the gold board before it (the paper's oracle
board-state setting; section 6), with cross-entropy over every tile's colour, the tiles that
change weighted up (most tiles of most steps do not).

Quality: the eight metrics of metrics.py on dev and test, each step executed from the gold
board before it ("oracle") and from the executor's own board ("predicted", its errors carry
over), beside the "no action" baseline (score.no_action).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save as save_safetensors

from app.kinds.hexagons.architectures import MAX_TOKENS, PAD, UNK, encode, tokenize
from app.kinds.hexagons.formats import Procedure, parse_procedures
from app.kinds.hexagons.score import no_action, summarise
from app.kinds.hexagons.train import TRAINING
from workers.hexagons.executor import HexExecutor, batch_tensors, execute_procedures
from workers.training import Adam, Recipe, descend, job_options, seed_all, train_and_upload

NAME = "executor"
SPLITS = ("train", "dev", "test")


def data_folder(folder: str | Path | None = None) -> Path:
    """--data, else HEXAGONS_DATA, else ../shared/data/hexagons beside the checkout."""
    if folder:
        return Path(folder)
    if os.environ.get("HEXAGONS_DATA"):
        return Path(os.environ["HEXAGONS_DATA"])
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hexagons"


def read_split(folder: str | Path, split: str) -> list[Procedure]:
    path = Path(folder) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no {split}.jsonl in {folder} (the released Hexagons data: --data or HEXAGONS_DATA)")
    return parse_procedures(path.read_bytes())


def build_vocabulary(procedures: Sequence[Procedure], min_count: int = 2) -> list[str]:
    """ "<pad>", "<unk>", then the training instructions' tokens seen at least min_count times,
    most frequent first (ties alphabetical: the same data, the same ids)."""
    counts = Counter(t for p in procedures for s in p.steps for t in tokenize(s.instruction))
    kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
    return [PAD, UNK, *kept]


def _steps(procedures: Sequence[Procedure], words: list[str]):
    """Every step as (token ids, gold board before, gold board after)."""
    ids, before, after = [], [], []
    for p in procedures:
        boards = p.boards
        ids += encode([s.instruction for s in p.steps], words)
        before += [list(boards[k]) for k in range(len(p.steps))]
        after += [list(boards[k + 1]) for k in range(len(p.steps))]
    return ids, np.asarray(before, dtype=np.int64), np.asarray(after, dtype=np.int64)


def _batches(rng: np.random.Generator, lengths: np.ndarray, batch: int) -> list[np.ndarray]:
    """Shuffled batches of steps of similar instruction length (the GRU runs to a batch's
    longest instruction: one long one in a batch of short ones costs the whole batch)."""
    perm = rng.permutation(len(lengths))
    out = []
    for s in range(0, len(perm), batch * 16):
        pool = perm[s : s + batch * 16]
        pool = pool[np.argsort(lengths[pool], kind="stable")]
        out += [pool[i : i + batch] for i in range(0, len(pool), batch)]
    return [out[i] for i in rng.permutation(len(out))]


def train_executor(
    procedures: Sequence[Procedure],
    words: list[str],
    *,
    change_weight: float = 4.0,
    device: str | torch.device = "cpu",
    progress: Callable[[int, float], None] | None = None,
    batch_done: Callable[[], None] | None = None,
    **recipe: Any,
) -> HexExecutor:
    """Cross-entropy over every tile of every step (tiles that change weigh `change_weight`),
    from the gold board before the step; `progress(epoch, mean loss)` after each epoch. The
    same seed gives the same weights on the CPU. `recipe`: the sizes and schedule (Recipe)."""
    r = Recipe.of(TRAINING, recipe)
    seed_all(r.seed)
    dev = torch.device(device)
    ids, before, after = _steps(procedures, words)
    model = HexExecutor(words, r.embed, r.hidden, r.channels).to(dev).train()
    opt = Adam(model.parameters(), lr=r.lr)
    order = np.random.default_rng(r.seed)
    lengths = np.array([len(t) for t in ids])
    for epoch in range(r.epochs):
        total = 0.0
        for idx in _batches(order, lengths, r.batch):
            tokens, board = batch_tensors([ids[i][:MAX_TOKENS] for i in idx], before[idx].tolist())
            target = torch.from_numpy(after[idx]).to(dev)
            board = board.to(dev)
            logits = model.execute(tokens.to(dev), board)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none"
            )
            weight = 1.0 + (change_weight - 1.0) * (board != target).reshape(-1).float()
            loss = (loss * weight).sum() / weight.sum()
            total += descend(opt, loss, model.parameters()) * len(idx)
            if batch_done:
                batch_done()
        if progress:
            progress(epoch + 1, total / len(ids))
    return model.eval().cpu()


def evaluate(
    model, procedures: Sequence[Procedure], on: str, device: str | torch.device = "cpu", batch_size: int = 64
) -> dict:
    """score.summarise of the executor's boards (on "gold": oracle board-state; "own":
    predicted board-state)."""
    specs = [([s.instruction for s in p.steps], list(p.initial), [list(s.board) for s in p.steps]) for p in procedures]
    boards = execute_procedures(model.to(device), specs, on, batch_size, device)
    rows = []
    for p, predicted in zip(procedures, boards):
        gold = p.boards
        for k, s in enumerate(p.steps):
            hyp_before = gold[k] if on == "gold" else (list(p.initial) if k == 0 else predicted[k - 1])
            rows.append((p, s, gold[k], gold[k + 1], hyp_before, predicted[k]))
    model.cpu()
    return summarise(rows)


def save_executor(model: HexExecutor, folder: str | Path, name: str = NAME) -> tuple[Path, Path]:
    """`<name>.safetensors` (weights) and `<name>.json` (config): the built-in executor's
    upload format."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights, config = folder / f"{name}.safetensors", folder / f"{name}.json"
    weights.write_bytes(weights_bytes(model))
    config.write_text(json.dumps(model.config(), indent=1))
    return weights, config


def weights_bytes(model: HexExecutor) -> bytes:
    return save_safetensors({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()})


KEYS = ("action_f1", "action_em", "board_f1", "board_em")


def _line(label: str, m: dict) -> str:
    return f"  {label:<22}" + "  ".join(f"{k} {100 * m[k]:6.2f}" for k in KEYS)


def run_training(
    *,
    data: str | Path | None = None,
    min_count: int = 2,
    change_weight: float = 4.0,
    device: str = "cpu",
    out: str | Path | None = "var/models",
    name: str = NAME,
    limit: int | None = None,
    echo: Callable[[str], None] = print,
    epoch_done: Callable[[int, float], None] | None = None,
    **recipe: Any,
) -> tuple[HexExecutor, dict]:
    """The whole command: vocabulary, training, dev and test scores (oracle and predicted
    board-state, beside "no action"), files (when `out`). Progress bars on stderr (tqdm);
    `limit` trains on the first N procedures only (quick checks)."""
    from tqdm import tqdm

    r = Recipe.of(TRAINING, recipe)
    folder = data_folder(data)
    train = read_split(folder, "train")[:limit] if limit else read_split(folder, "train")
    held = {s: read_split(folder, s) for s in ("dev", "test") if (folder / f"{s}.jsonl").is_file()}
    words = build_vocabulary(train, min_count)
    n_steps = sum(len(p.steps) for p in train)
    echo(
        f"{len(train)} training procedures, {n_steps} steps; vocabulary {len(words)} words "
        f"(seen at least {min_count} times); on {device}"
    )
    with tqdm(total=r.epochs * -(-n_steps // r.batch), desc="training", unit="batch") as bar:

        def epoch(n: int, loss: float) -> None:
            bar.set_postfix_str(f"epoch {n} loss {loss:.3f}")
            if epoch_done:
                epoch_done(n, loss)

        model = train_executor(
            train,
            words,
            **asdict(r),
            change_weight=change_weight,
            device=device,
            progress=epoch,
            batch_done=lambda: bar.update(1),
        )
    report = {
        "data": str(folder),
        "procedures": len(train),
        "steps": n_steps,
        "epochs": r.epochs,
        "seed": r.seed,
        "min_count": min_count,
        "batch": r.batch,
        "lr": r.lr,
        "change_weight": change_weight,
        **{k: v for k, v in model.config().items() if k != "words"},
        "words": len(words),
        "scores": {},
    }
    for split, procs in held.items():
        scores = {"no_action": no_action(procs)["mean"]}
        for on, label in (("gold", "oracle"), ("own", "predicted")):
            scores[label] = evaluate(model, procs, on, device)["mean"]
        report["scores"][split] = scores
        echo(f"{split} ({len(procs)} procedures, {sum(len(p.steps) for p in procs)} steps):")
        echo(_line("no action", scores["no_action"]))
        echo(_line("oracle board-state", scores["oracle"]))
        echo(_line("predicted board-state", scores["predicted"]))
    if out:
        weights, config = save_executor(model, out, name)
        (Path(out) / f"{name}-quality.json").write_text(json.dumps(report, indent=1))
        echo(f"wrote {weights} and {config}")
    return model, report


# The training options a queued job may carry (`proctor train hex-executor --agent-id`): the
# keywords of run_training but where it runs, where files go and the callbacks.
JOB_OPTIONS = job_options(run_training, TRAINING)


def run_train_job(session, job, progress) -> dict:
    """The job `hexagons.train`: train as the command does (params: agent_id, and optionally
    any of JOB_OPTIONS and device) and upload the executor as a new
    version of the agent's model (validated by `hexagons.validate`, like any upload)."""

    def train(options, device, echo, epoch_done):
        model, report = run_training(**options, device=device, out=None, echo=echo, epoch_done=epoch_done)
        return model, {k: v for k, v in report.items() if k != "data"}

    return train_and_upload(
        session,
        job,
        progress,
        role="executor",
        noun="executor",
        default_epochs=TRAINING["epochs"],
        options=JOB_OPTIONS,
        train=train,
        weights_bytes=weights_bytes,
    )
