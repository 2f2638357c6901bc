"""docs/ALLOCATORS.md: rollout allocators vs the envelope of fixed n at iso-compute, generated.

`isocompute report allocators [--seeds 8] [--budget 2^22] [--out results/allocators-v2]
[--doc docs/ALLOCATORS.md] [--fig docs/figs/allocators.png] [--presets tabular/easy,...]` runs the
`allocators` study (studies/sweeps.py) per preset through the one pipeline (build_sweep -> run_sweep ->
ResultStore, resumable), writes the markdown report and the figure (each allocator's curve against the
envelope of the fixed-n curves, per preset).

Comparison at a budget C: each run's metric at C, interpolated linearly in log compute between its two
evaluations around C (the table's compute = rollouts actually drawn, discarded ones included). The fixed-n
envelope at C is the fixed n with the best seed-mean there (n* chosen after seeing the data: a bias in favour
of fixed n). Each allocator is compared with that n* seed by seed (same problem_seed = seed, so the pairs
share problems and the initial policy): mean difference +- the paired SE (std of the S differences / sqrt(S)).

Multiplicity (`marks`): a cell is flagged only when its paired two-sided t-test (S - 1 degrees of freedom)
survives Holm's (1979) step-down correction over every tested cell of its table at family-wise level FWER
(isocompute.reports.claims.selection.holm), and never when the difference reads as zero at the printed
precision: ** above, -- below.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import click
import numpy as np
import pandas as pd

from studies.cli import COUNT, FIGURE_SUFFIXES, OutPath
from studies.config import RunConfig, StudiesError
from studies.files import check_output_dir, check_output_file
from studies.sweeps import build_sweep

PRESETS = (("tabular", "easy", "train_mean"), ("tabular", "hard", "train_mean"),
           ("interference", "easy", "val_mean"), ("interference", "hard", "val_mean"),
           ("tabular", "dual", "train_mean"), ("interference", "dual", "val_mean"),
           ("interference", "tri", "val_mean"))
"""(model, dataset, metric): tabular's validation problems never move (no shared parameters), so its metric
is the training pass@1; interference generalises, so held-out pass@1. `dual` and `tri` are the mix presets
(half hard and half easy problems; half hard, a quarter easy, a quarter very easy: sandbox/problems.py MIXES);
`--presets` takes any model/dataset of sandbox/config.py."""
N_GRID = (2, 4, 8, 16, 32, 64, 128, 256)
FWER = 0.05
"""Family-wise error rate of each table's flags (Holm over the table's cells)."""
DIGITS = 4
"""Decimals of a printed difference: one that rounds to zero there is never flagged."""
ALLOCATORS = ("knapsack", "knapsack:oracle=1", "variance", "variance:oracle=1", "gvm", "ada",
              "dynamic-sampling", "skip-zero-var", "schedule:double@0.25,0.5", "schedule:zv@0.5")
BP = 32
BASE_N = 8
CLAIMS = {
    "knapsack": "Knapsack RL (2509.25849): +2-4 points avg, ~2x compute-equivalent vs uniform n",
    "knapsack:oracle=1": "(ours: knapsack with the true pass@1, an upper bound on the estimator)",
    "dynamic-sampling": "DAPO (2503.14476): part of +~6 points AIME ablation; more samples per step",
    "skip-zero-var": "GRESO (2506.02177): up to 2.4x rollout speed-up at equal accuracy",
    "schedule:double@0.25,0.5": "BroRL (2510.01180): larger n once step-scaling plateaus keeps improving",
    "variance": ("VIP (2602.01601): better than uniform n on every benchmark; up to +12.3 pass@32 "
                 "on AIME24/25"),
    "variance:oracle=1": "(ours: VIP's rule with the true pass@1)",
    "gvm": "GVM-RAFT (2505.02391): 2-4x speed-up over vanilla RAFT, higher accuracy; similar gains in GRPO",
    "ada": ("Reinforce-Ada (2510.04996): faster convergence and higher final accuracy than GRPO "
            "at equal budget"),
    "schedule:zv@0.5": "(ours: n doubles when the zero-variance share of a window of 8 steps exceeds 0.5)",
}


def claim_of(a: str) -> str:
    """The literature's claim for an allocator spec; a schedule with other fractions is still BroRL's."""
    if a in CLAIMS:
        return CLAIMS[a]
    return CLAIMS["schedule:double@0.25,0.5"] if a.startswith("schedule:double@") else ""


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


def budgets(top: int, lo: int = 2**12) -> list[int]:
    """The report's budgets: powers of 4 below the top budget down to lo, and the top."""
    out, C = [], top
    while C >= lo:
        out.append(C)
        C //= 4
    return out[::-1]


def log2(C: float) -> str:
    return f"2^{int(round(math.log2(C)))}"


