"""The studies commands of `isocompute` (run, sweep, fit, plot, plan, predict, demo): thin click commands over
importable functions, so scripts and tests call the same code.

The root group lives above studies, in isocompute/cli.py (docs/DESIGN.md arrows), which also maps every error
to one line and exit code 2. What every command line shares (parameter types, the output and warning policy,
resource checks) is studies.cli_kit; the text of a fit is studies.fit.render. Heavy modules (engines,
fitting, plotting) load inside the commands.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from isocompute.contract.allocspec import split_specs
from isocompute.contract.options import ADV_STDS, LR_RULES, OBJECTIVES, OPTIMIZERS, SCALE_REWARDS
from isocompute.contract.status import DIVERGED
from studies.cli_kit.checks import check_configs, check_device, check_jobs, check_memory, check_sweep_size
from studies.cli_kit.output import echo_warnings, emit_json, progress_lines, set_interrupt_note
from studies.cli_kit.params import (
    COUNT,
    COUNT_LIST,
    CodeDefaultOption,
    OutPath,
    apply_options,
    engine_default,
    import_attr,
    module_default,
)
from studies.config import (
    RunConfig,
    StudiesError,
    parse_count,
    parse_count_list,
    parse_option,
)
from studies.fit.render import fmt_c, print_fit_report

HELP = RunConfig.field_help()
PROGRESS_HELP = "Progress on stderr: a bar on a terminal, else a line every ~10 s (never one per step)."
EMITS = ("trl", "verl")
"""`plan --emit` values: studies.fit.emit.EMITS (tests/studies/test_plan_emit.py ties the two, as
PLAN_LR_RULES to studies.fit.emit.PLAN_LR_RULES)."""
PLAN_LR_RULES = ("constant", "sqrt")
PREDICT_RULES = ("signal", "paper")
"""`predict --rule` values: studies.fit.predict.RULES (tests/studies/test_predict.py ties the two; this module
loads no pandas at start-up)."""


# ----------------------------------------------------------------------------------------- shared options
_CONFIG_OPTIONS = [
    click.option("--backend", default="sim", show_default=True, help=HELP["backend"]),
    click.option("--model", default=None, help=HELP["model"]),
    click.option("--lm", default=None, help=HELP["lm"]),
    click.option("--dataset", default="easy", show_default=True, help=HELP["dataset"]),
    click.option("--problem-seed", type=int, default=None, help=HELP["problem_seed"]),
    click.option("--lr", type=float, default=None, help=HELP["lr"]),
    click.option("--lr-rule", type=click.Choice(LR_RULES), default=None, help=HELP["lr_rule"]),
    click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=None, help=HELP["optimizer"]),
    click.option("--weight-decay", type=float, default=None, help=HELP["weight_decay"]),
    click.option("--scale-rewards", type=click.Choice(SCALE_REWARDS), default="group", show_default=True,
                 help=HELP["scale_rewards"]),
    click.option("--adv-std", type=click.Choice(ADV_STDS), default="sample", show_default=True,
                 help=HELP["adv_std"]),
    click.option("--adv-eps", type=float, default=1e-4, show_default=True, help=HELP["adv_eps"]),
    click.option("--kl-coef", type=float, default=0.0, show_default=True, help=HELP["kl_coef"]),
    click.option("--entropy-coef", type=float, default=0.0, show_default=True, help=HELP["entropy_coef"]),
    click.option("--zero-variance-filter/--no-zero-variance-filter", default=False, show_default=True,
                 help=HELP["zero_variance_filter"]),
    click.option("--n-est", type=COUNT, default=0, show_default=True, help=HELP["n_est"]),
    click.option("--allocator", default="fixed", show_default=True, help=HELP["allocator"]),
    click.option("--objective", type=click.Choice(OBJECTIVES), default="pg", show_default=True,
                 help=HELP["objective"]),
    click.option("--k", type=int, default=4, show_default=True, help=HELP["k"]),
    click.option("--n-evals", type=int, default=None, help=HELP["n_evals"], cls=CodeDefaultOption,
                 code_default=engine_default("n_evals")),
    click.option("--d", type=COUNT, default=None, help=HELP["d"], cls=CodeDefaultOption,
                 code_default=engine_default("d")),
    click.option("--d-val", type=COUNT, default=None, help=HELP["d_val"], cls=CodeDefaultOption,
                 code_default=engine_default("d_val")),
    click.option("--device", default="cpu", show_default=True, help=HELP["device"]),
    click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
                 help=HELP["options"] + " Repeatable, e.g. --option K=8 --option share=0.5."),
]


def _config(**kw: Any) -> RunConfig:
    """RunConfig from click's keyword arguments (option names equal field names)."""
    kw["options"] = tuple(parse_option(o) for o in kw.get("options", ()))
    return RunConfig(**kw)


