"""The real-model n-vs-m study of issue 11, item 5: its grid, run through the studies pipeline.

One in-process sweep (one vLLM engine for every run), ordered so that a study cut short still holds a
complete grid: seed 0 over every n, then the lr variants, then the further seeds. Every run is a RunConfig
of backend llm stored in one ResultStore, so `isocompute fit` / `plot` read it as any sweep.

    python -m studies.llm_study --out results/llm-nvm [--seeds 3] [--budget 512] [--jobs 1]

The grid (sized for this 2-core CPU; docs/llm_study/nvm/README.md says what was cut from the issue's
bp 8, n 2..32, budget >= 2^12, 3 seeds): bp 8, n in {2, 4, 8, 16}, the sqrt lr rule at base lr 3e-5
(reference batch 64), plus base lr x3 at the smallest and largest n.
"""

from __future__ import annotations

import argparse

from studies.config import RunConfig, parse_count
from studies.executors import run_sweep
from studies.store import ResultStore

NS = (2, 4, 8, 16)
BASE_LR = 3e-5
LR_FACTOR = 3.0
SPLITS = "docs/llm_study/nvm/splits"
"""The calibrated easy split the study ran on, frozen beside its results (llm_backend/data grows); relative
to the repository root (run from there), so run ids do not depend on where the checkout lies."""


def study_configs(seeds: int, budget: int, bp: int = 8) -> list[RunConfig]:
    """The study's runs in priority order (see the module docstring)."""
    base = RunConfig(
        backend="llm", dataset="easy", bp=bp, budget=budget, lr=BASE_LR, lr_rule="sqrt", k=4, n_evals=4,
        d_val=33, options={"max_new_tokens": 24, "train_eval": False, "data_dir": str(SPLITS)},
    )
    variants = [(n, BASE_LR * LR_FACTOR) for n in (NS[0], NS[-1])]
    out = []
    for s in range(seeds):
        out += [base.replace(n=n, seed=s) for n in NS]
        out += [base.replace(n=n, lr=lr, seed=s) for n, lr in variants]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", default="512")
    ap.add_argument("--bp", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    cfgs = study_configs(a.seeds, parse_count(a.budget), a.bp)
    summary = run_sweep(cfgs, ResultStore(a.out), jobs=a.jobs, progress=True, desc="llm n-vs-m")
    print(summary)


if __name__ == "__main__":
    main()