def curves(table: pd.DataFrame, metric: str, grid: list[float]) -> pd.DataFrame:
    """Per allocator and C of grid: seed mean, the envelope's n* (best fixed seed mean at C), the paired diff
    against it and its SE (rows: allocator, C, mean, star, diff, se)."""
    rows = []
    for C in grid:
        star, df = compare(table, metric, int(C))
        for r in df.itertuples():
            rows.append({"allocator": r.allocator, "C": C, "mean": r.mean, "star": star, "diff": r.diff,
                         "se": r.se})
    return pd.DataFrame(rows)


def figure(results: dict, path: Path, top: int, seeds: int) -> None:
    """Each allocator's seed-mean curve against the envelope of the fixed-n curves (top row), and its paired
    difference from the envelope with a 2 SE band (bottom row), one column per preset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    grid = [2.0 ** e for e in np.arange(12, math.log2(top) + 1e-9, 0.5)]
    allocs = list(ALLOCATORS)
    colors = dict(zip(allocs, sns.color_palette("tab10", len(allocs)), strict=True))
    style = dict(sns.axes_style("whitegrid"))
    style.update({"axes.spines.top": False, "axes.spines.right": False, "font.size": 10})
    ncol = len(results)
    with plt.rc_context(style):
        fig, axes = plt.subplots(2, ncol, figsize=(3.0 * ncol + 2.2, 6.6), sharex=True, squeeze=False)
        for j, ((model, dataset, metric), table) in enumerate(results.items()):
            cv = curves(table, metric, grid)
            top_ax, bot = axes[0, j], axes[1, j]
            fixed = cv.loc[cv["allocator"].str.startswith("fixed-n")]
            for _, g in fixed.groupby("allocator"):
                top_ax.plot(g["C"], g["mean"], color="0.75", lw=0.8, zorder=1)
            env = fixed.groupby("C")["mean"].max()
            top_ax.plot(env.index, env.values, color="black", lw=2.2, label="fixed-n envelope", zorder=3)
            bot.axhline(0.0, color="black", lw=1.5)
            for a in allocs:
                g = cv.loc[cv["allocator"] == a]
                if g.empty:
                    continue
                top_ax.plot(g["C"], g["mean"], color=colors[a], lw=1.3, label=a, zorder=2)
                bot.plot(g["C"], g["diff"], color=colors[a], lw=1.3)
                bot.fill_between(g["C"], g["diff"] - 2 * g["se"], g["diff"] + 2 * g["se"], color=colors[a],
                                 alpha=0.07, lw=0)
            top_ax.set_title(f"{model} / {dataset} ({metric})")
            top_ax.set_ylabel("metric at C (seed mean)" if j == 0 else "")
            bot.set_ylabel("allocator - envelope (paired, +- 2 SE)" if j == 0 else "")
            lo = cv.loc[~cv["allocator"].str.startswith("fixed-n"), "diff"]
            bot.set_ylim(max(float(lo.min()) - 0.01, -0.25), max(float(lo.max()) + 0.01, 0.03))
            for ax in (top_ax, bot):
                ax.set_xscale("log", base=2)
            bot.set_xlabel("compute C (rollouts)")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        fig.suptitle(f"Rollout allocators (base n = {BASE_N}) vs the envelope of fixed n "
                     "(grey: fixed-n curves), "
                     f"{seeds} seeds")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight")
        fig.savefig(path.with_suffix(".pdf"), bbox_inches="tight")
        plt.close(fig)


def marks(cells: dict, fwer: float = FWER) -> dict:
    """{key: "above", "below" or ""} for a family of cells {key: (diff, se, seeds)}: the paired two-sided
    t-test of each (selection.t_pvalue), Holm-adjusted over the cells with a p-value (selection.holm); a cell
    is flagged when its adjusted p <= fwer and its difference does not read as zero at DIGITS decimals."""
    from isocompute.reports.claims.selection import holm, t_pvalue

    keys = list(cells)
    ps = [t_pvalue(d, se, int(k)) for d, se, k in (cells[key] for key in keys)]
    adj = holm(ps) if keys else []
    out = {}
    for key, pa in zip(keys, adj, strict=True):
        d = float(cells[key][0])
        zero = not np.isfinite(d) or round(d, DIGITS) == 0
        out[key] = "" if zero or not (pa <= fwer) else ("above" if d > 0 else "below")
    return out


FLAG = {"above": " **", "below": " --", "": ""}


def _cell(diff: float, se: float, mark: str = "") -> str:
    """A difference +- its paired SE and its flag (`marks`)."""
    return f"{_fmt(diff, DIGITS)} +- {se:.4f}{FLAG[mark]}" if np.isfinite(se) else _fmt(diff, DIGITS)


def table_marks(comps: dict, Cs) -> dict:
    """`marks` of a preset's table: every (allocator, C) cell with a test, one family."""
    cells = {(a, C): (r["diff"], r["se"], r["seeds"]) for C in Cs
             for a, r in comps[C][1].set_index("allocator").iterrows()}
    return marks(cells)


