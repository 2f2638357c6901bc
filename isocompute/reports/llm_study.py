"""The real-model n-vs-m study (SmolLM2-135M on this CPU): its grid, run through the studies pipeline.

One in-process sweep (one vLLM engine for every run), ordered so that a study cut short still holds a
complete grid: every seed over every n at the base lr (seed-major), then the lr variants seed by seed.
Every run is a RunConfig of backend llm stored in one ResultStore, so `isocompute fit` / `plot` read it
as any sweep.

    isocompute report llm-study --out results/llm-nvm [--seeds 3] [--budget 512] [--jobs 1]
    isocompute report llm-study --report results/llm-nvm --docs docs/llm_study/nvm [--sim-seeds 8]
    isocompute report llm-study --report docs/llm_study/nvm/table.csv   # from the committed table

The report (generated from the stored runs, nothing typed) writes into --docs: table.csv (every row of every
finished run), fit.json / fit.txt (`isocompute fit` on the base-lr grid), frontier.png (`isocompute plot`),
sim_fit.json (the simulator's n*(C) for the same bp, n grid and budget), README.md, and the real-LLM
paragraph of the top-level README between its `llm-study` markers.

The grid (sized for this 2-core CPU; docs/llm_study/nvm/README.md says what was cut from the planned
bp 8, n 2..32, budget >= 2^12, 3 seeds): bp 8, n in {2, 4, 8, 16}, the sqrt lr rule at base lr 3e-5
(reference batch 64), plus base lr x3 at the smallest and largest n.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from studies.config import RunConfig, StudiesError
from studies.executors import SweepSummary, run_sweep
from studies.files import write_marked_block
from studies.presets import presets_for
from studies.store import ResultStore

NS = (2, 4, 8, 16)
BASE_LR = 3e-5
LR_VARIANTS = (BASE_LR * 3, BASE_LR / 3)
"""The lr bracket at the smallest and largest n: x3 (every seed, after the main grid), then /3 (seed 0).
The base lr itself was not piloted before the study; this bracket is the check that it is not far off."""
SPLITS = "docs/llm_study/nvm/splits"
"""The calibrated easy split the study ran on, frozen beside its results (llm_backend/data grows); relative
to the repository root (run from there), so run ids do not depend on where the checkout lies."""


def grid_configs(seeds: int, budget: int, bp: int = 8) -> list[RunConfig]:
    """The study's runs in priority order (see the module docstring)."""
    base = RunConfig(
        backend="llm", dataset="easy", bp=bp, budget=budget, lr=BASE_LR, lr_rule="sqrt", k=4, n_evals=4,
        d_val=33, options={"max_new_tokens": 24, "train_eval": False, "data_dir": str(SPLITS)},
    )
    ends = (NS[0], NS[-1])
    out = [base.replace(n=n, seed=s) for s in range(seeds) for n in NS]
    up = [base.replace(n=n, lr=LR_VARIANTS[0], seed=s) for s in range(seeds) for n in ends]
    down = [base.replace(n=n, lr=LR_VARIANTS[1], seed=0) for n in ends]
    return out + up[:2] + down + up[2:]


def runs_table(results: str) -> pd.DataFrame:
    """Every finished run's rows with its base lr (`lr_base`), d_val, k and wall_s: from a results directory
    (the lock-free reader of `isocompute fit` and each run's stored record, so a report can be made while the
    study still runs), or from the report's own committed table.csv (which carries `lr_base`), so the report
    can be regenerated where the store is not kept."""
    from studies.io import load_table
    from studies.results_dir import finished_records

    if Path(results).is_file():
        table = pd.read_csv(results)
        if "lr_base" not in table:
            raise StudiesError(f"{results}: not this report's table.csv (no lr_base column)")
        return table
    table = load_table(results)
    recs = finished_records(Path(results))
    table["lr_base"] = table.run_id.map({r: float(rec["config"]["lr"]) for r, rec in recs.items()})
    for col in ("d_val", "k"):
        table[col] = table.run_id.map({r: rec["config"].get(col) for r, rec in recs.items()})
    table["wall_s"] = table.run_id.map({r: rec.get("wall_s") for r, rec in recs.items()})
    return table


