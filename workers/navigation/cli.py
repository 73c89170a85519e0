"""`proctor train speaker|listener`: the command's body (kept here: the app never imports torch)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from workers.navigation.train import (
    evaluate_listeners,
    evaluate_speaker,
    make_dataset,
    train_listeners,
    train_speaker,
)
from workers.training import save_model

TRAIN_SEEDS = 1000  # training houses are seeds 1000.., held-out houses 900000.. (never shared)
HELD_OUT_SEEDS = 900000


def run_training(
    role: str,
    *,
    out: str,
    name: str | None,
    houses: int,
    held_out: int,
    paths: int,
    epochs: int,
    hidden: int,
    k: int,
    seed: int,
    device: str | None,
    echo: Callable[[str], None] = print,
) -> dict:
    with tqdm(total=houses + held_out, desc="houses", unit="house") as bar:

        def step(_f: float, _m: str) -> None:
            bar.update(1)

        train_data = make_dataset(
            range(TRAIN_SEEDS + seed * houses, TRAIN_SEEDS + (seed + 1) * houses), paths, progress=step
        )
        test_data = make_dataset(range(HELD_OUT_SEEDS, HELD_OUT_SEEDS + held_out), paths, progress=step)
    with tqdm(total=epochs, desc=f"training {role}", unit="epoch") as bar:

        def epoch(_f: float, message: str) -> None:
            bar.set_postfix_str(message.split(": ", 1)[-1])
            bar.update(1)

        if role == "speaker":
            model = train_speaker(train_data, epochs=epochs, hidden=hidden, seed=seed, device=device, progress=epoch)
        else:
            ensemble = train_listeners(
                train_data, k=k, epochs=epochs, hidden=hidden, seed=seed, device=device, progress=epoch
            )
    folder = Path(out)
    if role == "speaker":
        quality = evaluate_speaker(model, test_data)
        files = [save_model(model, folder, name or "speaker")]
        echo(f"speaker BLEU-4 on {quality['paths']} held-out paths ({held_out} houses): {quality['bleu4']:.3f}")
    else:
        quality = evaluate_listeners(ensemble, test_data)
        stem = name or "listener"
        files = [save_model(m, folder, f"{stem}-{j}" if k > 1 else stem) for j, m in enumerate(ensemble.members())]
        rates = ", ".join(f"{x:.1%}" for x in quality["success_rate"])
        echo(f"listener success rate on {quality['instructions']} held-out instructions ({held_out} houses): {rates}")
    for weights, config in files:
        echo(f"wrote {weights} and {config}")
    report = {
        "role": role,
        "train_houses": houses,
        "held_out_houses": held_out,
        "paths_per_house": paths,
        "epochs": epochs,
        "hidden": hidden,
        "ensemble": k,
        "seed": seed,
        **quality,
    }
    (folder / f"{name or role}-quality.json").write_text(json.dumps(report, indent=1))
    return report