def _own_gain(table: pd.DataFrame, pts: pd.DataFrame, ref: pd.Series, a: str
              ) -> tuple[float, float, float, float, int]:
    """Allocator a against its base fixed n (ref: value by seed), paired: (mean diff, paired SE, mean steps
    per run, mean zero_var_frac over its evaluation rows, seeds)."""
    v = pts.loc[pts["allocator"] == a].set_index("seed")["value"]
    common = v.index.intersection(ref.index)
    dd = (v.loc[common] - ref.loc[common]).to_numpy()
    se = float(dd.std(ddof=1) / math.sqrt(dd.size)) if dd.size > 1 else float("nan")
    runs = table.loc[table["allocator"] == a]
    steps = float(runs.groupby("run_id")["m"].max().mean())
    zv = float(runs.loc[runs["compute"] > 0, "zero_var_frac"].mean())
    return float(dd.mean()), se, steps, zv, int(dd.size)


def report(results: dict[tuple[str, str, str], pd.DataFrame], seeds: int, budget: int,
           fig: str | None = None, llm: list[str] | None = None) -> str:
    Cs = budgets(budget)
    lines = [
        "# Rollout allocators at iso-compute (generated)",
        "",
        f"Generated by `isocompute report allocators --seeds {seeds} --budget {log2(budget)}` (do not "
        "edit by hand; the runs are resumable in --out, a rerun only regenerates). "
        f"Simulator, bp = {BP}, fixed n in {{{', '.join(map(str, N_GRID))}}}, allocators at base n = "
        f"{BASE_N}; compute = rollouts actually drawn (oversampled and discarded ones included); values at C "
        "interpolated in log compute between evaluations. diff = allocator minus the fixed-n envelope at "
        "that "
        "budget (the best fixed n on the seed means, n* picked after seeing the data, which favours fixed "
        f"n), paired by seed (same problems and initial policy); +- = paired standard error over {seeds} "
        f"seeds; ** / -- = above / below at family-wise level {FWER:g}: a two-sided paired t-test per cell, "
        "Holm-adjusted over every cell of its table, and no flag on a difference that reads 0.0000.",
        "",
        "Allocators (sandbox/allocators.py, each rule tested on hand-computed cases in "
        "tests/sandbox/test_sim_allocators.py): knapsack = Knapsack RL value (1 - p^k - (1-p)^k) p (1-p)^2 "
        "maximised over n_i in [2, 4n], sum n_i = bp n; variance = VIP, n_i in [4, 32] minimising "
        "sum p_i (1 - p_i) / n_i; gvm = GVM-RAFT, n_i ~ G_i / sqrt(p_i + 0.001 / p_i) in [2, 4n]; these "
        "three "
        "predict p_i from each problem's last group (prior 0.5 unseen), `:oracle=1` = the true pass@1; ada = "
        "Reinforce-Ada, rounds of n rollouts until the prompt has a correct and a wrong answer, at most 4, "
        "training on all of them; dynamic-sampling = DAPO (drop all-agree groups, refill, at most 4 "
        "batches); skip-zero-var = GRESO-style skip with p = 0.5 after one zero-variance group; "
        "schedule:double@0.25,0.5 = n 8 -> 16 -> 32 at 25% / 50% of compute; schedule:zv@0.5 (ours) = n "
        "doubles whenever more than half of the groups of the last 8 steps had zero variance (up to 32n). "
        "Where a paper's rule needs machinery the simulator lacks (VIP's Gaussian process, GVM's "
        "pre-sampling and backward passes for G_i, Reinforce-Ada's down-sampling to balanced groups) the "
        "choices made are listed in the module docstring of sandbox/allocators.py; the estimate of p_i "
        "is free here, which favours the per-problem allocators over their LLM versions.",
        "",
    ]
    if fig:
        lines += [f"![allocators vs the fixed-n envelope]({fig})", ""]
    summary, own, flags = {}, {}, {}
    for (model, dataset, metric), table in results.items():
        comps = {C: compare(table, metric, C) for C in Cs}
        mk = table_marks(comps, Cs)
        stars = " / ".join(f"{log2(C)}: {comps[C][0].removeprefix('fixed-')}" for C in Cs)
        env = {C: float(comps[C][1].set_index("allocator").loc[comps[C][0], "mean"]) for C in Cs}
        peak = max(env, key=env.get)
        if peak != Cs[-1]:
            stars += (f". The envelope peaks at {log2(peak)} ({env[peak]:.4f}) and falls to "
                      f"{env[Cs[-1]]:.4f} at {log2(Cs[-1])} (the metric at C, not best-so-far: curves "
                      "decline at this preset's lr)")
        lines += [f"## {model} / {dataset} ({metric})", "",
                  f"Envelope n* by budget: {stars}. Cells: diff vs the envelope +- paired SE.", "",
                  "| allocator | " + " | ".join(f"C = {log2(C)}" for C in Cs) + " | literature's claim |",
                  "|---|" + "---|" * len(Cs) + "---|"]
        names = list(comps[Cs[-1]][1]["allocator"])
        for a in names:
            cells = []
            for C in Cs:
                r = comps[C][1].set_index("allocator").loc[a]
                cells.append(_cell(r["diff"], r["se"], mk.get((a, C), "")))
            lines.append(f"| {a} | " + " | ".join(cells) + f" | {claim_of(a)} |")
        lines.append("")
        # decomposition at the top budget: the allocator's own gain over its base n, and the base n's gap
        top = comps[Cs[-1]][1].set_index("allocator")
        base = f"fixed-n{BASE_N}"
        pts = at_budget(table, metric, Cs[-1])
        ref = pts.loc[pts["allocator"] == base].set_index("seed")["value"]
        gains = {a: _own_gain(table, pts, ref, a) for a in names if not a.startswith("fixed-n")}
        own_mk = marks({a: (g[0], g[1], g[4]) for a, g in gains.items()})
        lines += [f"At C = {log2(Cs[-1])}: diff vs the envelope = (allocator - fixed n = {BASE_N}) + "
                  f"(fixed n = {BASE_N} - envelope); the second term is "
                  f"{_fmt(top.loc[base, 'diff'], 3)} here. Flags of the own-gain column: Holm over that "
                  "column; of the envelope column: those of the table above.",
                  "", f"| allocator | vs fixed n = {BASE_N} (its own gain) | vs envelope | steps taken "
                  "| zero_var_frac (mean over evaluation rows) |", "|---|---|---|---|---|"]
        for a, (d, se, steps, zv, _) in gains.items():
            own.setdefault(f"{model}/{dataset}", {})[a] = (d, se, own_mk[a])
            lines.append(f"| {a} | {_cell(d, se, own_mk[a])} | "
                         f"{_cell(top.loc[a, 'diff'], top.loc[a, 'se'], mk.get((a, Cs[-1]), ''))}"
                         f" | {steps:.0f} | {zv:.2f} |")
        fx = table.loc[table["allocator"] == base]
        env_base = _cell(top.loc[base, "diff"], top.loc[base, "se"], mk.get((base, Cs[-1]), ""))
        lines += [f"| ({base}) | 0 | {env_base} | {fx.groupby('run_id')['m'].max().mean():.0f} | "
                  f"{fx.loc[fx['compute'] > 0, 'zero_var_frac'].mean():.2f} |", ""]
        summary[(model, dataset)] = comps
        flags[(model, dataset)] = mk
    lines += _verdict(summary, flags, Cs)
    lines += _why(summary, own, flags, Cs)
    lines += _reading(summary, own, flags, Cs)
    lines += [""] + (llm or [])
    return "\n".join(lines) + "\n"