def _final(table: pd.DataFrame, metric: str = "val_mean") -> pd.DataFrame:
    """The metric at each run's last evaluation (its budget), one row per run."""
    last = table.sort_values("compute").groupby("run_id").tail(1)
    return last[["run_id", "n", "seed", "lr_base", "compute", metric]].sort_values(["lr_base", "n", "seed"])


def _mean_se(x: pd.Series) -> str:
    x = x.dropna()
    se = x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
    return f"{x.mean():.3f} +- {se:.3f} ({len(x)})" if len(x) > 1 else f"{x.mean():.3f} (1)"


def _sim_fit(budget: int, bp: int, seeds: int) -> dict:
    """The simulator's n*(C) at the study's bp, n grid and budget (interference preset, the paper's sqrt
    lr rule at the simulator's default base lr), 32 evaluation points."""
    from studies.fit.report import fit_report
    from studies.sweeps import n_vs_m

    base = RunConfig(backend="sim", bp=bp, budget=budget, lr_rule="sqrt",
                     **presets_for("sim")["interference"])
    with tempfile.TemporaryDirectory() as tmp, ResultStore(tmp, study="n-vs-m") as store:
        run_sweep(n_vs_m(base, NS, seeds), store, jobs=1, progress=False)
        table = pd.concat([store.read_run(r) for r in store.finished_runs()], ignore_index=True)
    return fit_report(table, metric="val_mean", by="n", extrapolate=False)


def _frontier_lines(rep: dict, every: int = 4) -> list[str]:
    """Rows of a frontier table: compute, the best's reward, and n* as the set the seeds cannot tell from
    the best (studies.fit.nstar; '(tie)' where it has several members)."""
    from studies.fit.nstar import set_text

    out = []
    fr = rep.get("frontier", [])
    for f in [x for i, x in enumerate(fr) if i % every == 0 or i == len(fr) - 1]:
        if f.get("n") is not None and f.get("reward") is not None:
            members = f.get("set") or [f["n"]]
            tie = " (tie)" if len(members) > 1 else ""
            out.append(f"| {f['compute']:.0f} | {f['reward']:.3f} | {set_text(members, NS)}{tie} |")
    return out


