"""Difficulty calibration: avg@16 per problem under the base model, then the paper's splits.

Splits (DESIGN.md vocabulary, PAPER.md "datasets"): easy avg in [0.3, 0.6], hard [0, 0.0625], veasy
[0.6, 0.9], xhard = no correct sample. The paper defines xhard by pass@128 = 0; we only draw `samples`
(default 16) per problem here, so ours is pass@16 = 0 (a superset of the paper's xhard), said in the CSV.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llm_backend import tasks

SPLITS = {"easy": (0.3, 0.6), "hard": (0.0, 0.0625), "veasy": (0.6, 0.9), "xhard": (0.0, 0.0)}


def assign_splits(avg: np.ndarray) -> dict[str, np.ndarray]:
    """Indices of problems per split from their avg@samples (closed intervals; xhard = exactly 0)."""
    avg = np.asarray(avg)
    return {
        name: np.flatnonzero((avg >= lo - 1e-12) & (avg <= hi + 1e-12)) for name, (lo, hi) in SPLITS.items()
    }


def split_train_val(idx: np.ndarray, val_frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded held-out split of one bucket: at least one validation problem when the bucket has two."""
    idx = np.random.default_rng(seed).permutation(idx)
    n_val = int(round(len(idx) * val_frac))
    if len(idx) >= 2:
        n_val = min(max(n_val, 1), len(idx) - 1)
    return idx[n_val:], idx[:n_val]


def calibrate(
    problems: list[tasks.Problem],
    engine,
    tokenizer,
    out_dir: str | Path,
    samples: int = 16,
    max_new_tokens: int = 32,
    temperature: float = 0.7,
    val_frac: float = 0.5,
    seed: int = 0,
    chunk: int = 32,
    progress: bool = False,
) -> dict[str, tuple[int, int]]:
    """Measure avg@samples per problem and write `<split>.{train,val}.jsonl` + calibration.csv into out_dir.

    Returns {split: (n_train, n_val)}.
    """
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    avg = np.zeros(len(problems))
    it = range(0, len(problems), chunk)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="calibrate", unit="chunk")
    for a in it:
        part = problems[a : a + chunk]
        prompts = [tasks.build_prompt(tokenizer, p.question) for p in part]
        ro = engine.generate(prompts, samples, max_new_tokens, temperature, 1.0, seed=seed + a)
        r = np.array([tasks.reward(t, part[i // samples].answer) for i, t in enumerate(ro.texts)])
        avg[a : a + len(part)] = r.reshape(len(part), samples).mean(1)
    pd.DataFrame(
        {
            "question": [p.question for p in problems],
            "answer": [p.answer for p in problems],
            "pid": [p.pid for p in problems],
            f"avg@{samples}": avg,
        }
    ).to_csv(out / "calibration.csv", index=False)
    counts = {}
    for name, idx in assign_splits(avg).items():
        tr, va = split_train_val(idx, val_frac, seed)
        tasks.save_jsonl([problems[i] for i in tr], out / f"{name}.train.jsonl")
        tasks.save_jsonl([problems[i] for i in va], out / f"{name}.val.jsonl")
        counts[name] = (len(tr), len(va))
    return counts