LLM_CODE = (
    "`isocompute sweep allocators --backend llm` runs `fixed`, `knapsack`, `dynamic-sampling`, `skip-"
    "zero-var` and `schedule:double@F...` (llm_backend/allocators.py: the simulator's spec strings, "
    "defaults and rules in pure Python, held equal to sandbox/allocators.py by "
    "tests/test_allocator_parity.py); `variance`, `gvm`, `ada`, `schedule:zv@T` and "
    "`knapsack:oracle=1` are refused in one line (exit code 2). p_i is each problem's last observed "
    "group success rate, as in the simulator. Every generated rollout and token counts (`compute`, "
    "`tokens`), DAPO's discarded groups too; a step runs only if its first draw fits in the budget "
    "(refills likewise), so a run never exceeds it; evaluations follow the first step whose compute "
    "reaches each point of the fixed run's schedule, plus the last step. Unequal groups (knapsack) "
    "keep the TRL / verl loss normalisation: token_mean over all completion tokens of the batch, "
    "seq_mean over all sequences; each group's advantage uses its own mean and std. `fixed` is the "
    "previous code path, bit for bit (tests/llm_backend/test_llm_allocators.py).")


def _same_as_base(table: pd.DataFrame, results: Path, allocs: list[str], base: int, metric: str) -> list[str]:
    """Allocators whose every evaluation equals the base fixed n's on every seed, and why that can happen:
    a history-based rule (knapsack, skip-zero-var) with no problem seen twice in a run allocates uniformly."""
    from studies.store import finished_records

    ref = table.loc[table["allocator"] == f"fixed-n{base}"].set_index(["seed", "compute"])[metric]
    same = []
    for a in allocs:
        v = table.loc[table["allocator"] == a].set_index(["seed", "compute"])[metric]
        common = v.index.intersection(ref.index)
        if len(common) == len(v) and len(v) and bool((v.loc[common] == ref.loc[common]).all()):
            same.append(a)
    if not same:
        return []
    recs = finished_records(Path(results))
    cfg = next(r["config"] for r in recs.values() if r["config"].get("allocator") == same[0])
    steps = int(table.loc[table["allocator"] == same[0]].groupby("run_id")["m"].max().max())
    split = Path((cfg.get("options") or {}).get("data_dir") or "") / f"{cfg['dataset']}.train.jsonl"
    size = sum(1 for _ in split.open()) if split.is_file() else None
    draws = steps * int(cfg["bp"])
    out = f"{', '.join(same)}: every evaluation equals fixed-n{base}'s on every seed, bit for bit. A run " \
          f"takes {steps} steps x bp {int(cfg['bp'])} = {draws} problem draws from a training split of " \
          f"{size if size is not None else '?'} problems ({split})"
    if size is not None and draws <= size:
        out += (", drawn without repeats within an epoch, so no problem has a history when it is drawn: "
                "every p_i is the prior and the rule allocates n uniformly. At this size the LLM comparison "
                "says nothing about these allocators; it needs runs long enough to revisit problems (an "
                "epoch or more) or a p_i prior from the base model's calibration.")
    else:
        out += "."
    return ["", out]


