"""Fitting speed of the analysis workflow (target: fit_report on 1,000 runs x 100 evaluation
points in <= 10 s on the 2-core dev machine).

Synthetic table: 10 values of n x 100 seeds, 100 log-spaced evaluation points per run, from known sigmoids
with noise sd 0.005. Times `fit_report` end to end (record-breaking points, 10 per-configuration sigmoid fits,
frontier, n* fit, and the extrapolation check, which refits on the low budgets), best of `--repeat`, for both
ways of combining seeds: "mean" (the default here, seeds share evaluation points) and "pool" (every run's
record-breaking points pooled: ~10x more points per fit, the slow path that users' unaligned logs take).
Baseline measured in the same process: the record-breaking step as a plain per-run Python loop, reported as
a ratio against the vectorised (groupby / cummax) version.

    .venv/bin/python benchmarks/fit_speed.py [--runs 1000] [--points 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from studies.fit.records import record_breaking
from studies.fit.report import fit_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fixture of the fitting tests
from synthetic_curves import synthetic_table  # noqa: E402

BUDGET_S = 10.0


def make_table(runs: int, points: int, n_values: int = 10, seed: int = 0) -> pd.DataFrame:
    ns = [2**k for k in range(1, n_values + 1)]
    seeds = max(1, runs // n_values)
    specs = {
        n: (0.25, 0.5 + 0.25 * (1 - np.exp(-i / 3)), 3e3 * 2.5**i, 1.2 - 0.03 * i) for i, n in enumerate(ns)
    }
    return synthetic_table(
        specs, seeds=seeds, points=points, bp=32, c_max=1e9, noise=0.005, rng=np.random.default_rng(seed)
    )


def records_loop(table: pd.DataFrame, metric: str = "val_mean", bin_width: float = 0.005) -> list:
    """Baseline: the obvious per-run Python loop."""
    keep = []
    for _, g in table.groupby("run_id", sort=False):
        g = g.sort_values("compute", kind="mergesort")
        best = -np.inf
        for i, v in zip(g.index, g[metric].to_numpy(), strict=True):
            if np.isfinite(v):
                k = np.floor(v / bin_width + 1e-9)
                if k > best:
                    keep.append(i)
                    best = k
    return keep


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    table = make_table(args.runs, args.points)
    report = fit_report(table)  # warm-up (imports, scipy first calls)
    t_fit = best_time(lambda: fit_report(table), args.repeat)
    t_pool = best_time(lambda: fit_report(table, aggregate="pool"), args.repeat)
    t_rec = best_time(lambda: record_breaking(table), args.repeat)
    t_loop = best_time(lambda: records_loop(table), 1)
    assert sorted(record_breaking(table).index) == sorted(records_loop(table))
    out = {
        "runs": int(table["run_id"].nunique()),
        "rows": len(table),
        "configs": len(report["curves"]),
        "fit_report_s": round(t_fit, 3),
        "fit_report_pool_s": round(t_pool, 3),
        "budget_s": BUDGET_S,
        "within_budget": max(t_fit, t_pool) <= BUDGET_S,
        "records_vectorised_s": round(t_rec, 4),
        "records_loop_s": round(t_loop, 4),
        "records_speedup": round(t_loop / t_rec, 1),
        "min_curve_r2": min(c["r2"] for c in report["curves"] if c["r2"] is not None),
        "extrapolation_mean_abs_error_steps": report["extrapolation"].get("mean_abs_error_steps"),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"fit_report on {out['runs']} runs x {args.points} points ({out['rows']} rows, {out['configs']} "
            f"configurations): {t_fit:.2f} s seed-mean, {t_pool:.2f} s pooled records "
            f"(budget {BUDGET_S:.0f} s)"
        )
        print(
            f"record-breaking step: vectorised {t_rec * 1e3:.1f} ms vs per-run loop {t_loop * 1e3:.0f} ms "
            f"({out['records_speedup']}x)"
        )
    return 0 if out["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
