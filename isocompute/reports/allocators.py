"""docs/ALLOCATORS.md: rollout allocators vs the envelope of fixed n, generated from the stored runs of the
allocators study (isocompute.reports.alloc_study: every arm at the sqrt lr rule with its base lr chosen on
tuning seeds, reported on other seeds; the simulator presets and the tiny LM).

`isocompute report allocators` regenerates the document and its figures from the stores as they stand
(seconds); `--stage tune|report [--plan sim|tiny] [--part KEY]` first runs that stage's missing runs
(resumable); `--quick` runs every stage of the quick plans (seconds, CI) and writes
results/ALLOCATORS-quick.md.

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
from pathlib import Path

import numpy as np
import pandas as pd

from isocompute.reports import alloc_study
from studies.files import atomic_write_text

PRESETS = alloc_study.SIM_PRESETS
"""(model, dataset, metric) of the simulator's parts (alloc_study.SIM_PRESETS). `dual` and `tri` are the mix
presets (half hard and half easy problems; half hard, a quarter easy, a quarter very easy:
sandbox/problems.py MIXES)."""
N_GRID = alloc_study.SIM.parts[0].ns
FWER = 0.05
"""Family-wise error rate of each table's flags (Holm over the table's cells)."""
DIGITS = 4
"""Decimals of a printed difference: one that rounds to zero there is never flagged."""
ALLOCATORS = alloc_study.SIM_ALLOCATORS
BP = alloc_study.SIM.parts[0].bp
BASE_N = alloc_study.SIM.parts[0].base_n
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
    "pilot-commit": ("Pilot-Commit (2605.26606): target accuracy in 1.5-1.9x fewer cumulative rollouts than "
                     "GRPO, 2.3-4.0x fewer than DAPO"),
    "dynamo": ("DynaMO (2602.19208): +3.7 / +4.4 points avg pass@1 over GRPO at 1.5B / 7B, with its "
               "token-level advantage modulation (not run here)"),
}
FACTORS = {"knapsack": 2.0, "skip-zero-var": 2.4, "gvm": 2.0, "pilot-commit": 1.5}
"""The compute factor each paper claims at equal accuracy over its uniform baseline (the low end of a range:
Knapsack RL ~2x compute-equivalent, GRESO up to 2.4x, GVM-RAFT 2-4x over RAFT, Pilot-Commit 1.5-1.9x over
GRPO): read against the measured compute-to-target ratio over the allocator's own base n."""


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