# ------------------------------------------------------------------------------------------------------ run
def run_summary(cfg: RunConfig, out: Any, wall_s: float) -> dict[str, Any]:
    """The `run --json` object: config, status and the last evaluation point."""
    table = out.table
    last = table.iloc[-1].to_dict() if len(table) else {}
    best = float(table["val_mean"].max()) if "val_mean" in table and len(table) else None
    return {
        "run_id": cfg.run_id,
        "status": out.status,
        "diverged_step": out.info.get("diverged_step"),
        "reason": out.info.get("reason"),
        "steps": cfg.steps,
        "rows": len(table),
        "wall_s": round(wall_s, 3),
        "best_val_mean": best,
        "final": last,
        "config": cfg.to_dict(),
    }


@click.command()
@click.option("--n", type=COUNT, default=8, show_default=True, help=HELP["n"])
@click.option("--bp", type=COUNT, default=32, show_default=True, help=HELP["bp"])
@click.option("--budget", type=COUNT, default=2**20, show_default="2^20",
              help=HELP["budget"] + " E.g. 4e6 or 2^22.")
@click.option("--seed", type=int, default=0, show_default=True, help=HELP["seed"])
@apply_options(_CONFIG_OPTIONS)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary of the run on stdout.")
@click.option("--out", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Also write the learning-curve table to FILE (.csv, .parquet or .jsonl).")
@click.option("--progress/--no-progress", default=True, show_default=True, help=PROGRESS_HELP)
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr (as --no-progress).")
def run(as_json: bool, out: Path | None, progress: bool, quiet: bool, **kw: Any) -> None:
    """Train one configuration to its budget and summarise it."""
    from studies.backends import get_backend
    from studies.files import TABLE_SUFFIXES, check_output_file
    from studies.io import save_table

    cfg = _config(**kw)
    adapter = get_backend(cfg.backend)
    adapter.validate(cfg)
    check_device(cfg)
    check_memory([cfg])
    if out is not None:  # before the run, so an unwritable --out never costs the work
        check_output_file(out, suffixes=TABLE_SUFFIXES, kind="table")
    t0 = time.perf_counter()
    result = adapter.run(cfg, progress=progress and not quiet)
    summary = run_summary(cfg, result, time.perf_counter() - t0)
    if out is not None:
        save_table(result.table, out)
    if as_json:
        emit_json(summary)
        return
    f = summary["final"]
    click.echo(f"{cfg.run_id}: {summary['status']}, m = {cfg.steps} steps of "
               f"{cfg.rollouts_per_step} rollouts, "
               f"{summary['wall_s']:.2f} s")
    if summary["status"] == DIVERGED:
        click.echo(f"  diverged at step {summary['diverged_step']}: {summary['reason']}")
    for col in ("compute", "train_mean", "val_mean", "val_best_k", "val_worst_k", "val_zero_frac"):
        if col in f:
            click.echo(f"  {col:>14} {f[col]:.6g}" if isinstance(f[col], float) else f"  {col:>14} {f[col]}")
    if out is not None:
        click.echo(f"  table written to {out}")


# ---------------------------------------------------------------------------------------------------- sweep
@click.command()
@click.argument("study", type=click.Choice(["n-vs-m", "fixed-batch", "joint", "allocators"]))
@click.option("--out", "out_dir", required=True, type=OutPath(file_okay=False, path_type=Path),
              help="Results directory (created; rerunning into it skips finished runs).")
@click.option("--n", type=COUNT_LIST, default="2^1..2^8", show_default=True,
              help="Rollouts per problem: a comma list or powers of two, e.g. 2,4,8 or 2^1..2^8.")
@click.option("--bp", type=COUNT_LIST, default=None,
              help="Problems per step: one value for n-vs-m (default 32), a list for joint.")
@click.option("--batch", type=COUNT_LIST, default=None, help="fixed-batch: values of bp * n, e.g. 256,1024.")
@click.option("--bmax", type=COUNT, default=None, help="joint: keep only bp * n <= BMAX (paper: 16384 Hard).")
@click.option("--allocators", "allocator_list", default=None,
              help="allocators: comma list of allocator specs run at --base-n beside the fixed-n grid, e.g. "
                   "knapsack,dynamic-sampling,skip-zero-var,schedule:double@0.25 (sandbox/allocators.py; "
                   "the llm backend runs fixed, knapsack, dynamic-sampling, skip-zero-var, schedule:double: "
                   "llm_backend/allocators.py).")
@click.option("--base-n", type=COUNT, default=None,
              help="allocators: group size of the allocator runs (default 8 if in --n, else its middle).")
@click.option("--budget", type=COUNT, default=2**20, show_default="2^20",
              help=HELP["budget"] + " E.g. 4e6 or 2^22.")
@click.option("--seeds", type=int, default=1, show_default=True, help="Repeat the grid over seeds 0..S-1.")
@apply_options(_CONFIG_OPTIONS)
@click.option("--jobs", type=int, default=None, help="Local worker processes (default: the number of cores).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local process pool, or one Ray task per run (GPU runs reserve a GPU).")
@click.option("--address", default=None, help="Ray cluster address (default: start a local Ray instance).")
@click.option("--ship-code", is_flag=True,
              help="ray: send this installation's studies/sandbox/llm_backend to the cluster's workers (Ray "
                   "runtime_env py_modules) instead of needing isocompute installed on every node.")
@click.option("--force", is_flag=True, help="Rerun runs that are already finished in the directory.")
@click.option("--progress/--no-progress", default=True, show_default=True, help=PROGRESS_HELP)
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr (as --no-progress).")
def sweep(study: str, out_dir: Path, n: list[int], bp: list[int] | None, batch: list[int] | None,
          bmax: int | None, allocator_list: str | None, base_n: int | None, budget: int, seeds: int,
          jobs: int | None, executor: str, address: str | None, ship_code: bool, force: bool, progress: bool,
          quiet: bool, **kw: Any) -> None:
    """Run a STUDY (n-vs-m, fixed-batch, joint or allocators) over seeds into a results directory."""
    from studies.executors import run_sweep
    from studies.files import check_output_dir
    from studies.io import other_experiment
    from studies.store import ResultStore
    from studies.sweeps import build_sweep

    check_sweep_size(seeds, n, bp, batch)
    jobs = check_jobs(jobs)
    alloc_n = base_n
    base_n = n[0] if n else 8
    base_bp = bp[0] if bp else 32
    base = _config(n=base_n, bp=base_bp, budget=max(budget, base_n * base_bp), seed=0, **kw)
    configs = build_sweep(study, base, n=n, bp=bp, batch=batch, bmax=bmax, seeds=seeds, budget=budget,
                          allocators=split_specs(allocator_list) if allocator_list else None,
                          base_n=alloc_n)
    check_configs(configs)
    if executor == "local":
        check_device(base)
        check_memory(configs)
    if ship_code and executor != "ray":
        raise StudiesError("--ship-code is for --executor ray")
    if executor == "ray":
        from studies.executors import check_ray_address

        check_ray_address(address)  # unreachable, or the token refused: one line before --out exists
    check_output_dir(out_dir)
    if mixed := other_experiment(out_dir, configs):
        click.echo(f"warning: {mixed}", err=True)
    with echo_warnings(), ResultStore(out_dir, study=study) as store:
        before = 0 if force else sum(store.is_finished(r) for r in {c.run_id for c in configs})
        try:
            s = run_sweep(configs, store, executor=executor, jobs=jobs, address=address, force=force,
                          progress=progress and not quiet, desc=study, ship_code=ship_code)
        except BaseException:  # an interrupt says what it kept (the root group prints it)
            set_interrupt_note(kept_note(store, configs, before, out_dir))
            raise
    click.echo(f"{study}: {s.total} runs ({s.done} run now, {s.skipped} already finished, "
               f"{len(s.diverged)} diverged, {len(s.failed)} failed) in {s.wall_s:.1f} s -> {out_dir}")
    for run_id in s.diverged:
        click.echo(f"warning: {run_id} diverged (kept in the manifest, left out of fits)", err=True)
    if s.failed:
        for run_id, err in s.failed.items():
            click.echo(f"error: {run_id} failed: {err}", err=True)
        sys.exit(1)


def kept_note(store: Any, configs: list[RunConfig], before: int, out_dir: Path) -> str:
    """What an interrupted sweep leaves: its finished runs in the store (`before` of them finished earlier),
    as the interrupt's line says it."""
    unique = {c.run_id: c for c in configs}
    kept = sum(store.is_finished(r) for r in unique)
    if kept == 0:
        return "no run had finished, nothing was kept"
    return (f"{kept} of {len(unique)} runs finished and kept in {out_dir} ({kept - before} of them now); "
            "rerun to resume")


# ------------------------------------------------------------------------------------------------ fit, plot
def _load(path: Path, columns: list[str], fmt: str = "auto", n: int | None = None, bp: int | None = None,
          metric: str | None = None):
    from studies.io import load_table, require_columns

    with echo_warnings():
        table = load_table(path, fmt=fmt, n=n, bp=bp, metric=metric)
    for col, v in (("n", n), ("bp", bp)):  # a plain table without the column: the flag fills it
        if v is not None and col not in table.columns:
            table[col] = v
    try:
        require_columns(table, columns, where=str(path))
    except StudiesError as e:
        flags = [f"--{c} VALUE" for c in ("n", "bp") if c in columns and c not in table.columns]
        if not flags:
            raise
        raise StudiesError(f"{e}; for a log that does not record it, pass {' / '.join(flags)} (one value, or "
                           "one per PATH)") from None
    return table


def resolve_metric(paths: tuple[Path, ...] | list[Path], metric: str | None, by: str = "n"
                   ) -> tuple[str, str | None]:
    """(--metric, or when it is not given the default of the runs' preset (studies.io.default_metric: the
    tabular preset reads train_mean); the note saying so, or None). The caller prints the note once its
    input has loaded (`say_note`), so an error always comes alone. --by must be a configuration column, not
    the compute axis or the metric."""
    from studies.io import default_metric

    why = None
    if metric is None:
        metric, why = default_metric(paths)
    if by in ("compute", "tokens", "m", metric):
        raise StudiesError(f"--by {by} is an axis or the metric, not a configuration column; use --by n, bp, "
                           "batch or another column that labels the runs")
    return metric, why


def say_note(note: str | None) -> None:
    """A `resolve_metric` note on stderr (nothing for None)."""
    if note:
        click.echo(f"note: {note}", err=True)


def _per_path(values: list[int] | None, paths: tuple[Path, ...], flag: str) -> list[int | None]:
    if not values:
        return [None] * len(paths)
    if len(values) == 1:
        return list(values) * len(paths)
    if len(values) == len(paths):
        return list(values)
    raise StudiesError(f"--{flag} takes one value or one per path ({len(paths)} paths), got {len(values)}")


def load_paths(paths: tuple[Path, ...], columns: list[str], fmt: str = "auto", n: list[int] | None = None,
               bp: list[int] | None = None, metric: str | None = None, by: str = "n", pool: bool = False,
               where: tuple[str, ...] = ()):
    """One table from several results directories / logs (per-path --n / --bp); run_ids made distinct.
    `where`: FIELD=V1,V2 selections, applied first (studies.io.select_runs). Runs whose configurations differ
    in more than the swept fields and `by` are refused unless `pool` (studies.io.check_poolable)."""
    import pandas as pd

    from studies.io import check_by_constant, check_given_once, check_not_copies, check_poolable, select_runs

    if not paths:
        raise StudiesError("give at least one PATH")
    check_given_once(paths)
    tables, seen, configs = [], set(), {}
    for p, ni, bi in zip(paths, _per_path(n, paths, "n"), _per_path(bp, paths, "bp"), strict=True):
        t = _load(p, columns, fmt=fmt, n=ni, bp=bi, metric=metric)
        own = dict(t.attrs.get("configs") or {})
        clash = set(t["run_id"].astype(str)) & seen
        if clash:
            check_not_copies(t, tables, clash, p)
            rename = {r: f"{r}#{len(tables) + 1}" for r in clash}
            t = t.assign(run_id=t["run_id"].astype(str).map(lambda r, m=rename: m.get(r, r)))
            own = {rename.get(r, r): c for r, c in own.items()}
        seen |= set(t["run_id"].astype(str))
        configs.update(own)
        tables.append(t)
    table = tables[0] if len(tables) == 1 else pd.concat(tables, ignore_index=True)
    table.attrs["configs"] = configs if len(configs) == table["run_id"].nunique() else {}
    if where:
        table = select_runs(table, parse_where(where))
    where = f"the runs of {paths[0]}" if len(paths) == 1 else f"the runs of {', '.join(map(str, paths))}"
    check_poolable(table, by=by, pool=pool, where=where)
    check_by_constant(table, by)
    models = {c.get("model") or "tabular" for c in configs.values() if c.get("backend", "sim") == "sim"}
    if len(models) == 1 and len(configs) == table["run_id"].nunique():
        table.attrs["model"] = next(iter(models))
    table.attrs.pop("configs", None)  # pandas deep-copies attrs on every operation: drop them once read
    return table


def parse_where(items: tuple[str, ...]) -> dict[str, list[str]]:
    """{FIELD: [values]} of --where FIELD=V1,V2 options (repeated: every one must hold)."""
    out: dict[str, list[str]] = {}
    for item in items:
        field, eq, values = item.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not eq or not field.strip() or not vals:
            raise StudiesError(f"--where takes FIELD=VALUE[,VALUE...], got {item!r}")
        out.setdefault(field.strip(), []).extend(vals)
    return out


_LOG_OPTIONS = [
    click.option("--format", "fmt", default="auto", show_default=True,
                 help="Input format: auto (sniff), csv (our table, wandb / TensorBoard CSV exports), trl "
                      "(trainer_state.json), verl (console log or file-logger JSONL), wandb, tensorboard."),
    click.option("--n", "n_flag", type=COUNT_LIST, default=None,
                 help="Rollouts per prompt of logs that do not record it: one value or one per PATH."),
    click.option("--bp", "bp_flag", type=COUNT_LIST, default=None,
                 help="Prompts per optimiser step of logs that do not record it: one value or one per PATH."),
    click.option("--pool", is_flag=True,
                 help="Pool runs whose configurations differ in more than the swept fields (n, bp, seed, "
                      "allocator, budget) and --by; refused by default (exit 2, naming the fields)."),
]


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--metric", default=None,
              help="Reward column, e.g. val_best_k, batch_reward (train rollouts), or a log's own key "
                   "(default: val_mean; train_mean for runs of the tabular preset, whose validation problems "
                   "never move).")
