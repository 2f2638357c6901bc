"""The learning-curve table (docs/DESIGN.md, docs/CONTRACTS.md): one row per evaluation point, these columns,
whichever engine or log reader wrote it, so studies fits any table by the same names."""

from __future__ import annotations

CURVE_COLUMNS = (
    "backend", "model", "dataset", "seed", "n", "bp", "batch", "m", "compute", "tokens", "epoch", "lr", "k",
    "train_mean", "train_best_k", "train_worst_k", "train_zero_frac",
    "val_mean", "val_best_k", "val_worst_k", "val_zero_frac",
    "entropy", "kl", "grad_norm", "response_len", "zero_var_frac", "batch_reward",
)
"""Every column of an engine's table, in the order the simulator writes them; a log reader writes the same
columns after `run_id`, NaN where its framework does not log one."""