def llm_section(results: Path, metric: str = "val_mean") -> list[str]:
    """The LLM comparison: the allocator runs of `results` (a real-LLM study store, e.g. results/llm-nvm)
    against its fixed-n runs at the study's base lr (isocompute/reports/llm_study.py BASE_LR; its
    lr-bracket runs are left out), paired by seed, at each evaluation budget of the fixed runs."""
    from isocompute.reports.llm_study import BASE_LR, runs_table

    table = runs_table(str(results))
    table = table.loc[np.isclose(table["lr_base"], BASE_LR)]
    fixed = table.loc[table["allocator"].str.startswith("fixed-n")]
    allocs = sorted(set(table["allocator"]) - set(fixed["allocator"]))
    lines = ["## On the LLM backend", "", LLM_CODE, ""]
    if not allocs:
        return lines + [f"No allocator runs in {results} yet.", ""]
    first = table.iloc[0]
    top = int(fixed.groupby("run_id")["compute"].max().min())
    seeds = sorted(set(table.loc[table["allocator"].isin(allocs), "seed"]))
    base = int(table.loc[table["allocator"].isin(allocs), "n"].iloc[0])
    own_evals = fixed.loc[fixed["allocator"] == f"fixed-n{base}", "compute"]
    Cs = sorted(c for c in set(own_evals) if c > 0 and top / 4 <= c <= top)
    lines += [
        f"Runs: `{results}` (the real-LLM n-vs-m study's store, docs/llm_study/nvm; {first['model']}, "
        f"dataset {first['dataset']}, bp = {int(first['bp'])}, base lr {BASE_LR:g} with the sqrt rule, "
        f"seeds {', '.join(map(str, seeds))}); allocators at base n = {base}, fixed n = "
        f"{', '.join(str(n) for n in sorted(set(fixed['n'])))} (the study's base-lr runs); metric {metric} "
        "(held-out avg@k). Cells: allocator minus the fixed-n envelope at C, paired by seed, +- paired SE; "
        f"** / -- = above / below at family-wise level {FWER:g} (paired t-tests, Holm over every cell of "
        "this table).", "",
        "| allocator | " + " | ".join(f"C = {int(C)}" for C in Cs) + " | vs fixed n = "
        f"{base} at C = {top} | steps | zero_var_frac | literature's claim |",
        "|---|" + "---|" * len(Cs) + "---|---|---|---|"]
    comps = {C: compare(table, metric, int(C)) for C in Cs}
    pts = at_budget(table, metric, top)
    ref = pts.loc[pts["allocator"] == f"fixed-n{base}"].set_index("seed")["value"]
    names = list(comps[Cs[-1]][1]["allocator"])
    gains = {a: _own_gain(table, pts, ref, a) for a in names}
    cells = {(a, C): (r["diff"], r["se"], r["seeds"]) for C in Cs
             for a, r in comps[C][1].set_index("allocator").iterrows()}
    cells |= {(a, "own"): (g[0], g[1], g[4]) for a, g in gains.items() if a != f"fixed-n{base}"}
    mk = marks(cells)
    for a in names:
        row = [_cell(*comps[C][1].set_index("allocator").loc[a, ["diff", "se"]], mk.get((a, C), ""))
               for C in Cs]
        d, se, steps, zv, _ = gains[a]
        lines.append(f"| {a} | " + " | ".join(row) + f" | {_cell(d, se, mk.get((a, 'own'), ''))} | "
                     f"{steps:.1f} | {zv:.2f} | {claim_of(a)} |")
    above = [f"{a} at C = {int(C)}" for C in Cs for a in names if a in allocs and mk.get((a, C)) == "above"]
    lines += ["", "Cells flagged above the envelope: " + (", ".join(above) or "none") + "."]
    lines += _same_as_base(table, results, allocs, base, metric)
    means = {a: float(r["mean"]) for a, r in comps[Cs[-1]][1].set_index("allocator").iterrows()}
    star = comps[Cs[-1]][0]
    lines += ["", "Envelope n* by budget: " + " / ".join(f"{int(C)}: {comps[C][0].removeprefix('fixed-')}"
                                                        for C in Cs)
              + f". Seed means at C = {top}: " + ", ".join(f"{a} {m:.3f}" for a, m in means.items())
              + f". With {len(seeds)} seeds a paired SE is of the order of the seed noise of one run "
              f"(fixed-n{base}'s own spread), so only a flagged difference is read as one; the envelope "
              f"({star}) is picked on the same seed means (winner's curse against every allocator).", ""]
    return lines