@click.option("--by", default="n", show_default=True, help="Column labelling the curves: n, bp, batch...")
@click.option("--bin-width", type=float, default=0.005, show_default=True,
              help="Reward bin of the record-breaking points (docs/PAPER.md Section 4).")
@apply_options(_LOG_OPTIONS)
@click.option("--where", "where", multiple=True, metavar="FIELD=V1,V2",
              help="Fit only the runs whose setting FIELD (a run config field or option, else a column) is "
                   "one of the values; repeat for several fields, e.g. --where dataset=easy --where "
                   "lr=5.62e-05.")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as one JSON object (docs/DESIGN.md).")
def fit(paths: tuple[Path, ...], metric: str | None, by: str, bin_width: float, fmt: str,
        n_flag: list[int] | None, bp_flag: list[int] | None, pool: bool, where: tuple[str, ...],
        as_json: bool) -> None:
    """Fit sigmoids per configuration, the frontier and n*(C) of results directories or logs.

    PATHS: results directories, CSV / Parquet / JSONL tables with at least run_id, compute, the --by column
    and the --metric column, TRL trainer_state.json files or run folders, verl logs, wandb / TensorBoard
    CSV exports. Several paths (runs of different n) become one table.
    """
    if not bin_width > 0:
        raise StudiesError(f"--bin-width must be positive, got {bin_width}")
    metric, note = resolve_metric(paths, metric, by)
    table = load_paths(paths, ["run_id", "compute", by, metric], fmt, n_flag, bp_flag, metric, by, pool,
                       where)
    say_note(note)
    path = paths[0] if len(paths) == 1 else ", ".join(map(str, paths))
    fit_report = import_attr("studies.fit.report", "fit_report")
    try:
        report = fit_report(table, metric=metric, by=by, bin_width=bin_width, model=table.attrs.get("model"),
                            lag=True)
    except ValueError as e:  # too few points, constant curves...: a property of the user's data
        raise StudiesError(f"cannot fit {path}: {e}") from None
    from studies.files import jsonable

    if as_json:
        emit_json(report)
    else:
        print_fit_report(jsonable(report), click.echo)
        for w in report.get("warnings") or []:
            click.echo(f"warning: {w}", err=True)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--metric", default=None, help="Reward column to plot (default: as for fit).")