def figure(results: dict, path: Path, top: int, seeds: int, base_n: int = BASE_N, what: str = "") -> None:
    """Each allocator's seed-mean curve against the envelope of the fixed-n curves (top row), and its paired
    difference from the envelope with a 2 SE band (bottom row), one column per preset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    grid = [2.0 ** e for e in np.arange(min(12, math.log2(top) - 4), math.log2(top) + 1e-9, 0.5)]
    allocs = list(ALLOCATORS)
    colors = dict(zip(allocs, sns.color_palette("tab20", len(allocs)), strict=True))
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
        fig.suptitle(f"Rollout allocators{what} (base n = {base_n}) vs the envelope of fixed n "
                     f"(grey: fixed-n curves), {seeds} seeds")
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
    """`marks` of a preset's table: every (allocator, C) cell with a test, one family (`cells_of`)."""
    return marks(cells_of(comps, Cs))


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
           fig: str | None = None, llm: list[str] | None = None, *, cmd: str = "isocompute report allocators",
           head: list[str] | None = None, after: dict | None = None) -> str:
    """The document: header (`head`: the study's declaration and status, before the tables), one section
    per simulator preset of `results` ({(model, dataset, metric): the reported runs}: tables of differences
    from the envelope with the literature's claims beside, the decomposition at the top budget, then
    `after[key]`'s lines: the tuned lrs and compute to target), the goal check, where the shortfall comes
    from, the reading, then `llm` (the tiny-LM section)."""
    Cs = budgets(budget, lo=min(2**12, budget // 16))
    grid = sorted({int(a.removeprefix("fixed-n")) for t in results.values() for a in set(t["allocator"])
                   if a.startswith("fixed-n")})
    lines = [
        "# Rollout allocators at iso-compute (generated)",
        "",
        f"Generated by `{cmd}` (do not edit by hand; the runs are resumable in their stores, a rerun without "
        "--stage only regenerates). "
        f"Simulator, bp = {BP}, fixed n in {{{', '.join(map(str, grid))}}}, allocators at base n = "
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
        "doubles whenever more than half of the groups of the last 8 steps had zero variance (up to 32n); "
        "pilot-commit = Pilot-Commit, a pilot of n/4 rollouts per candidate, the other 3n/4 committed to "
        "candidates with pilot success rate in [0.125, 0.75] (one group of n), all-correct pilots evicted, "
        "rounds of bp candidates until bp are committed (at most 30); dynamo = DynaMO, n_i ~ the unbiased "
        "Bernoulli variance k (g - k) / (g (g - 1)) of the problem's history in [n/2, 3n/2]. "
        "Where a paper's rule needs machinery the simulator lacks (VIP's Gaussian process, GVM's "
        "pre-sampling and backward passes for G_i, Reinforce-Ada's down-sampling to balanced groups, "
        "Pilot-Commit's replay buffer of stale pilot survivors, DynaMO's per-epoch priorities) the "
        "choices made are listed in the module docstring of sandbox/allocators.py; the estimate of p_i "
        "is free here, which favours the per-problem allocators over their LLM versions.",
        "",
    ]
    lines += head or []
    if fig:
        lines += [f"![allocators vs the fixed-n envelope]({fig})", ""]
    summary, own, flags, powers = {}, {}, {}, {}
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
            name = f"{a} (oracle)" if is_oracle(a) else a
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {claim_of(a)} |")
        pw = power(cells_of(comps, Cs))
        powers[f"{model}/{dataset}"] = pw
        lines += ["", power_text(pw), ""]
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
        lines += (after or {}).get((model, dataset, metric), [])
    lines += _verdict(summary, flags, Cs)
    lines += power_summary(powers, "the simulator part")
    lines += _why(summary, own, flags, Cs)
    lines += _reading(summary, own, flags, Cs)
    lines += [""] + (llm or [])
    return "\n".join(lines) + "\n"


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
    if any(np.isfinite(diff(k, "dynamic-sampling")[0]) for k in keys.values()):
        out.append("- dynamic-sampling (DAPO), ada (Reinforce-Ada) and pilot-commit spend more than one "
                   "batch per step and take fewer steps (steps column); dynamic-sampling against the "
                   f"envelope at {top}: {dyn}.")
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


def is_oracle(a: str) -> bool:
    """Whether an allocator reads the true pass@1 (`:oracle=1`): an upper bound on its rule, not something a
    trainer can run, so it is marked and kept out of the goal."""
    return ":oracle=" in a


GOAL_WINS = 2
"""Presets on which an allocator must be flagged above the envelope at the top budget to meet the goal."""


def goal_rows(summary: dict, flags: dict, Cs: list[int]) -> list[dict]:
    """Per allocator: "wins" (presets where it is flagged above the envelope at the top budget), "losses"
    ({preset: (worst flagged-below diff, its budget)} over every budget), "tops" ({preset: top-budget
    diff}), "mean" (their mean), "oracle", and "met": no flagged loss anywhere, at least GOAL_WINS wins, and
    not an oracle (Holm flags within each preset's table)."""
    out = []
    for a in ALLOCATORS:
        wins, losses, tops = [], {}, {}
        for (model, dataset), comps in summary.items():
            key = f"{model}/{dataset}"
            rs = {C: comps[C][1].set_index("allocator").loc[a] for C in Cs
                  if a in set(comps[C][1]["allocator"])}
            if not rs:
                continue
            mk = flags[(model, dataset)]
            if mk.get((a, Cs[-1])) == "above":
                wins.append(key)
            below = [(float(r["diff"]), C) for C, r in rs.items() if mk.get((a, C)) == "below"]
            if below:
                losses[key] = min(below)
            tops[key] = float(rs[Cs[-1]]["diff"])
        if not tops:
            continue
        out.append({"allocator": a, "wins": wins, "losses": losses, "tops": tops,
                    "mean": float(np.mean(list(tops.values()))), "oracle": is_oracle(a),
                    "met": not is_oracle(a) and len(wins) >= GOAL_WINS and not losses})
    return out


def _verdict(summary: dict, flags: dict, Cs: list[int]) -> list[str]:
    """The goal, checked from the numbers (`goal_rows`): wins and losses per allocator, side by side; an
    allocator meets the goal only with no flagged loss at any budget of any preset, and oracles are marked
    and kept out."""
    out = ["## The goal, checked", "",
           f"Goal: an allocator flagged above the fixed-n envelope at the top budget on at least {GOAL_WINS} "
           "presets and flagged below it on none, at any budget (flags: Holm within each preset's table). "
           "Wins and losses stand side by side: a win on one preset does not offset a loss on another. "
           "Oracle allocators (`:oracle=1`, the true pass@1) are upper bounds on a rule, not allocators a "
           "trainer can run: marked, and kept out of the goal.",
           "",
           "| allocator | wins: flagged above at the top budget | losses: flagged below (worst diff, budget) "
           "| mean top-budget diff | top-budget diff by preset | goal |",
           "|---|---|---|---|---|---|"]
    rows = goal_rows(summary, flags, Cs)
    for r in rows:
        loss = "; ".join(f"{k} {_fmt(d, 3)} ({log2(C)})" for k, (d, C) in r["losses"].items()) or "none"
        goal = ("oracle: kept out" if r["oracle"] else "met" if r["met"] else
                f"not met: {len(r['losses'])} preset(s) with a flagged loss" if r["losses"] else
                f"not met: {len(r['wins'])} win(s)")
        name = f"{r['allocator']} (oracle)" if r["oracle"] else r["allocator"]
        out.append(f"| {name} | {', '.join(r['wins']) or 'none'} | {loss} | {_fmt(r['mean'], 3)} | "
                   + "; ".join(f"{k} {_fmt(v, 3)}" for k, v in r["tops"].items()) + f" | {goal} |")
    met = [r["allocator"] for r in rows if r["met"]]
    oracle_wins = [f"{r['allocator']} ({len(r['wins'])} wins, {len(r['losses'])} presets with a loss)"
                   for r in rows if r["oracle"]]
    out += ["", ("Meets the goal: " + ", ".join(met) + ".") if met else
            "No allocator meets the goal: every one that runs without the true pass@1 has a flagged loss on "
            f"some preset or fewer than {GOAL_WINS} flagged wins.",
            ""]
    if oracle_wins:
        out += ["Oracles, for reference only: " + "; ".join(oracle_wins) + ".", ""]
    return out


def power(cells: dict, fwer: float = FWER, level: float = 0.8) -> dict:
    """The smallest difference a table's test could detect: with m cells in its Holm family and k seeds,
    a cell is flagged at the first Holm step only if |diff| / se exceeds t(1 - fwer / (2 m), k - 1); a
    true difference is flagged with probability `level` when it is about (that quantile + t(level, k - 1))
    times the cell's paired SE. With the table's median SE: {"cells" m, "seeds" k, "se" median, "mde"}
    (nan without two seeds or a positive SE). `cells`: {key: (diff, se, seeds)}, as `marks` reads them."""
    from scipy.stats import t

    ses = [float(se) for _, se, _ in cells.values() if np.isfinite(se) and se > 0]
    ks = [int(k) for _, se, k in cells.values() if np.isfinite(se) and se > 0]
    m, k = len(ses), min(ks) if ks else 0
    if m == 0 or k < 2:
        return {"cells": m, "seeds": k, "se": float("nan"), "mde": float("nan")}
    se = float(np.median(ses))
    mde = (float(t.ppf(1 - fwer / (2 * m), k - 1)) + float(t.ppf(level, k - 1))) * se
    return {"cells": m, "seeds": k, "se": se, "mde": mde}


def power_text(pw: dict, what: str = "this table") -> str:
    """'Power: with 8 seeds and 126 cells in its Holm family, this table flags a difference with 80%
    probability only from about 0.012 (median paired SE 0.0021).'"""
    if not np.isfinite(pw["mde"]):
        return f"Power: {what} has no test ({pw['seeds']} seeds)."
    return (f"Power: with {pw['seeds']} seeds and {pw['cells']} cells in its Holm family, {what} flags a "
            f"difference with 80% probability only from about {pw['mde']:.3f} (median paired SE "
            f"{pw['se']:.4f}); smaller differences, real or not, stay unflagged.")


def cells_of(comps: dict, Cs) -> dict:
    """{(allocator, C): (diff, se, seeds)} of a preset's table: the family `marks` tests."""
    return {(a, C): (r["diff"], r["se"], r["seeds"]) for C in Cs
            for a, r in comps[C][1].set_index("allocator").iterrows()}


def power_summary(powers: dict[str, dict], what: str) -> list[str]:
    """One paragraph: the smallest difference each preset's table could detect (`power`), so that a missing
    flag reads as what it is."""
    ok = {k: v for k, v in powers.items() if np.isfinite(v["mde"])}
    if not ok:
        return []
    def span(vals, fmt="{}"):
        lo, hi = min(vals), max(vals)
        return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"

    seeds = span([v["seeds"] for v in ok.values()])
    cells = span([v["cells"] for v in ok.values()])
    mde = span([v["mde"] for v in ok.values()], "{:.3f}")
    return [f"Power of {what}: {seeds} seeds and {cells} cells per Holm family; the smallest difference "
            f"flagged with 80% probability is {mde} by preset ("
            + ", ".join(f"{k} {v['mde']:.3f}" for k, v in ok.items()) + "). A difference below a preset's "
            "figure that is not flagged is not evidence of no difference.", ""]


# ---------------------------------------------------------------------------------- compute to a target
def equivalence(table: pd.DataFrame, metric: str, base_arm: str, Cs, reps: int) -> pd.DataFrame:
    """Compute to reach a target (studies.fit.target.compute_to_target) of every allocator of `table`: per
    budget C, the rollouts it needs to reach the fixed-n envelope's record reward at C, as a ratio to the
    envelope's own (env) and, for the target its base n reaches at C, to that base n's (own), each with its
    seed-bootstrap 95% interval (rows: allocator, C, env, env_lo, env_hi, own, own_lo, own_hi)."""
    from studies.fit.target import compute_to_target

    fixed = sorted(a for a in set(table["allocator"]) if a.startswith("fixed-n"))
    order = {a: i for i, a in enumerate(ALLOCATORS)}
    rows = []
    allocs = sorted({x for x in table["allocator"] if not x.startswith("fixed-n")},
                    key=lambda x: order.get(x, 99))
    for a in allocs:
        env = compute_to_target(table, a, Cs, fixed, metric=metric, reps=reps)
        own = compute_to_target(table, a, Cs, [base_arm], metric=metric, reps=reps)
        for (_, e), (_, o) in zip(env.iterrows(), own.iterrows(), strict=True):
            rows.append({"allocator": a, "C": e["budget"], "env": e["ratio"], "env_lo": e["lo"],
                         "env_hi": e["hi"], "own": o["ratio"], "own_lo": o["lo"], "own_hi": o["hi"]})
    return pd.DataFrame(rows)


def _x(r: float) -> str:
    """A compute ratio: x1.42; `never` when the allocator never reaches the target (0); `only it` when only
    the allocator does (inf); n/a when neither does."""
    if not np.isfinite(r):
        return "n/a" if np.isnan(r) else "only it"
    return "never" if r == 0 else f"x{r:.2f}"


def _iv(r: float, lo: float, hi: float) -> str:
    return _x(r) + (f" [{_x(lo).lstrip('x')}, {_x(hi).lstrip('x')}]" if np.isfinite(lo) or np.isfinite(hi)
                    else "")


def equivalence_lines(eq: pd.DataFrame, base_arm: str, Cs) -> list[str]:
    """The compute-to-target table beside the reward differences: per allocator and budget, own (target:
    the base n's record reward at C) and env (target: the envelope's), with the literature's claim."""
    if eq.empty:
        return []
    out = ["Compute to reach a target (the papers' compute-equivalent): the record reward the "
           f"{base_arm} (own) or the fixed-n envelope (env) has at C, and how many times fewer rollouts the "
           "allocator needs to reach it (x > 1: fewer; never: not within its budget), seed-bootstrap 95% "
           "interval in brackets.", "",
           "| allocator | " + " | ".join(f"C = {log2(C)}: own / env" for C in Cs) + " | literature's claim |",
           "|---|" + "---|" * len(Cs) + "---|"]
    for a, g in eq.groupby("allocator", sort=False):
        cells = []
        for C in Cs:
            r = g.loc[g["C"] == float(C)].iloc[0]
            own, env = _iv(r["own"], r["own_lo"], r["own_hi"]), _iv(r["env"], r["env_lo"], r["env_hi"])
            cells.append(f"{own} / {env}")
        out.append(f"| {a} | " + " | ".join(cells) + f" | {claim_of(a)} |")
    return out + [""]


def claim_verdict(a: str, eq_top: pd.Series | None, gain: tuple | None) -> str:
    """Whether the literature's claim for `a` holds here, from the top budget's compute ratio over its own
    base n (`eq_top`; FACTORS) and its reward gain over the base n (`gain`: diff, se, flag)."""
    factor = FACTORS.get(a)
    if factor is not None and eq_top is not None:
        lo, hi, r = eq_top["own_lo"], eq_top["own_hi"], eq_top["own"]
        measured = _iv(r, lo, hi)
        if not (np.isfinite(lo) or np.isfinite(hi)):
            return f"no interval (one seed): {measured} against the claimed x{factor:g}"
        if np.isfinite(lo) and lo >= factor:
            return f"holds: compute ratio {measured} >= the claimed x{factor:g}"
        if np.isfinite(hi) and hi >= factor:
            return f"not excluded: {measured} contains the claimed x{factor:g}"
        if np.isfinite(lo) and lo > 1:
            return f"a smaller saving than claimed: {measured} < x{factor:g}"
        return f"does not hold: {measured}, no saving of x{factor:g}"
    if gain is not None and CLAIMS.get(a, "").strip() and not CLAIMS[a].startswith("(ours"):
        d, se, flag = gain
        if flag == "above":
            return f"a gain in the claimed direction: {_cell(d, se, flag)} over the base n"
        if flag == "below":
            return f"does not hold: {_cell(d, se, flag)} below the base n"
        return f"not shown: {_cell(d, se, flag)} over the base n (no flag)"
    return ""


def verdicts(eq: pd.DataFrame, own: dict, Cs) -> dict[str, str]:
    """claim_verdict of every allocator of a part at its top budget (those with a claim to judge)."""
    out = {}
    for a in dict.fromkeys(eq["allocator"]) if not eq.empty else own:
        top = eq.loc[(eq["allocator"] == a) & (eq["C"] == float(Cs[-1]))] if not eq.empty else eq
        v = claim_verdict(a, top.iloc[0] if len(top) else None, own.get(a))
        if v:
            out[a] = v
    return out


def claims_lines(title: str, eq: pd.DataFrame, own: dict, Cs) -> list[str]:
    """Per allocator of the part: the literature's claim and whether it holds here, by how much."""
    rows = [f"| {a} | {claim_of(a)} | {v} |" for a, v in verdicts(eq, own, Cs).items()]
    if not rows:
        return []
    return [f"Which claims hold on {title} (at C = {log2(Cs[-1])}, against the allocator's own base n):", "",
            "| allocator | literature's claim | here |", "|---|---|---|", *rows, ""]


# ----------------------------------------------------------------------------------------- the document
def lr_lines(st: alloc_study.PartState) -> list[str]:
    """The base lr each arm runs at (chosen on the tuning seeds) and the edges left open."""
    ch = st.choices
    out = [f"Base lr per arm (sqrt rule at B_ref = {st.part.lr_ref_batch}; chosen on tuning seeds "
           f"{', '.join(map(str, st.part.tune_seeds))} at {log2(st.part.budget)}, reported on "
           f"{', '.join(map(str, st.part.report_seeds))}): "
           + ", ".join(f"{a} {lr:g}" for a, lr in ch.lr.items()) + "."]
    if ch.open_edges:
        out[0] += " Optima left on an open grid edge: " + "; ".join(ch.open_edges) + "."
    if st.diverged:
        out[0] += f" Diverged (scored 0 after divergence): {', '.join(st.diverged)}."
    return out + [""]


def status_lines(title: str, states: list[alloc_study.PartState]) -> list[str]:
    """Stage progress of every part of a plan."""
    out = [f"{title}:", ""]
    for st in states:
        parts = [f"{s['stage']} {s['done']}/{s['declared']}" + (" (blocked)" if s["blocked"] else "")
                 for s in st.stages]
        out.append(f"- {st.part.key}: " + ", ".join(parts)
                   + ("" if not st.table.empty else " - not reported yet"))
    return out + [""]


def part_lines(st: alloc_study.PartState, reps: int) -> tuple[list[str], pd.DataFrame, dict]:
    """One reported part's tables for a section of its own (the tiny LM): differences from the envelope with
    Holm flags and claims, the own gain over the base n, compute to target, and which claims hold."""
    part, table = st.part, st.table
    Cs = budgets(part.budget, lo=min(2**12, part.budget // 16))
    comps = {C: compare(table, part.metric, C) for C in Cs}
    mk = table_marks(comps, Cs)
    pts = at_budget(table, part.metric, Cs[-1])
    ref = pts.loc[pts["allocator"] == part.base_arm].set_index("seed")["value"]
    names = list(comps[Cs[-1]][1]["allocator"])
    gains = {a: _own_gain(table, pts, ref, a) for a in names if not a.startswith("fixed-n")}
    own_mk = marks({a: (g[0], g[1], g[4]) for a, g in gains.items()})
    own = {a: (g[0], g[1], own_mk[a]) for a, g in gains.items()}
    lines = [f"### {part.key} ({part.metric})", "", *lr_lines(st),
             "Envelope n* by budget: " + " / ".join(f"{log2(C)}: {comps[C][0].removeprefix('fixed-')}"
                                                   for C in Cs) + ".", "",
             "| allocator | " + " | ".join(f"C = {log2(C)}" for C in Cs)
             + f" | vs {part.base_arm} at {log2(Cs[-1])} | steps | zero_var_frac | literature's claim |",
             "|---|" + "---|" * len(Cs) + "---|---|---|---|"]
    for a in names:
        cells = [_cell(*comps[C][1].set_index("allocator").loc[a, ["diff", "se"]], mk.get((a, C), ""))
                 for C in Cs]
        d, se, steps, zv, _ = _own_gain(table, pts, ref, a)
        gain = (_cell(d, se, own_mk.get(a, "")) if a in gains
                else "(the base)" if a == part.base_arm else _cell(d, se))
        lines.append(f"| {a} | " + " | ".join(cells)
                     + f" | {gain} | {steps:.0f} | {zv:.2f} | {claim_of(a)} |")
    lines += ["", power_text(power(cells_of(comps, Cs))), ""]
    eq = equivalence(table, part.metric, part.base_arm, Cs, reps)
    lines += equivalence_lines(eq, part.base_arm, Cs)
    lines += claims_lines(part.key, eq, own, Cs)
    lines += tiny_reading(part, comps, own, eq, Cs)
    return lines, eq, own


VERDICTS = ("holds", "a gain in the claimed direction", "not excluded", "a smaller saving than claimed",
            "not shown", "does not hold")


def verdict_groups(eq: pd.DataFrame, own: dict, Cs) -> dict[str, list[str]]:
    """Allocators of a part by the kind of claim_verdict they get at the top budget (VERDICTS order), each
    entry `allocator (verdict detail)`."""
    out: dict[str, list[str]] = {k: [] for k in VERDICTS}
    for a, v in verdicts(eq, own, Cs).items():
        kind = next((k for k in VERDICTS if v.startswith(k)), None)
        if kind is not None:
            out[kind].append(f"{a}: {v.partition(': ')[2]}")
    return out


def tiny_reading(part, comps: dict, own: dict, eq: pd.DataFrame, Cs) -> list[str]:
    """A plain reading of one part, generated from its tables: the envelope's n*, the base n's gap to it, the
    allocators flagged above / below their base n at the top budget, and which claims hold."""
    top = Cs[-1]
    cmp = comps[top][1].set_index("allocator")
    base = cmp.loc[part.base_arm]
    ns = sorted({int(comps[C][0].removeprefix("fixed-n")) for C in Cs})
    grid = sorted(int(a.removeprefix("fixed-n")) for a in cmp.index if a.startswith("fixed-n"))
    edge = (" (the grid's smallest n, so the optimum may lie below it)" if ns == grid[:1]
            else " (the grid's largest n, so the optimum may lie above it)" if ns == grid[-1:] else "")
    above = [f"{a} {_cell(d, se, f)}" for a, (d, se, f) in own.items() if f == "above"]
    below = [f"{a} {_cell(d, se, f)}" for a, (d, se, f) in own.items() if f == "below"]
    best = max(own.items(), key=lambda kv: kv[1][0]) if own else None
    groups = verdict_groups(eq, own, Cs)
    held = groups["holds"] + groups["a gain in the claimed direction"]
    out = [f"Reading ({part.key}, {len(part.report_seeds)} report seeds, flags Holm-adjusted): the "
           f"envelope's n* is {' / '.join(f'n{n}' for n in ns)} over {log2(Cs[0])}-{log2(top)}{edge}; the "
           "allocators' base "
           f"{part.base_arm} is {_cell(base['diff'], base['se'])} from it at {log2(top)}. Against their base "
           f"n at {log2(top)}, flagged above: {'; '.join(above) or 'none'}; flagged below: "
           f"{'; '.join(below) or 'none'}"
           + (f"; the best: {best[0]} {_cell(best[1][0], best[1][1], best[1][2])}" if best else "")
           + ". Claims that hold here: " + ("; ".join(held) if held else "none") + "."]
    for kind in ("not excluded", "a smaller saving than claimed", "not shown", "does not hold"):
        if groups[kind]:
            out[0] += f" {kind.capitalize()}: " + "; ".join(groups[kind]) + "."
    return out + [""]


LLM_CODE = (
    "The llm backend runs `fixed`, `knapsack`, `dynamic-sampling`, `skip-zero-var`, `schedule:double@F...`, "
    "`pilot-commit` and `dynamo` (llm_backend/allocators.py: the simulator's spec strings, defaults and "
    "rule book, held equal to the simulator's by tests/test_allocator_parity.py); p_i and the counts come "
    "from each problem's drawn groups, as in the simulator. Every generated rollout and token counts, "
    "discarded pilots and groups too; a step runs only if it fits in the budget. Unequal groups keep the "
    "TRL / verl loss normalisation; each group's advantage uses its own mean and std.")


def render(sim: list, tiny: list, cmd: str, reps: int, fig: str | None = None,
           tiny_fig: str | None = None) -> str:
    """The document from the parts' states (alloc_study.measure of each plan): the simulator body from the
    reported sim parts, then the tiny-LM section."""
    seeds = max((len(st.part.report_seeds) for st in sim), default=0)
    head = ["The study (isocompute/reports/alloc_study.py): every arm, each fixed n and each allocator at "
            "its base n, runs the sqrt lr rule with its own base lr, chosen on tuning seeds (the argmax of "
            "their mean record reward at the top budget on a grid of 1.78x steps, extended outward while the "
            "optimum sits on an edge) and reported on other seeds.", "",
            *status_lines("Simulator parts", sim), *status_lines("Tiny-LM parts", tiny)]
    results, after = {}, {}
    for st in sim:
        if st.table.empty:
            continue
        key = (st.part.model, st.part.dataset, st.part.metric)
        results[key] = st.table
        Cs = budgets(st.part.budget, lo=min(2**12, st.part.budget // 16))
        eq = equivalence(st.table, st.part.metric, st.part.base_arm, Cs, reps)
        pts = at_budget(st.table, st.part.metric, Cs[-1])
        ref = pts.loc[pts["allocator"] == st.part.base_arm].set_index("seed")["value"]
        gains = {a: _own_gain(st.table, pts, ref, a) for a in set(eq["allocator"])} if not eq.empty else {}
        own_mk = marks({a: (g[0], g[1], g[4]) for a, g in gains.items()})
        own = {a: (g[0], g[1], own_mk[a]) for a, g in gains.items()}
        after[key] = [*lr_lines(st), *equivalence_lines(eq, st.part.base_arm, Cs),
                      *claims_lines(st.part.key, eq, own, Cs)]
    tail = ["## On the tiny LM", "", LLM_CODE, ""]
    if tiny_fig:
        tail += [f"![allocators on the tiny LM]({tiny_fig})", ""]
    for st in tiny:
        if st.table.empty:
            tail += [f"{st.part.key}: not reported yet (stages above).", ""]
            continue
        tail += part_lines(st, reps)[0]
    if results:
        budget = max(st.part.budget for st in sim if not st.table.empty)
        return report(results, seeds, budget, fig=fig, llm=tail, cmd=cmd, head=head, after=after)
    return "\n".join(["# Rollout allocators at iso-compute (generated)", "", f"Generated by `{cmd}`.", "",
                      *head, "No simulator part is reported yet.", "", *tail]) + "\n"


def write_report(sim_plan: alloc_study.Plan, sim_store: Path, tiny_plan: alloc_study.Plan, tiny_store: Path,
                 doc: Path, fig: Path | None, tiny_fig: Path | None, cmd: str) -> str:
    """Read both stores, draw the figures of the reported parts and write `doc`; returns its text."""
    sim = alloc_study.measure(sim_plan, sim_store)
    tiny = alloc_study.measure(tiny_plan, tiny_store)

    def rel(p: Path | None) -> str | None:
        return None if p is None else str(Path("figs") / p.name if doc.parent.name == "docs" else p)

    done = {(st.part.model, st.part.dataset, st.part.metric): st.table for st in sim if not st.table.empty}
    if fig is not None and done:
        top = max(st.part.budget for st in sim)
        figure(done, fig, top, len(sim_plan.parts[0].report_seeds), what=" in the simulator")
    tiny_done = {("tiny", st.part.dataset, st.part.metric): st.table for st in tiny if not st.table.empty}
    if tiny_fig is not None and tiny_done:
        part = tiny_plan.parts[0]
        figure(tiny_done, tiny_fig, part.budget, len(part.report_seeds), part.base_n, " on the tiny LM")
    text = render(sim, tiny, cmd, sim_plan.reps, rel(fig) if done else None,
                  rel(tiny_fig) if tiny_done else None)
    atomic_write_text(doc, text)
    return text


COMMITTED = {"doc": Path("docs/ALLOCATORS.md"), "fig": Path("docs/figs/allocators.png"),
             "tiny_fig": Path("docs/figs/allocators_tiny.png")}
QUICK_DOC = Path("results/ALLOCATORS-quick.md")