def _reading(summary: dict, own: dict, flags: dict, Cs: list[int]) -> list[str]:
    """Every (preset, budget, allocator) cell flagged above the envelope, then a reading of the mechanisms
    with the numbers it rests on (read from the tables; the mechanisms themselves are not tested
    separately)."""
    def diff(key, a, C=None):
        C = Cs[-1] if C is None else C
        d = summary[key][C][1].set_index("allocator")
        return ((float(d.loc[a, "diff"]), float(d.loc[a, "se"]), flags[key].get((a, C), ""))
                if a in d.index else (float("nan"), float("nan"), ""))

    def og(key, a):
        return own.get(key, {}).get(a, (float("nan"), float("nan"), ""))

    keys = {f"{m}/{ds}": (m, ds) for m, ds in summary}
    above = []
    for key, k in keys.items():
        for C in Cs:
            d = summary[k][C][1]
            for r in d.loc[~d["allocator"].str.startswith("fixed-n")].itertuples():
                if flags[k].get((r.allocator, C)) == "above":
                    above.append(f"{r.allocator} on {key} at {log2(C)} ({_cell(r.diff, r.se, 'above')})")
    out = ["## Reading", "",
           "Cells flagged above the envelope (Holm within each preset's table): "
           + ("; ".join(above) if above else "none") + ".", ""]
    base = f"fixed-n{BASE_N}"
    top = log2(Cs[-1])
    gaps = ", ".join(f"{key} {_fmt(diff(k, base)[0], 3)}" for key, k in keys.items())
    out.append(f"- Base n. Every allocator here starts from n = {BASE_N} and bp = {BP}; the per-problem ones "
               "(knapsack, variance, gvm, skip-zero-var) keep each step at bp n rollouts and only move them "
               "between problems, so they cannot change the n-vs-m trade-off the envelope optimises. The "
               f"base n's own gap to the envelope at {top} ({gaps}) is the part of their shortfall that no "
               "within-step rule can close.")
    wins = [w for w in keys if w.startswith("tabular/") and diff(keys[w], "knapsack")[2] == "above"]
    for w in wins:
        k = keys[w]
        worst = min(Cs, key=lambda C, k=k: diff(k, "knapsack", C)[0])
        lead = (f"- Knapsack on {w}" + (" is the one large win" if len(wins) == 1 else
                                         f" (one of its {len(wins)} large wins, all on tabular presets)"))
        out.append(f"{lead}: {_cell(*diff(k, 'knapsack'))} above "
                   f"the envelope at {top}, yet {_cell(*diff(k, 'knapsack', worst))} at {log2(worst)}. "
                   "Rollouts with no value elsewhere go to the lowest-p problems (up to 4n each), and for "
                   "independent hard problems a large group on an unsolved problem is what finds its first "
                   "success. Its oracle variant "
                   + (f"({_cell(*diff(k, 'knapsack:oracle=1'))}) does no better: the estimator's p = 0 "
                      "after a failed group and its prior 0.5 for unseen problems steer rollouts to "
                      "unexplored ones."
                      if diff(k, "knapsack:oracle=1")[0] <= diff(k, "knapsack")[0] else
                      f"({_cell(*diff(k, 'knapsack:oracle=1'))}) does better: the true p helps here."))
    inter = [key for key in keys if key.startswith("interference/")]
    if inter:
        parts = [f"{key}: knapsack {_fmt(og(key, 'knapsack')[0], 3)} vs oracle "
                 f"{_fmt(og(key, 'knapsack:oracle=1')[0], 3)}, variance {_fmt(og(key, 'variance')[0], 3)} "
                 f"vs oracle {_fmt(og(key, 'variance:oracle=1')[0], 3)}" for key in inter]
        out.append("- Estimator vs rule (own gain over n = 8 at the top budget): " + "; ".join(parts)
                   + ". The rules gain little even with the true p, and less with the last group's c / n_i, "
                   "which is 0 or 1 for the many zero-variance groups (zero_var_frac column).")
    if "tabular/hard" in keys:
        parts = ", ".join(f"{key} {_cell(*diff(k, 'schedule:zv@0.5'))}" for key, k in keys.items())
        out.append(f"- schedule:zv@0.5 (ours), top-budget diff: {parts}. On hard problems the zero-variance "
                   "share exceeds 0.5 from the first window, so n climbs to 32n within ~40 steps (see the "
                   "steps column of tabular/hard); where small n wins (tabular) that is ruinous. "
                   "A zero-variance share says signal is scarce, not that larger groups beat more steps.")
    dyn = ", ".join(f"{key} {_cell(*diff(k, 'dynamic-sampling'))}" for key, k in keys.items())
    out.append("- dynamic-sampling (DAPO) and ada (Reinforce-Ada) spend up to 4 batches per step and take "
               "fewer steps (steps column). dynamic-sampling holds most of the cells above the envelope, at "
               f"small and middle budgets on interference, and falls back at the top: {top}: {dyn}.")
    out.append("- The envelope is the best of 8 fixed n chosen on the same seed means it is compared with "
               "(a winner's-curse bias against every allocator of about the seed noise, 0.005-0.02 on "
               "interference), and the literature's gains are measured against one uniform n, usually the "
               "one the allocator starts from: in that comparison (column 'own gain') several allocators "
               "gain here too.")
    out.append("")
    return out