@click.option("--by", default="n", show_default=True, help="Column that labels the curves.")
@apply_options(_LOG_OPTIONS)
@click.option("--out", type=OutPath(dir_okay=False, path_type=Path), default=None,
              help="Figure file (.png, .pdf, .svg); default: frontier.png in the results dir or beside PATH.")
def plot(paths: tuple[Path, ...], metric: str | None, by: str, fmt: str, n_flag: list[int] | None,
         bp_flag: list[int] | None, pool: bool, out: Path | None) -> None:
    """Quick figure of a sweep or of logs (as for fit): fitted curves with the frontier, and n*(C)."""
    from studies.files import FIGURE_SUFFIXES, check_output_file

    path = paths[0]
    if out is None:
        out = path / "frontier.png" if path.is_dir() else path.with_name(f"{path.stem}_frontier.png")
    check_output_file(out, suffixes=FIGURE_SUFFIXES, kind="figure", create=False)
    metric, note = resolve_metric(paths, metric, by)
    table = load_paths(paths, ["run_id", "compute", by, metric], fmt, n_flag, bp_flag, metric, by, pool)
    say_note(note)
    os.environ.setdefault("MPLBACKEND", "Agg")
    plot_frontier = import_attr("studies.fit.plots", "plot_frontier")
    frontier_fit = import_attr("studies.fit.frontier", "FrontierFit")
    try:
        ff = frontier_fit(metric=metric, by=by).fit(table)
        for w in ff.warnings_:  # the same warnings as `fit`
            click.echo(f"warning: {w}", err=True)
        title = plot_title(paths, metric, by, table)
        plot_frontier(table, metric, by, out, fit=ff, title=title, model=table.attrs.get("model"))
    except ValueError as e:
        raise StudiesError(f"cannot plot {path}: {e}") from None
    click.echo(f"wrote {out}")


