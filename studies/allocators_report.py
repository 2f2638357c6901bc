"""docs/ALLOCATORS.md: rollout allocators vs the envelope of fixed n at iso-compute (issue 13), generated.

`python -m studies.allocators_report [--seeds 4] [--budget 2^18] [--out results/allocators]
[--doc docs/ALLOCATORS.md]` runs the `allocators` study (studies/sweeps.py) per preset through the one
pipeline (build_sweep -> run_sweep -> ResultStore, resumable) and writes the markdown table.

Comparison at a budget C: each run's metric at C, interpolated linearly in log compute between its two
evaluations around C (the table's compute = rollouts actually drawn, discarded ones included). The fixed-n
envelope at C is the fixed n with the best seed-mean there (n* chosen after seeing the data: a bias in favour
of fixed n). Each allocator is compared with that n* seed by seed (same problem_seed = seed, so the pairs
share problems and the initial policy): mean difference +- the paired SE (std of the S differences / sqrt(S)).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from studies.config import RunConfig, parse_count
from studies.sweeps import build_sweep

PRESETS = (("tabular", "easy", "train_mean"), ("interference", "easy", "val_mean"))
"""(model, dataset, metric): tabular's validation problems never move (no shared parameters), so its metric
is the training pass@1; interference generalises, so held-out pass@1."""
N_GRID = (2, 4, 8, 16, 32, 64)
ALLOCATORS = ("knapsack", "knapsack:oracle=1", "dynamic-sampling", "skip-zero-var",
              "schedule:double@0.25,0.5")
BP = 32
BASE_N = 8
CLAIMS = {
    "knapsack": "Knapsack RL (2509.25849): +2-4 points avg, ~2x compute-equivalent vs uniform n",
    "knapsack:oracle=1": "(ours: knapsack with the true pass@1, an upper bound on the estimator)",
    "dynamic-sampling": "DAPO (2503.14476): part of +~6 points AIME ablation; more samples per step",
    "skip-zero-var": "GRESO (2506.02177): up to 2.4x rollout speed-up at equal accuracy",
    "schedule:double@0.25,0.5": "BroRL (2510.01180): larger n once step-scaling plateaus keeps improving",
}


def at_budget(table: pd.DataFrame, metric: str, C: int) -> pd.DataFrame:
    """One row per run: allocator, seed, compute drawn by C (<= C) and the metric at C, linear in log compute
    between the evaluations around C (the last one when the run ends below C)."""
    rows = []
    for rid, g in table.sort_values(["run_id", "compute"]).groupby("run_id", sort=True):
        g = g.loc[g["compute"] > 0]
        x, y = np.log(g["compute"].to_numpy(float)), g[metric].to_numpy(float)
        rows.append({"run_id": rid, "allocator": g["allocator"].iloc[0], "seed": int(g["seed"].iloc[0]),
                     "n": int(g["n"].iloc[0]), "compute": float(min(g["compute"].max(), C)),
                     "value": float(np.interp(math.log(C), x, y))})
    return pd.DataFrame(rows)


def compare(table: pd.DataFrame, metric: str, C: int) -> tuple[str, pd.DataFrame]:
    """(n* label, rows: allocator, mean, diff vs the fixed envelope, paired SE, seeds, compute spent)."""
    pts = at_budget(table, metric, C)
    fixed = pts.loc[pts["allocator"].str.startswith("fixed-n")]
    means = fixed.groupby("allocator")["value"].mean()
    star = str(means.idxmax())
    ref = fixed.loc[fixed["allocator"] == star].set_index("seed")["value"]
    rows = []
    for name, g in pts.groupby("allocator", sort=False):
        v = g.set_index("seed")["value"]
        common = v.index.intersection(ref.index)
        diff = (v.loc[common] - ref.loc[common]).to_numpy()
        se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else float("nan")
        rows.append({"allocator": name, "mean": float(v.mean()), "diff": float(diff.mean()), "se": se,
                     "z": float(diff.mean() / se) if se > 0 else float("nan"), "seeds": int(diff.size),
                     "compute": float(g["compute"].mean())})
    df = pd.DataFrame(rows)
    order = {a: i for i, a in enumerate([f"fixed-n{n}" for n in N_GRID] + list(ALLOCATORS))}
    df = df.sort_values("allocator", key=lambda s: s.map(lambda a: order.get(a, 99)))
    return star, df


def run_preset(model: str, dataset: str, seeds: int, budget: int, out: Path,
               jobs: int | None) -> pd.DataFrame:
    from studies.executors import run_sweep
    from studies.io import load_table
    from studies.store import ResultStore

    base = RunConfig(model=model, dataset=dataset, n=BASE_N, bp=BP, budget=budget)
    cfgs = build_sweep("allocators", base, n=list(N_GRID), allocators=list(ALLOCATORS), seeds=seeds,
                       budget=budget, base_n=BASE_N)
    d = out / f"{model}-{dataset}"
    with ResultStore(d, study="allocators") as store:
        run_sweep(cfgs, store, jobs=jobs, progress=False, desc=f"allocators {model}/{dataset}")
    return load_table(d)


def _fmt(x: float, p: int = 4) -> str:
    return "nan" if not np.isfinite(x) else f"{x:+.{p}f}"


def report(results: dict[tuple[str, str, str], pd.DataFrame], seeds: int, budget: int) -> str:
    lines = [
        "# Rollout allocators at iso-compute (issue 13; generated)",
        "",
        "Generated by `python -m studies.allocators_report --seeds {} --budget 2^{}` (do not edit by hand). "
        "Simulator, bp = {}, fixed n in {{{}}}, allocators at n = {}; compute = rollouts actually drawn "
        "(discarded ones included); values at C interpolated in log compute between evaluations. "
        "diff = allocator minus the best fixed n at that budget (n* picked on the "
        "seed means, which favours fixed n), paired by seed; SE = paired standard error over {} seeds; "
        "z = diff / SE.".format(seeds, int(round(math.log2(budget))), BP, ", ".join(map(str, N_GRID)), BASE_N,
                                seeds),
        "",
        "Allocators (sandbox/allocators.py): knapsack = Knapsack RL value (1 - p^k - (1-p)^k) p (1-p)^2 "
        "maximised over n_i in [2, 4n] with sum n_i = bp n, p from each problem's last group "
        "(prior 0.5 unseen); knapsack:oracle=1 = the same with the true pass@1; dynamic-sampling = DAPO "
        "(drop all-agree groups, refill up to 4 batches); skip-zero-var = GRESO-style skip with p = 0.5 "
        "after one zero-variance group; schedule:double@0.25,0.5 = n 8 -> 16 -> 32 at 25% / 50% of compute.",
        "",
    ]
    for (model, dataset, metric), table in results.items():
        for C in (budget // 4, budget):
            star, df = compare(table, metric, C)
            lines += [f"## {model} / {dataset}, {metric} at C = 2^{int(round(math.log2(C)))} "
                      f"(fixed envelope: {star})", "",
                      "| allocator | mean | diff vs envelope | paired SE | z | compute drawn (<= C) "
                      "| literature |",
                      "|---|---|---|---|---|---|---|"]
            for r in df.itertuples():
                lines.append(f"| {r.allocator} | {r.mean:.4f} | {_fmt(r.diff)} | {r.se:.4f} | "
                             f"{_fmt(r.z, 1)} | {r.compute:.0f} | {CLAIMS.get(r.allocator, '')} |")
            lines.append("")
    lines += _verdict(results, budget)
    return "\n".join(lines) + "\n"


def _verdict(results, budget: int) -> list[str]:
    out = ["## What this shows", ""]
    for (model, dataset, metric), table in results.items():
        for C in (budget // 4, budget):
            _, df = compare(table, metric, C)
            alloc = df.loc[~df["allocator"].str.startswith("fixed-n")]
            best = alloc.sort_values("diff", ascending=False).iloc[0]
            beats = alloc.loc[alloc["z"] > 2, "allocator"].tolist()
            out.append(f"- {model}/{dataset} at C = 2^{int(round(math.log2(C)))}: best allocator "
                       f"{best['allocator']} ({_fmt(best['diff'])} +- {best['se']:.4f} vs the fixed "
                       "envelope); "
                       + (f"> 2 SE above the envelope: {', '.join(beats)}." if beats
                          else "none is > 2 SE above the envelope."))
    out += ["- No allocator here is >= the fixed envelope at both budgets on both presets. Not investigated: "
            "why (e.g. knapsack's estimate is the last group's c / n_i, noisy at n_i = 2, and its oracle "
            "variant shows the rule's own ceiling; in tabular the envelope is n = 2, below the allocators' "
            "base n = 8, so allocators at n = 8 start behind it).",
            "- Only two easy presets and two budgets: the issue's goal (>= envelope at every "
            "budget, > 2 SE at the top on two presets, hard and mix presets, 2^22, the LLM backend) is not "
            "tested here. The literature's gains are on LLMs with their own baselines and are not comparable "
            "numbers; they are listed beside ours only as claims.", ""]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budget", type=parse_count, default=2**18)
    ap.add_argument("--out", type=Path, default=Path("results/allocators"))
    ap.add_argument("--doc", type=Path, default=Path("docs/ALLOCATORS.md"))
    ap.add_argument("--jobs", type=int, default=None)
    a = ap.parse_args(argv)
    results = {}
    for model, dataset, metric in PRESETS:
        results[(model, dataset, metric)] = run_preset(model, dataset, a.seeds, a.budget, a.out, a.jobs)
    text = report(results, a.seeds, a.budget)
    a.doc.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