def _why(summary: dict, own: dict, flags: dict, Cs: list[int]) -> list[str]:
    """Where the shortfall comes from at the top budget, from the decomposition tables: the base n's gap to
    the envelope vs the best allocator's own gain over its base n, per preset; and each allocator's own gain
    averaged over the presets."""
    base = f"fixed-n{BASE_N}"
    out = [f"## Why they miss (top budget C = {log2(Cs[-1])}, from the tables above)", "",
           f"| preset | envelope n* | fixed n = {BASE_N} - envelope | best own gain over n = {BASE_N} "
           "| best allocator - envelope |", "|---|---|---|---|---|"]
    for (model, dataset), comps in summary.items():
        key = f"{model}/{dataset}"
        star, df = comps[Cs[-1]]
        d = df.set_index("allocator")
        gains = own.get(key, {})
        nan = float("nan")
        best_own = max(gains.items(), key=lambda kv: kv[1][0]) if gains else ("-", (nan, nan, ""))
        alloc = d.loc[[a for a in d.index if not a.startswith("fixed-n")]]
        best = alloc["diff"].idxmax()
        mk = flags[(model, dataset)]
        out.append(f"| {key} | {star.removeprefix('fixed-')} "
                   f"| {_cell(d.loc[base, 'diff'], d.loc[base, 'se'], mk.get((base, Cs[-1]), ''))} "
                   f"| {best_own[0]} {_cell(*best_own[1])} "
                   f"| {best} {_cell(d.loc[best, 'diff'], d.loc[best, 'se'], mk.get((best, Cs[-1]), ''))} |")
    out += ["", f"Each allocator's own gain over fixed n = {BASE_N} at the top budget, mean over presets "
            "(and the number of presets where it is flagged above / below n = 8, Holm within each preset's "
            "own-gain column):", "",
            "| allocator | mean own gain | flagged above | flagged below |", "|---|---|---|---|"]
    for a in ALLOCATORS:
        vals = [g[a] for g in own.values() if a in g]
        if not vals:
            continue
        up = sum(1 for *_, f in vals if f == "above")
        down = sum(1 for *_, f in vals if f == "below")
        out.append(f"| {a} | {_fmt(float(np.mean([v[0] for v in vals])), 3)} | {up} | {down} |")
    out.append("")
    return out