def plot_title(paths: tuple[Path, ...], metric: str, by: str, table: Any) -> str:
    """`plot`'s figure title: what was read, how many runs, which metric."""
    what = str(paths[0]) if len(paths) == 1 else f"{len(paths)} paths"
    model = table.attrs.get("model")
    return (f"{what}: {metric} by {by}" + (f", {model} preset" if model else "")
            + f" ({table['run_id'].nunique()} runs)")


@click.command("plan")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--budget", required=True, help="Target budget C in rollouts, e.g. 4e6 or 2^22.")
@click.option("--metric", default=None,
              help="Reward column to maximise (default: val_mean; train_mean for the tabular preset).")
@click.option("--bp-max", type=int, default=None, help="Most problems per step you can afford (caps bp).")
@click.option("--max-compute", default=None,
              help="Use only pilot rows with compute <= this (e.g. 2^15): the pilots as if stopped there.")
@click.option("--bootstrap", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="Bootstrap resamples of runs (1..10000).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True,
              help="Seed of the bootstrap.")
@click.option("--warn-factor", type=float, default=None, cls=CodeDefaultOption,
              code_default=module_default("studies.fit.plan", "WARN_FACTOR"),
              help="Warn when the budget exceeds the pilots' largest compute by more than this factor.")
@click.option("--format", "fmt", default="auto", show_default=True,
              help="As for fit: auto, csv, trl, verl, wandb, tensorboard.")
