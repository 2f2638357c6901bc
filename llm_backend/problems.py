"""The training and validation problems of a run, the order the fixed path draws them in, and the fixed
train sample the train_* metrics are measured on. None of them depends on `seed` but the order (paired runs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llm_backend import tasks
from llm_backend.config import ConfigError, LLMConfig
from llm_backend.model import cache_root

PACKAGED_SPLITS = Path(__file__).resolve().parent / "data"
"""Committed splits calibrated on SmolLM2-135M-Instruct (`isocompute llm calibrate`, see data/README.md)."""

MIXES = {"dual": (("hard", 0.5), ("easy", 0.5)), "tri": (("hard", 0.5), ("easy", 0.25), ("veasy", 0.25))}
"""Mixed presets as the simulator's (sandbox/problems.py): shares of calibrated splits."""


def _mix(sets: list[list], shares: list[float]) -> list:
    """The largest mixture with these shares that the sets allow, in a seeded (fixed) interleaved order."""
    total = min(int(len(s) / w) for s, w in zip(sets, shares, strict=True))
    out = [p for s, w in zip(sets, shares, strict=True) for p in s[: int(round(total * w))]]
    return [out[i] for i in np.random.default_rng(0).permutation(len(out))]


def load_problems(cfg: LLMConfig) -> tuple[list[tasks.Problem], list[tasks.Problem]]:
    """Train and validation problems; they depend on the data fields, never on `seed` (paired runs)."""
    family = cfg.family
    if cfg.dataset == "arith" and family.is_tiny:  # the tiny task family's cells: digits x digits, operations
        from llm_backend.tiny import tasks as tiny_tasks

        names = {"+": "add", "-": "sub", "*": "mul"}
        cells = [(names[o], cfg.digits, cfg.digits) for o in cfg.operations]
        allp = tiny_tasks.suite(2 * (cfg.d or 64) + 2 * (cfg.d_val or 16), 1, cells)
        train, val = allp[: cfg.d or 64], allp[cfg.d or 64 :][: cfg.d_val or 16]
    elif cfg.dataset == "arith":
        d = cfg.d or 64
        train = tasks.generate_arithmetic(d, 1, cfg.digits, cfg.terms, cfg.operations)
        seen = {p.question for p in train}
        pool = tasks.generate_arithmetic(4 * (cfg.d_val or 16) + 64, 2, cfg.digits, cfg.terms, cfg.operations)
        val = [p for p in pool if p.question not in seen][: cfg.d_val or 16]
    elif cfg.dataset.endswith(".jsonl"):
        allp = tasks.load_jsonl(cfg.dataset)
        order = np.random.default_rng(0).permutation(len(allp))
        n_val = min(cfg.d_val or max(1, len(allp) // 5), len(allp) - 1)
        val = [allp[i] for i in order[:n_val]]
        train = [allp[i] for i in order[n_val:]]
    else:
        # a tiny LM's splits are calibrated on it: a folder's own <folder>/splits, else <cache>/splits/<name>
        # and the shipped data/<name>
        sub = family.splits_sub
        roots = [Path(cfg.data_dir)] if cfg.data_dir else [
            cache_root() / "splits" / sub if sub else cache_root() / "splits", PACKAGED_SPLITS / sub]
        if family.own_splits is not None and not cfg.data_dir:
            roots.insert(0, family.own_splits)
        parts = MIXES.get(cfg.dataset, ((cfg.dataset, 1.0),))
        split_sets = []
        for name, _ in parts:
            have = [r for r in roots if (r / f"{name}.train.jsonl").exists()
                    and (r / f"{name}.val.jsonl").exists()]
            if not have:
                raise ConfigError(
                    f"no calibrated split {name!r} in {roots[0]}; run `isocompute llm calibrate` first"
                )
            root = have[0]
            split_sets.append((tasks.load_jsonl(root / f"{name}.train.jsonl"),
                               tasks.load_jsonl(root / f"{name}.val.jsonl")))
        if len(parts) == 1:
            train, val = split_sets[0]
        else:
            shares = [w for _, w in parts]
            train = _mix([s[0] for s in split_sets], shares)
            val = _mix([s[1] for s in split_sets], shares)
    if cfg.d:
        train = train[: cfg.d]
    if cfg.d_val:
        val = val[: cfg.d_val]
    if not train or not val:
        raise ConfigError(
            f"dataset {cfg.dataset!r} gives {len(train)} train / {len(val)} val problems; need both"
        )
    return train, val


def problem_order(cfg: LLMConfig, step: int, d: int) -> list[int]:
    """Indices of the bp problems of `step` (1-based): a fresh seeded permutation per epoch."""
    out = []
    for j in range(cfg.bp):
        idx = (step - 1) * cfg.bp + j
        epoch, pos = divmod(idx, d)
        out.append(int(np.random.default_rng([cfg.seed, epoch]).permutation(d)[pos]))
    return out


def train_eval_sample(train: list, cfg: LLMConfig, n_val: int | None = None) -> list:
    """The fixed training problems whose pass@1 estimates train_* (as many as the validation problems: d_val,
    or n_val, the split's whole validation set, when d_val is 0 = all; at most the training set; the same for
    all seeds and runs of a split, so paired); empty when cfg.train_eval is off.

    Sized by the validation set, not the training set: with d_val 0 on the tiny LM's Easy split the training
    sample would otherwise be all 2,219 training problems, 7x the work of grading the 317 validation ones."""
    if not cfg.train_eval:
        return []
    size = min(len(train), cfg.d_val or n_val or len(train))
    idx = np.sort(np.random.default_rng(0).permutation(len(train))[:size])
    return [train[i] for i in idx]