def _verdict(summary: dict, flags: dict, Cs: list[int]) -> list[str]:
    """The goal, checked from the numbers: never flagged below the envelope at any budget and flagged above
    it at the top budget on at least two presets; per allocator, by how much it misses."""
    out = ["## The goal, checked", "",
           "Goal: an allocator never flagged below the fixed-n envelope at any budget and flagged above it "
           "at the top budget on at least two presets (flags: Holm within each preset's table). Per "
           "allocator: presets where it is never flagged below, presets where it is flagged above at the top "
           "budget, its worst shortfall (diff at the budget where it is lowest) and its top-budget diff per "
           "preset.",
           "",
           "| allocator | never flagged below | flagged above at top | worst shortfall "
           "| top-budget diff by preset |",
           "|---|---|---|---|---|"]
    names = list(ALLOCATORS)
    met = []
    for a in names:
        never_below, above, worst, tops = [], [], (0.0, "", 0), []
        for (model, dataset), comps in summary.items():
            key = f"{model}/{dataset}"
            rs = {C: comps[C][1].set_index("allocator").loc[a] for C in Cs
                  if a in set(comps[C][1]["allocator"])}
            if not rs:
                continue
            mk = flags[(model, dataset)]
            if all(mk.get((a, C)) != "below" for C in rs):
                never_below.append(key)
            r_top = rs[Cs[-1]]
            if mk.get((a, Cs[-1])) == "above":
                above.append(key)
            for C, r in rs.items():
                if r["diff"] < worst[0]:
                    worst = (float(r["diff"]), key, C)
            tops.append(f"{key} {_fmt(r_top['diff'], 3)}")
        if len(above) >= 2 and len(set(above) & set(never_below)) >= 2:
            met.append(a)
        w = f"{_fmt(worst[0], 3)} ({worst[1]}, {log2(worst[2])})" if worst[1] else "none"
        out.append(f"| {a} | {', '.join(never_below) or 'none'} | {', '.join(above) or 'none'} | {w} | "
                   f"{'; '.join(tops)} |")
    out += ["", ("Met by: " + ", ".join(met) + ".") if met else
            "Met by no allocator: none is never flagged below the envelope and flagged above it at the top "
            "on two presets.",
            ""]
    return out


def parse_presets(text: str) -> tuple[tuple[str, str, str], ...]:
    """`--presets tabular/easy,interference/hard` as (model, dataset, metric) rows: tabular's metric is the
    training pass@1, every other model's held-out pass@1 (PRESETS)."""
    rows = []
    for word in text.split(","):
        model, slash, dataset = word.strip().partition("/")
        if not (model and slash and dataset) or "/" in dataset:
            raise StudiesError(f"--presets: {word.strip()!r} is not MODEL/DATASET (e.g. tabular/easy)")
        rows.append((model, dataset, "train_mean" if model == "tabular" else "val_mean"))
    return tuple(rows)


def write_report(presets, seeds: int, budget: int, out: Path, doc: Path, fig: Path, jobs: int | None,
                 llm: Path) -> tuple[str, float]:
    """Run (or reuse) the allocators study of every preset into `out`, draw `fig` and write `doc`; returns the
    report's text and the seconds it took. The LLM section is added when `llm` holds a study's runs."""
    t0 = time.perf_counter()
    results = {}
    for model, dataset, metric in presets:
        results[(model, dataset, metric)] = run_preset(model, dataset, seeds, budget, out, jobs)
    seconds = time.perf_counter() - t0
    figure(results, fig, budget, seeds)
    rel = Path("figs") / fig.name if doc.parent.name == "docs" else fig
    llm_lines = llm_section(llm) if (llm / "runs").is_dir() else None
    text = report(results, seeds, budget, fig=str(rel), llm=llm_lines)
    doc.write_text(text)
    return text, seconds


@click.command("allocators")
@click.option("--seeds", type=click.IntRange(1), default=8, show_default=True,
              help="Seeds per configuration.")
@click.option("--budget", type=COUNT, default=2**22, show_default="2^22",
              help="Top budget in rollouts, e.g. 4e6 or 2^22.")
@click.option("--out", type=OutPath(file_okay=False, path_type=Path), default=Path("results/allocators-v2"),
              show_default=True, help="Results directory of the runs (resumable).")
@click.option("--doc", type=OutPath(dir_okay=False, path_type=Path), default=Path("docs/ALLOCATORS.md"),
              show_default=True, help="Markdown report to write.")
@click.option("--fig", type=OutPath(dir_okay=False, path_type=Path), default=Path("docs/figs/allocators.png"),
              show_default=True, help="Figure to write.")
@click.option("--presets", default=None, metavar="LIST",
              help="Comma list of MODEL/DATASET, e.g. tabular/easy,interference/hard (default: every preset "
              "of the report).")
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Worker processes (default: all cores).")
@click.option("--llm", type=click.Path(file_okay=False, path_type=Path), default=Path("results/llm-nvm"),
              show_default=True,
              help="Real-LLM store with allocator runs for the LLM section (skipped if absent).")
def allocators(seeds: int, budget: int, out: Path, doc: Path, fig: Path, presets: str | None,
               jobs: int | None, llm: Path) -> None:
    """Run the allocators study (adaptive rollout allocators against the envelope of fixed n at iso-compute)
    per preset and write docs/ALLOCATORS.md and its figure."""
    rows = parse_presets(presets) if presets else PRESETS
    check_output_dir(out)
    check_output_file(doc, what="--doc")
    check_output_file(fig, what="--fig", suffixes=FIGURE_SUFFIXES, kind="figure")
    text, seconds = write_report(rows, seeds, budget, out, doc, fig, jobs, llm)
    click.echo(text)
    click.echo(f"runs + report in {seconds:.0f} s -> {doc}, {fig}")