def report(results: str, docs: str, sim_seeds: int = 8, readme: str | None = "README.md") -> dict:
    """Write the study's generated tables, fit, figure and README paragraph (module docstring)."""
    from studies.fit.frontier import FrontierFit
    from studies.fit.plots import plot_frontier
    from studies.fit.render import print_fit_report
    from studies.fit.report import fit_report

    out = Path(docs)
    out.mkdir(parents=True, exist_ok=True)
    table = runs_table(results)
    source = results  # quoted in the generated README as the command that made it
    keep = ["run_id", "n", "bp", "seed", "lr_base", "lr", "m", "compute", "tokens", "batch_reward",
            "val_mean", "val_best_k", "val_worst_k", "d_val", "k", "wall_s"]
    table[[c for c in keep if c in table]].sort_values(["lr_base", "n", "seed", "compute"]).to_csv(
        out / "table.csv", index=False, float_format="%.6g")
    main_grid = table[table.lr_base == BASE_LR]
    budget = int(main_grid.compute.max())
    bp = int(main_grid.bp.iloc[0])
    rep = fit_report(main_grid, metric="val_mean", by="n")
    (out / "fit.json").write_text(json.dumps(rep, indent=1) + "\n")
    lines: list[str] = []
    print_fit_report(rep, echo=lines.append)
    (out / "fit.txt").write_text("\n".join(lines) + "\n")
    os.environ.setdefault("MPLBACKEND", "Agg")
    plot_frontier(main_grid, "val_mean", "n", out / "frontier.png",
                  fit=FrontierFit(metric="val_mean", by="n").fit(main_grid),
                  title=f"SmolLM2-135M GRPO, easy split, bp {bp}, base lr {BASE_LR:g} (sqrt rule)")
    sim = _sim_fit(budget, bp, sim_seeds)
    (out / "sim_fit.json").write_text(json.dumps(sim, indent=1) + "\n")

    fin = _final(table)
    seeds = sorted(set(main_grid.seed))
    best = {n: fin[(fin.lr_base == BASE_LR) & (fin.n == n)].val_mean for n in NS}
    means = {n: float(v.mean()) for n, v in best.items() if len(v)}
    n_best = max(means, key=means.get) if means else None
    start = float(table[table.compute == 0].val_mean.mean())
    from studies.fit.nstar import change_text, set_text

    fr = [f for f in rep["frontier"] if f.get("n") is not None]
    last = fr[-1] if fr else None
    sim_fr = [f for f in sim["frontier"] if f.get("n") is not None]
    # Is the best n at the budget distinguishable from the smallest n? Paired SE over seeds when there are
    # two or more; with one seed only the evaluation's own sampling SE (d_val problems x k samples each,
    # binomial; it ignores seed-to-seed variation, so it understates the noise).
    small = fin[(fin.lr_base == BASE_LR) & (fin.n == NS[0])].set_index("seed").val_mean
    top = fin[(fin.lr_base == BASE_LR) & (fin.n == n_best)].set_index("seed").val_mean if n_best else small
    both = small.index.intersection(top.index)
    diff = float((top[both] - small[both]).mean()) if len(both) else float("nan")
    if len(both) >= 2:
        se = float((top[both] - small[both]).std(ddof=1) / np.sqrt(len(both)))
        how = f"paired over {len(both)} seeds"
    else:
        draws = int(table.d_val.iloc[0]) * int(table.k.iloc[0]) if {"d_val", "k"} <= set(table) else 0
        p1, p2 = float(top.mean()), float(small.mean())
        se = float(np.sqrt(p1 * (1 - p1) / draws + p2 * (1 - p2) / draws)) if draws else float("nan")
        how = f"1 seed: evaluation sampling SE only, {draws} draws per value"
    # n* read as the project's one estimator does (studies.fit.nstar): the set of n the seeds cannot tell
    # from the best at the budget, and a rise only where it is determined
    members = (last.get("set") or [last["n"]]) if last else []
    rise = change_text(rep.get("n_star", {}).get("change", {}), "n", NS, fmt=lambda c: f"{c:.0f}")
    verdict = (
        f"n* at C = {last['compute']:.0f} is {{{set_text(members, NS)}}}"
        f"{' (a tie: the seeds cannot tell these n apart)' if len(members) > 1 else ''}; {rise}; at the "
        f"budget n = {n_best} beats n = {NS[0]} by {diff:+.3f} +- {se:.3f} ({how})"
        if last is not None else "no frontier could be fitted")
    var_rows = []
    for n in (NS[0], NS[-1]):
        a = fin[(fin.lr_base == BASE_LR) & (fin.n == n)].set_index("seed").val_mean
        cells = [_mean_se(a)]
        for v in LR_VARIANTS:
            b = fin[np.isclose(fin.lr_base, v) & (fin.n == n)].set_index("seed").val_mean
            both = a.index.intersection(b.index)
            diff = b[both] - a[both]
            cells += [_mean_se(b) if len(b) else "-", _mean_se(diff) if len(diff) else "-"]
        var_rows.append(f"| {n} | " + " | ".join(cells) + " |")
    w = [float(v) for v in table.groupby("run_id").wall_s.first().dropna()] if "wall_s" in table else []
    took = (f"took {min(w) / 60:.0f}-{max(w) / 60:.0f} minutes (wall_s of the run records)" if w else
            "took minutes (the run records' wall_s, which the committed table.csv lacks; the report made "
            "from the store, git show ee87b08:docs/llm_study/nvm/README.md, read 5-27)")
    lr_head = " | ".join(f"lr {v:.3g} | difference" for v in LR_VARIANTS)
    md = [
        "# Real-model n-vs-m study",
        "",
        f"Generated by `isocompute report llm-study --report {source} --docs docs/llm_study/nvm` from",
        "the runs of `isocompute report llm-study --out results/llm-nvm --seeds 3 --budget 512` (one",
        "in-process sweep, one vLLM engine, through studies.executors.run_sweep into a ResultStore).",
        "",
        "SmolLM2-135M-Instruct, GRPO (group-std advantages, token-mean loss, TIS cap 2, AdamW, no KL), vLLM",
        "float32 rollouts and float32 packed training on this CPU; the easy split frozen in `splits/`",
        f"({sum(1 for _ in open(Path(SPLITS) / 'easy.train.jsonl'))} train / "
        f"{sum(1 for _ in open(Path(SPLITS) / 'easy.val.jsonl'))} validation problems, avg@16 in [0.3, 0.6]"
        f" under the base model); bp = {bp}, n in {{{', '.join(map(str, NS))}}}, budget C = {budget} "
        f"rollouts, seeds {', '.join(map(str, seeds))}; base lr {BASE_LR:g} at reference batch 64 with",
        f"the sqrt rule, plus base lr x3 and /3 at n = {NS[0]} and n = {NS[-1]}; 24 new tokens,",
        "temperature 0.7;",
        "val_mean = avg@4 on every validation problem at 4 log-spaced evaluation points (plus C = 0).",
        "",
        f"**{verdict}.** Validation avg@4 at C = 0: {start:.3f}.",
        "",
        f"{sum(c.get('r2') is None for c in rep['curves'])} of {len(rep['curves'])} per-curve sigmoid fits "
        "are degenerate (a constant: too few and too noisy evaluation points per run), so the frontier",
        "below is a weak estimate (fit.txt).",
        "",
        f"## val_mean at the budget (C = {budget}), mean +- SE over seeds (runs)",
        "",
        "| n | steps m | val_mean |",
        "|---|---|---|",
        *[f"| {n} | {budget // (bp * n)} | {_mean_se(best[n]) if len(best[n]) else '-'} |" for n in NS],
        "",
        f"Best n at the budget: {n_best}." if n_best else "",
        "",
        "## The frontier n*(C) (`isocompute fit`, fit.txt) beside the simulator's (interference preset, same",
        f"bp, n grid and budget, {sim_seeds} seeds, sim_fit.json)",
        "",
        "| C | real val_mean | real n* |",
        "|---|---|---|",
        *_frontier_lines(rep),
        "",
        "| C | sim val_mean | sim n* |",
        "|---|---|---|",
        *_frontier_lines(sim),
        "",
        f"## Learning-rate dependence: base lr {BASE_LR:g} vs x3 and /3 (val_mean at the budget; each",
        "difference paired over the seeds both ran)",
        "",
        f"| n | lr {BASE_LR:g} | {lr_head} |",
        "|---|---|---|---|---|---|",
        *var_rows,
        "",
        "## What was cut from the planned study, and why",
        "",
        "The plan asked for n in {2, 4, 8, 16, 32}, budget >= 2^12 rollouts, 3 seeds and a base lr from a",
        f"short pilot. A float32 run of this grid {took} at",
        f"C = {budget} on this shared 2-core CPU, so C = 2^12 would take",
        f"{4096 / budget:.0f}x that per run: the budget is cut to {budget}, and n = 32 (2 steps at bp 8",
        "within 512 rollouts) is left out. The base lr was not piloted first; the",
        "x3 / /3 bracket above, at the smallest and largest n, is the check made instead. 3 seeds were run.",
        "",
        "![frontier](frontier.png)",
        "",
    ]
    (out / "README.md").write_text("\n".join(md))
    sim_at_budget = (f"{{{set_text(sim_fr[-1].get('set') or [sim_fr[-1]['n']], NS)}}}" if sim_fr else "-")
    summary = (f"A real n-vs-m study on this CPU (SmolLM2-135M, easy split, bp {bp}, n "
               f"{NS[0]}..{NS[-1]}, C = {budget} rollouts, seeds {len(seeds)}; "
               f"[docs/llm_study/nvm](docs/llm_study/nvm/README.md)): {verdict}; at the budget the best n is "
               f"{n_best} (val avg@4 {means.get(n_best, float('nan')):.3f} from {start:.3f} at C = 0); "
               f"the simulator's n* at the same bp and budget: {sim_at_budget}.")
    if readme:
        write_marked_block(Path(readme), "<!-- llm-study:begin -->", "<!-- llm-study:end -->", summary)
    return {"verdict": verdict, "n_best": n_best, "summary": summary}


def run_grid(out: Path, seeds: int, budget: int, bp: int, jobs: int) -> SweepSummary:
    """Run the study's grid (grid_configs) into the results directory `out` in one in-process sweep."""
    with ResultStore(out, study="n-vs-m") as store:
        return run_sweep(grid_configs(seeds, budget, bp), store, jobs=jobs, progress=True, desc="llm n-vs-m")