@click.option("--n", "n_flag", default=None, help="As for fit: n of logs lacking it (per PATH).")
@click.option("--bp", "bp_flag", default=None, help="As for fit: bp of logs lacking it (per PATH).")
@click.option("--pool", is_flag=True, help="As for fit: pool runs whose configurations differ.")
@click.option("--lr-rule", type=click.Choice(PLAN_LR_RULES), default="sqrt", show_default=True,
              help="The plan's lr from the pilots' own at their batch: kept (constant) or times "
                   "sqrt(B / B_pilot).")
@click.option("--lr", "lr", type=float, default=None,
              help="The pilots' lr at their batch, for pilots that log none (default: their logged lr).")
@click.option("--emit", type=click.Choice(EMITS), default=None,
              help="Print the trainer's settings instead: a YAML GRPOConfig (trl) or Hydra overrides (verl) "
                   "on stdout, the plan on stderr; with --json under \"emit\".")
@click.option("--gpus", type=click.IntRange(1), default=1, show_default=True,
              help="GPUs of the verl job (--emit verl checks its batch divisibility against them).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
def plan(paths: tuple[Path, ...], budget: str, metric: str | None, bp_max: int | None,
         max_compute: str | None, bootstrap: int, seed: int, warn_factor: float | None, fmt: str,
         n_flag: str | None, bp_flag: str | None, pool: bool, lr_rule: str, lr: float | None,
         emit: str | None, gpus: int, as_json: bool) -> None:
    """Recommend n, bp and m for a budget from pilot runs (results directories or TRL / verl logs), with the
    learning rate under --lr-rule and, with --emit, the trainer's settings that run it."""
    from studies.fit.emit import render
    from studies.fit.plan import WARN_FACTOR, make_plan, print_plan

    if bootstrap < 0:
        raise StudiesError(f"--bootstrap must be >= 0, got {bootstrap}")
    if bp_max is not None and bp_max < 1:
        raise StudiesError(f"--bp-max must be positive, got {bp_max}")
    c = parse_count(budget)
    cap = None if max_compute is None else parse_count(max_compute)
    n_list = None if n_flag is None else parse_count_list(n_flag)
    bp_list = None if bp_flag is None else parse_count_list(bp_flag)
    metric, note = resolve_metric(paths, metric)
    table = load_paths(tuple(paths), ["run_id", "compute", "n", "bp", metric], fmt, n_list, bp_list, metric,
                       "n", pool)
    say_note(note)
    out = make_plan(table, c, metric=metric, bp_max=bp_max, max_compute=cap, bootstrap=bootstrap, seed=seed,
                    warn_factor=WARN_FACTOR if warn_factor is None else warn_factor,
                    progress=progress_lines("plan"), lr_rule=lr_rule, lr=lr)
    text = None
    if emit is not None:
        text, fields = render(out, emit, gpus)
        out["emit"] = {"trainer": emit, "fields": fields}
    if as_json:
        emit_json(out)
        return
    print_plan(out, lambda line: click.echo(line, err=text is not None))
    for w in out["warnings"]:
        click.echo(f"warning: {w}", err=True)
    if text is not None:
        click.echo(text)


# -------------------------------------------------------------------------------------------------- predict
@click.command("predict")
@click.argument("results_dir", required=False, type=click.Path(path_type=Path))
@click.option("--budget", type=COUNT, required=True, help="Target compute C in rollouts (4e6, 2^22).")
@click.option("--n", "n_grid", type=COUNT_LIST, default="2^1..2^8", show_default=True,
              help="Pilot grid of n (comma list or 2^a..2^b); with RESULTS_DIR the pilots' own n.")
@click.option("--bp", type=COUNT, default=32, show_default=True, help="Problems per step of the pilots.")
@click.option("--pilot-fraction", type=float, default=None, cls=CodeDefaultOption,
              code_default=module_default("studies.fit.predict", "PILOT_FRACTION"),
              help="Each pilot run spends at most this share of --budget.")
@click.option("--seeds", type=click.IntRange(1, 1000), default=4, show_default=True,
              help="Pilot seeds 0..S-1 per n.")
@click.option("--metric", default=None,
              help="Reward column the frontier maximises (default: val_mean; train_mean for the tabular "
                   "preset, whose validation problems never move).")
@click.option("--rule", type=click.Choice(PREDICT_RULES), default="signal", show_default=True,
              help="signal: zero-variance rule (closed form, module docstring); paper: the extrapolated "
                   "log2 n* sigmoid of the pilots' frontier.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the pilots run (resumable); default $ISOCOMPUTE_CACHE (or ~/.cache/isocompute)"
                   "/predict/<hash of the request>.")
@click.option("--jobs", type=int, default=None, help="Local worker processes.")
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as one JSON object.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
@apply_options(_CONFIG_OPTIONS)
def predict(results_dir: Path | None, budget: int, n_grid: list[int], bp: int, pilot_fraction: float | None,
            seeds: int, metric: str, rule: str, out_dir: Path | None, jobs: int | None, as_json: bool,
            progress: bool, **kw: Any) -> None:
    """Predict n*(C) up to --budget from pilot runs limited to --pilot-fraction of it: either run the pilots
    (--backend and the run options) or read them from RESULTS_DIR (a results directory or a log)."""
    import hashlib

    from isocompute.contract.cache import cache_root
    from studies.fit.predict import PILOT_FRACTION, pilot_configs, predict_from_table, run_configs
    from studies.io import preset_metric

    pilot_fraction = PILOT_FRACTION if pilot_fraction is None else pilot_fraction

    target = budget
    if results_dir is not None:
        metric, note = resolve_metric([results_dir], metric)
        table = load_paths((results_dir,), ["run_id", "compute", "n", metric], metric=metric)
        say_note(note)
        where = str(results_dir)
    else:
        if metric is None:
            metric = preset_metric(kw.get("model"), kw.get("backend") or "sim")
        ns = list(n_grid)
        base = _config(n=ns[0], bp=bp, budget=target, seed=0, **kw)
        cfgs, skipped = pilot_configs(base, ns, target, pilot_fraction, seeds)
        check_configs(cfgs)  # bad input fails before --out is created, and before any note
        if skipped:
            click.echo(f"note: n = {','.join(map(str, skipped))} left out (one step exceeds the pilot "
                       "budget)", err=True)
        if out_dir is None:
            key = hashlib.sha1("|".join(sorted(c.run_id for c in cfgs)).encode()).hexdigest()[:10]
            out_dir = cache_root() / "predict" / key
        table = run_configs(cfgs, out_dir, jobs, progress)
        where = str(out_dir)
    rep = predict_from_table(table, target, metric=metric, rule=rule)
    rep["pilot_dir"] = where
    if as_json:
        emit_json(rep)
        return
    click.echo(f"n*(C) up to {fmt_c(target)} by the {rep['rule']} rule from {rep['pilots']['runs']} "
               f"pilot runs (<= {rep['pilots']['fraction']:.3g} of the budget) in {where}")
    alt = rep["alternatives"]
    click.echo(f"{'compute':>12}  {'n*':>6}  {'signal':>6}  {'paper':>6}")
    for i, p in enumerate(rep["n_star"]):
        s = alt["signal"][i]["n"] if alt.get("signal") else "-"
        q = alt["paper"][i]["n"] if alt.get("paper") else "-"
        click.echo(f"{fmt_c(p['compute']):>12}  {p['n']:>6}  {s:>6}  {q:>6}")
    if rep.get("signal"):
        sp = rep["signal"]
        click.echo(f"signal rule: z* = {sp['z_star']:.3f}, C_z*(n) = e^{sp['a']:.3g} n^{sp['gamma']:.3g} "
                   f"({rep['status']['signal']})")
    click.echo(f"paper rule: {rep['status']['paper']}")
    for note in rep["certainty"]["notes"]:
        click.echo(f"note: {note}")


# ----------------------------------------------------------------------------------------------------- demo
@click.command()
@click.option("--out", "out_dir", type=OutPath(file_okay=False, path_type=Path),
              default=Path("results/demo"), show_default=True,
              help="Results directory; one sub-directory per preset (reruns resume).")
@click.option("--seeds", type=int, default=8, show_default=True, help="Seeds 0..S-1 per configuration.")
@click.option("--budget", type=COUNT, default=2**18, show_default="2^18", help=HELP["budget"])
@click.option("--jobs", type=int, default=None, help="Local worker processes (default: the number of cores).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bars on stderr.")
def demo(out_dir: Path, seeds: int, budget: int, jobs: int | None, progress: bool) -> None:
    """Main job: an n-vs-m study (bp = 32, n = 2..256) with the tabular and interference presets at the
    simulator's untuned constant lr, printing each n*(C) table and writing each frontier figure, then what
    the claims report finds under the paper's tuned recipe (docs/CLAIMS.json)."""
    from studies.executors import run_sweep
    from studies.files import check_output_dir, jsonable
    from studies.presets import CLAIMS_JSON, DEMO_BASE, DEMO_ROLES, demo_contrast, preset_lr, presets_for
    from studies.store import ResultStore
    from studies.sweeps import build_sweep

    check_sweep_size(seeds, [0] * 8)  # n = 2^1..2^8
    jobs = check_jobs(jobs)
    check_output_dir(out_dir)
    fit_report = import_attr("studies.fit.report", "fit_report")
    for model, metric, claim in DEMO_ROLES:
        base = RunConfig(backend="sim", dataset="easy", bp=32, budget=budget, **presets_for("sim")[model],
                         **DEMO_BASE)
        configs = build_sweep("n-vs-m", base, n=parse_count_list("2^1..2^8"), seeds=seeds)
        where = out_dir / model
        with echo_warnings(), ResultStore(where, study="n-vs-m") as store:
            s = run_sweep(configs, store, jobs=jobs, progress=progress, desc=model)
        if s.skipped:
            click.echo(f"note: {model}: reused {s.skipped} of {s.total} runs finished earlier in {where} "
                       "(another --out, or that folder deleted, recomputes them)", err=True)
        if s.failed:
            raise StudiesError(f"{len(s.failed)} {model} run(s) failed, e.g. {next(iter(s.failed.values()))}")
        table = _load(where, ["run_id", "compute", "n", metric])
        try:
            report = fit_report(table, metric=metric, by="n", model=model)
        except ValueError as e:
            raise StudiesError(f"cannot fit {where}: {e}") from None
        lr = preset_lr("sim", model)
        click.echo(f"\n== {model} ({len(configs)} runs, {metric}) at the simulator's constant lr {lr:g}, "
                   f"untuned: {claim}")
        print_fit_report(jsonable(report), click.echo, every=4)
        try:
            plot_frontier = import_attr("studies.fit.plots", "plot_frontier")
        except StudiesError:
            continue
        os.environ.setdefault("MPLBACKEND", "Agg")
        plot_frontier(table, metric, "n", where / "frontier.png", model=model,
                      title=f"demo: {model} preset, {metric} ({len(configs)} runs)")
        click.echo(f"figure: {where / 'frontier.png'}")
    import json

    summary = json.loads(CLAIMS_JSON.read_text()) if CLAIMS_JSON.exists() else None
    click.echo("")
    for line in demo_contrast(summary):
        click.echo(line)


COMMANDS = (run, sweep, fit, plot, plan, predict, demo)
"""The commands of this module; isocompute/cli.py attaches them to the root group."""
