"""A tiny deterministic backend for the studies tests: curves with known shapes, instant or slowed on purpose.

Options: sleep (seconds per run), diverge_at (step where the run stops as diverged), fail (raise). The
environment variable FAKE_SLEEP adds seconds per run without changing the config (kill test).
The curve of one run: R(C) = 0.2 + A_n * (1 - exp(-C / C_n)) + noise, A_n = 0.5 + 0.05 log2 n, C_n = 2e3 n,
so small n rise first and large n end higher (the n-favouring shape of docs/PAPER.md finding 1).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd

from studies.backends import RunOutput, SimAdapter, register_backend, tidy_pass1
from studies.config import RunConfig, StudiesError

MODELS = ("tabular", "interference")
OPTIONS = ("sleep", "diverge_at", "fail")
D_TRAIN, D_VAL = 6, 4


class FakeAdapter:
    name = "fake"
    calls = 0  # runs executed in this process (tests count reruns with it)

    def validate(self, cfg: RunConfig) -> None:
        if (cfg.model or "tabular") not in MODELS:
            raise StudiesError(f"unknown model {cfg.model!r}; choose one of {', '.join(MODELS)}")
        for key, _ in cfg.options:
            if key not in OPTIONS:
                raise StudiesError(f"unknown fake option {key!r}")

    def needs_gpu(self, cfg: RunConfig) -> bool:
        return cfg.device.startswith("cuda")

    def run(self, cfg: RunConfig, progress: bool = False) -> RunOutput:
        type(self).calls += 1
        time.sleep(float(cfg.option("sleep", 0.0)) + float(os.environ.get("FAKE_SLEEP", 0.0)))
        if cfg.option("fail"):
            raise RuntimeError(f"fake failure of {cfg.run_id}")
        rng = np.random.default_rng([cfg.seed, cfg.problem_seed or 0, cfg.n, cfg.bp])
        steps = cfg.steps
        evals = (cfg.n_evals or 32) - 1
        m = np.unique(np.concatenate([[0], np.geomspace(1, steps, evals).round().astype(np.int64)]))
        status, info = "done", {"diverged_step": None, "reason": None}
        div = cfg.option("diverge_at")
        if div is not None and div < steps:
            m = m[m < div]
            status, info = "diverged", {"diverged_step": int(div), "reason": "nan in logits"}
        compute = m * cfg.batch
        a_n, c_n = 0.5 + 0.05 * np.log2(cfg.n), 2e3 * cfg.n
        val = 0.2 + a_n * (1 - np.exp(-compute / c_n)) + rng.normal(0, 0.002, m.size)
        e = m.size
        table = pd.DataFrame({
            "run_id": cfg.run_id, "backend": cfg.backend, "model": cfg.model or "tabular",
            "dataset": cfg.dataset,
            "seed": cfg.seed, "n": cfg.n, "bp": cfg.bp, "batch": cfg.batch, "m": m, "compute": compute,
            "tokens": compute * 100, "epoch": compute / (6 * cfg.n), "lr": 0.1, "k": cfg.k,
            "train_mean": val + 0.05, "val_mean": val, "val_best_k": 1 - (1 - val) ** cfg.k,
            "val_worst_k": val**cfg.k, "val_zero_frac": np.full(e, 0.1),
        })
        p_train = np.clip(val[:, None] + rng.normal(0, 0.1, (e, D_TRAIN)), 0, 1)
        p_val = np.clip(val[:, None] + rng.normal(0, 0.1, (e, D_VAL)), 0, 1)
        pass1 = tidy_pass1(cfg.run_id, compute, {"train": p_train, "val": p_val})
        return RunOutput(table=table, pass1=pass1, status=status, info=info)


class SlowSim(SimAdapter):
    """The real simulator, each run delayed by FAKE_SLEEP seconds (the config, hence run_id, is unchanged)."""

    def run(self, cfg: RunConfig, progress: bool = False) -> RunOutput:
        time.sleep(float(os.environ.get("FAKE_SLEEP", 0.0)))
        return super().run(cfg, progress)


def register(slow_sim: bool = False) -> FakeAdapter:
    adapter = FakeAdapter()
    register_backend("fake", adapter)
    if slow_sim:
        register_backend("sim", SlowSim())
    return adapter
