"""Load learning-curve tables: a results directory of ours, or users' own logs (CSV / Parquet / JSONL).

docs/DESIGN.md: divergence is data, not a silent curve, so diverged runs are left out of the table with a
visible warning that names them; runs that never finished (failed, killed) or whose files fail verification
against their record (studies.results_dir.run_damage) are left out the same way. Users' own tables go through
`clean_external`: every dropped row is counted by cause, a run with a non-finite metric is left out whole.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from isocompute.contract.status import DIVERGED, DONE
from studies.config import StudiesError
from studies.files import atomic_write_table
from studies.readers import LOGS, READERS, Reader
from studies.results_dir import (
    MANIFEST,
    RUNS,
    finished_records,
    names_text,
    read_manifest,
    run_damage,
    run_file,
)


class LeftOutRunsWarning(UserWarning):
    """Some runs are not in the loaded table (diverged, unfinished, damaged, or non-finite metric values)."""


class DroppedRowsWarning(UserWarning):
    """Rows of a user's table that cannot be used (no run_id, non-numeric compute...), counted by cause."""


METRIC_COLUMNS = ("train_mean", "val_mean", "val_best_k", "val_worst_k", "val_zero_frac")
"""Reward columns checked for non-finite values when load_table is not told which metric matters."""


def formats() -> list[str]:
    """The values `load_table(fmt=...)` accepts."""
    names = ["auto", "csv", *READERS, *(r.family for r in READERS.values() if r.family)]
    return list(dict.fromkeys(names))


def load_table(path: str | Path, include_diverged: bool = False, kind: str = "table", fmt: str = "auto",
               n: int | None = None, bp: int | None = None, metric: str | None = None) -> pd.DataFrame:
    """The learning-curve table (kind="table") or pass@1 snapshots (kind="pass1") at `path`.

    A results directory yields its finished, non-diverged runs in run_id order (a LeftOutRunsWarning names
    the others); a .csv / .parquet / .pq / .jsonl / .json file with our column names is read as is; other
    logs go to the registered reader of `fmt` ("auto": the first whose sniff accepts `path`), which maps them
    to the table, using `n` / `bp` where the log cannot tell them. Logs record each metric at its own steps:
    with `metric`, rows of a reader's table where it is missing are left out (not logged there).
    """
    p = Path(path)
    if not p.exists():
        raise StudiesError(f"no such file or directory: {p}")
    if fmt not in formats():
        raise StudiesError(f"unknown --format {fmt!r}; use {', '.join(formats())}")
    if p.is_dir() and ((p / MANIFEST).exists() or (p / RUNS).is_dir()) and fmt in ("auto", "csv"):
        return _load_dir(p, include_diverged, kind)
    reader = _pick_reader(p, fmt)
    if reader is None:
        if p.is_dir():
            known = "|".join(f for f in formats() if f != "auto")
            raise StudiesError(f"{p} is not a results directory (no manifest.json or runs/) and holds no log "
                               f"this version reads; pass --format {known}")
        table = _read_plain(p)
    else:
        table = reader.read(p, n=n, bp=bp)
        if metric is not None and metric in table.columns:
            table = table.loc[table[metric].notna()].reset_index(drop=True)
            if table.empty:
                raise StudiesError(f"{p} ({reader.name} log) has no logged {metric}; columns with values: "
                                   f"{', '.join(map(str, table.columns))}")
    if kind != "table":
        return table
    table, notes = clean_external(table, metric=metric, where=str(p), sparse=reader is not None)
    for category, msg in notes:
        warnings.warn(msg, category, stacklevel=2)
    return table


def clean_external(table: pd.DataFrame, metric: str | None = None, where: str = "the table",
                   sparse: bool = False) -> tuple[pd.DataFrame, list[tuple[type[Warning], str]]]:
    """A user's learning-curve table made safe to fit, and the warnings to show: (category, message) pairs.

    Rows without a run_id, or whose compute / n / bp is not a number (or compute < 0, n or bp not a
    positive integer), are dropped and counted by cause in one DroppedRowsWarning. A run with any NaN or
    infinite value of the metric (`metric`, else every METRIC_COLUMNS column present) is left out whole,
    named in a LeftOutRunsWarning (docs/DESIGN.md: divergence is data, not a silent curve); values that are
    not
    numbers at all drop their rows. A run_id with two values of n or bp is an error naming it: it would
    otherwise be fitted as one fake curve; unless its `allocator` column names a schedule (not `fixed-...`),
    whose steps record the n and bp they had (a TRL run resumed at another n; `check_by_constant` keeps it
    off a curve per n). `sparse`: a reader's table of a third-party log, where a missing
    metric value means "not logged at that step" rather than NaN (only infinities then leave a run out).
    Registered readers return their raw table and load_table passes it through here.
    """
    notes: list[tuple[type[Warning], str]] = []
    if table.empty or "run_id" not in table.columns:
        return table, notes
    t = table.reset_index(drop=True)
    total = len(t)
    bad = pd.Series(False, index=t.index)
    causes: dict[str, int] = {}

    def drop(mask: pd.Series, cause: str) -> None:
        nonlocal bad
        new = mask & ~bad
        if new.any():
            causes[cause] = causes.get(cause, 0) + int(new.sum())
            bad |= new

    drop(t["run_id"].isna() | (t["run_id"].astype(str).str.strip() == ""), "no run_id")
    numeric: dict[str, pd.Series] = {}
    for col in ("compute", "n", "bp"):
        if col not in t.columns:
            continue
        v = pd.to_numeric(t[col], errors="coerce").astype(float)
        drop(v.isna() & t[col].notna(), f"non-numeric {col}")
        drop(~np.isfinite(v), f"missing or infinite {col}")
        if col == "compute":
            drop(v < 0, "negative compute")
        else:
            drop((v < 1) | (v != np.floor(v)), f"{col} not a positive integer")
        numeric[col] = v
    metrics = [metric] if metric is not None else list(METRIC_COLUMNS)
    metrics = [m for m in metrics if m in t.columns and m not in numeric]
    nonfinite = pd.Series(False, index=t.index)
    for m in metrics:
        v = pd.to_numeric(t[m], errors="coerce").astype(float)
        drop(v.isna() & t[m].notna(), f"non-numeric {m}")
        nonfinite |= np.isinf(v) if sparse else ~np.isfinite(v) & ~(v.isna() & t[m].notna())
        numeric[m] = v
    for col, v in numeric.items():
        if not pd.api.types.is_numeric_dtype(t[col]) or pd.api.types.is_bool_dtype(t[col]):
            t[col] = v  # text or mixed columns become numbers; numeric ones keep their dtype
    t = t.loc[~bad].copy()
    for col in ("compute", "n", "bp"):
        if col in numeric and len(t) and t[col].dtype.kind == "f" and (t[col] == np.floor(t[col])).all():
            t[col] = t[col].astype(np.int64)
    if causes:
        shown = ", ".join(f"{k} with {c}" for c, k in causes.items())
        notes.append((DroppedRowsWarning, f"dropped {int(bad.sum())} of {total} row(s) of {where}: {shown}"))
    nonfinite = nonfinite.loc[t.index]
    if nonfinite.any():
        runs = sorted(map(str, t.loc[nonfinite, "run_id"].unique()))
        counts = nonfinite.groupby(t["run_id"].astype(str)).sum()
        shown = [f"{r} ({int(counts[r])} row(s))" for r in runs]
        what = metric or "/".join(metrics)
        notes.append((LeftOutRunsWarning, f"left out {len(runs)} run(s) of {where} with NaN or infinite "
                                          f"{what} values (diverged?): {names_text(shown)}"))
        t = t.loc[~t["run_id"].astype(str).isin(runs)]
    scheduled = scheduled_runs(t)
    for col in ("n", "bp"):
        if col in t.columns and len(t):
            k = t.groupby(t["run_id"].astype(str))[col].nunique()
            k = k[~k.index.isin(scheduled)]
            if (k > 1).any():
                r = str(k[k > 1].index[0])
                vals = sorted(t.loc[t["run_id"].astype(str) == r, col].unique().tolist())
                more = f" (and {int((k > 1).sum()) - 1} more run_ids)" if (k > 1).sum() > 1 else ""
                shown = ", ".join(map(str, vals))
                raise StudiesError(f"run_id {r} of {where} has {len(vals)} values of {col} ({shown}){more}: "
                                   "one run_id must be one configuration")
    if t.empty:
        raise StudiesError(f"{where} has no usable rows left ({total} read)")
    if not sparse and "compute" in t.columns:
        t, repeated = _without_repeats(t, metrics, where)
        if repeated:
            notes.append((DroppedRowsWarning, f"dropped {repeated} repeated row(s) of {where} (a run_id and "
                                              "compute given twice with the same values)"))
    return t.reset_index(drop=True), notes


def _without_repeats(t: pd.DataFrame, metrics: list[str], where: str) -> tuple[pd.DataFrame, int]:
    """A user's table without repeats of a (run_id, compute) row, and how many were dropped. Two rows of one
    run at one compute that disagree on a metric are an error (one line naming them): which is the run's
    cannot be known, and keeping both would fit a curve that never was (a log appended to twice, two runs
    under one name)."""
    runs = t["run_id"].astype(str)
    cols = [m for m in metrics if m in t.columns]
    if cols:
        spread = t.groupby([runs, t["compute"]])[cols].nunique(dropna=False)
        conflict = spread[(spread > 1).any(axis=1)]
        if len(conflict):
            r, c = conflict.index[0]
            m = next(col for col in cols if conflict.iloc[0][col] > 1)
            vals = sorted(t.loc[(runs == r) & (t["compute"] == c), m].unique().tolist())
            shown = " and ".join(f"{v:.6g}" for v in vals[:3])
            raise StudiesError(f"{where} has {len(conflict)} conflicting duplicate row(s), e.g. run_id {r} "
                               f"at compute {c} with {m} {shown}: keep one row per run_id and compute")
    repeated = pd.DataFrame({"run_id": runs, "compute": t["compute"]}).duplicated()
    return t.loc[~repeated], int(repeated.sum())


def scheduled_runs(table: pd.DataFrame) -> set[str]:
    """run_ids whose one `allocator` value is a schedule or an allocator, not `fixed-n...`: their n and bp
    may change from step to step."""
    if "allocator" not in table.columns or "run_id" not in table.columns:
        return set()
    labels = table.groupby(table["run_id"].astype(str))["allocator"].agg(lambda v: set(v.astype(str)))
    return {r for r, v in labels.items() if len(v) == 1 and not next(iter(v)).startswith("fixed")}


def check_by_constant(table: pd.DataFrame, by: str) -> None:
    """StudiesError (one line) when a run's `by` value changes within the run (an n schedule): one run is
    one curve, and splitting it by n would credit the later n with what the earlier n trained."""
    if by not in table.columns or "run_id" not in table.columns or table.empty:
        return
    k = table.groupby(table["run_id"].astype(str))[by].nunique()
    if (k > 1).any():
        r = str(k[k > 1].index[0])
        vals = ", ".join(map(str, sorted(table.loc[table["run_id"].astype(str) == r, by].unique().tolist())))
        label = table.loc[table["run_id"].astype(str) == r, "allocator"].iloc[0] \
            if "allocator" in table.columns else "a schedule"
        raise StudiesError(f"run {r} changes {by} within the run ({vals}: {label}); one run is one curve: "
                           f"fit it --by allocator")


def _pick_reader(p: Path, fmt: str) -> Reader | None:
    if fmt in READERS:
        return READERS[fmt]
    candidates = [r for r in READERS.values() if fmt == "auto" or r.family == fmt]
    for r in candidates:
        try:
            if r.sniff(p):
                return r
        except (OSError, ValueError):
            continue
    if fmt not in ("auto", "csv"):
        raise StudiesError(f"{p} is not a {fmt} log")
    return None


def _read_plain(p: Path) -> pd.DataFrame:
    """A table file with our column names."""
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(p)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(p)
        if suffix in (".jsonl", ".json"):
            return pd.read_json(p, lines=True)
    except (ValueError, OSError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise StudiesError(f"cannot read {p}: {why}") from None
    known = "|".join(f for f in formats() if f not in ("auto", "csv"))
    raise StudiesError(f"cannot read {p}: not a table (.csv, .parquet, .jsonl) and not a log this version "
                       f"recognises ({LOGS}); if it is such a log, say which with --format {known}")


def _load_dir(root: Path, include_diverged: bool, kind: str) -> pd.DataFrame:
    if not (root / RUNS).is_dir() and not (root / MANIFEST).exists():
        raise StudiesError(f"{root} is not a results directory (no manifest.json or runs/)")
    records = finished_records(root)
    manifest = read_manifest(root)
    if manifest is None:
        warnings.warn(f"{root / MANIFEST} is damaged; using the run records (a sweep into {root} "
                      "rebuilds it)", LeftOutRunsWarning, stacklevel=3)
        manifest = {}
    manifest_runs = manifest.get("runs", {})
    damaged = {r: why for r, rec in records.items() if (why := run_damage(root / RUNS, rec)) is not None}
    if damaged:
        shown = [f"{r} ({why})" for r, why in damaged.items()]
        warnings.warn(f"left out {len(damaged)} damaged run(s) (rerun the sweep to repair them): "
                      f"{names_text(shown)}", LeftOutRunsWarning, stacklevel=3)
        records = {r: rec for r, rec in records.items() if r not in damaged}
    diverged = sorted(r for r, rec in records.items() if rec["status"] == DIVERGED)
    unfinished = sorted(set(manifest_runs) - set(records) - set(damaged))
    if diverged and not include_diverged:
        steps = {r: records[r].get("diverged_step") for r in diverged}
        shown = [f"{r} (step {steps[r]})" for r in diverged]
        warnings.warn(f"left out {len(diverged)} diverged run(s): {names_text(shown)}", LeftOutRunsWarning,
                      stacklevel=2)
    if unfinished:
        warnings.warn(f"left out {len(unfinished)} unfinished run(s): {names_text(unfinished)}",
                      LeftOutRunsWarning, stacklevel=2)
    keep = sorted(r for r, rec in records.items() if include_diverged or rec["status"] == DONE)
    frames = [pd.read_parquet(run_file(root / RUNS, r, kind)) for r in keep]
    if not frames:
        raise StudiesError(f"{root} holds no finished runs")
    table = pd.concat(frames, ignore_index=True)
    table.attrs["configs"] = {r: records[r].get("config") or {} for r in keep}  # for check_poolable
    if kind == "table" and "n" in table.columns:
        # runs stored before the allocator column existed have none; all of them are fixed-n runs
        fixed = "fixed-n" + table["n"].astype("int64").astype(str)
        table["allocator"] = table["allocator"].fillna(fixed) if "allocator" in table.columns else fixed
    return table


POOLABLE = ("n", "bp", "seed", "problem_seed", "allocator", "budget", "n_evals")
"""RunConfig fields in which runs pooled into one fit may differ: the fields sweeps vary (the grid, its
seeds, the allocator column), the budget (a shorter run is the same curve stopped earlier) and the
evaluation schedule. Runs that differ in anything else (model, dataset, lr, objective...) are other
experiments: one frontier through them means nothing."""


DEFAULT_METRIC = "val_mean"
PRESET_METRICS = {("sim", "tabular"): "train_mean"}
"""Default reward column per (backend, policy preset) where val_mean means nothing: the tabular preset's
validation problems share no parameters with the training problems, so its val_mean never moves and the
claim (small n wins) is read on the training problems (docs/PAPER.md Section 5.1; `isocompute demo`)."""


def preset_metric(model: str | None, backend: str = "sim") -> str:
    """The default metric of runs of `model` on `backend` (None: the simulator's default preset, tabular)."""
    if backend == "sim" and model is None:
        model = "tabular"
    return PRESET_METRICS.get((backend, str(model)), DEFAULT_METRIC)


def default_metric(paths: Iterable[str | Path]) -> tuple[str, str | None]:
    """(metric, why) for commands run without --metric: the preset default of the runs in results
    directories (read from their manifests) when every run agrees on one, else val_mean; `why` is a note
    for the user when the default is not val_mean."""
    found: set[str] = set()
    for path in paths:
        p = Path(path)
        if not (p.is_dir() and (p / MANIFEST).exists()):
            found.add(DEFAULT_METRIC)
            continue
        runs = (read_manifest(p) or {}).get("runs", {})
        for entry in runs.values():
            cfg = entry.get("config") or {}
            found.add(preset_metric(cfg.get("model"), cfg.get("backend", "sim")))
    if len(found) == 1 and (m := next(iter(found))) != DEFAULT_METRIC:
        return m, (f"metric {m}: the default of these runs' preset (the tabular preset's validation problems "
                   f"never move); pass --metric to choose another")
    return DEFAULT_METRIC, None


def check_poolable(table: pd.DataFrame, by: str = "n", pool: bool = False, where: str = "the runs") -> None:
    """StudiesError (one line naming the fields) when the runs of `table` differ in a configuration field
    other than POOLABLE and `by`, unless `pool`. The configurations are the run records of results
    directories (`table.attrs["configs"]`, {run_id: config}); for other tables, the columns named like
    RunConfig fields whose value is constant within every run (a logged lr schedule is not a config)."""
    if pool:
        return
    from studies.config import RunConfig

    allowed = set(POOLABLE) | {by}
    configs = table.attrs.get("configs") or {}
    values: dict[str, set[str]] = {}
    if configs:
        ids = set(table["run_id"].astype(str)) if "run_id" in table.columns else set(configs)
        values = config_values({rid: c for rid, c in configs.items() if rid in ids}, allowed)
    elif "run_id" in table.columns:  # a user's table: config columns constant within each run
        runs = table["run_id"].astype(str)
        for f in RunConfig.field_help():
            if f in table.columns and f not in allowed:
                col = table[f]
                if (col.groupby(runs).nunique(dropna=False) > 1).any():
                    continue  # it changes within a run (a logged lr schedule...): not a configuration
                values[f] = set(map(repr, col.dropna().unique().tolist()))
    if shown := differences_text(values):
        raise StudiesError(f"{where} differ in {shown}: they are different experiments; fit them one at a "
                           f"time, or pass --by FIELD to compare them, or --pool to pool them anyway")


def config_values(configs: dict[str, dict], allowed: set[str]) -> dict[str, set[str]]:
    """{field: the reprs of its values} over run configurations ({run_id: RunConfig.to_dict()}), fields in
    `allowed` left out; each backend option as "option KEY", "(unset)" where a run lacks it."""
    values: dict[str, set[str]] = {}
    for cfg in configs.values():
        for key, v in cfg.items():
            if key == "options":
                for ok, ov in (v or {}).items():
                    values.setdefault(f"option {ok}", set()).add(repr(ov))
            elif key not in allowed:
                values.setdefault(key, set()).add(repr(v))
    keys = {k for c in configs.values() for k in (c.get("options") or {})}
    for k in keys:  # an option set on some runs only differs from the runs without it
        if any(k not in (c.get("options") or {}) for c in configs.values()):
            values.setdefault(f"option {k}", set()).add("(unset)")
    return values


def differences_text(values: dict[str, set[str]]) -> str:
    """The fields of `config_values` with more than one value, as "lr: 0.1 vs 0.2; ..." ("" when none)."""
    def said(v: str) -> str:
        return {"None": "unset (the backend's default)", "(unset)": "unset"}.get(v, v)

    differ = {k: sorted(v) for k, v in values.items() if len(v) > 1}
    return "; ".join(f"{k}: {' vs '.join(map(said, v[:4]))}{' vs ...' if len(v) > 4 else ''}"
                     for k, v in differ.items())


def other_experiment(root: str | Path, configs: list) -> str | None:
    """What to warn about, in one line, when results directory `root` holds runs of another experiment than
    `configs` (RunConfigs about to be swept into it): runs whose configurations differ from the new ones in
    more than the swept fields (POOLABLE), which `fit` then reads apart only with --where (or compares with
    --by). None for a directory without a readable manifest or with the same experiment (a resumed or
    extended sweep). A warning, not a refusal: a store may hold several experiments on purpose (a study's
    lr grid)."""
    manifest = read_manifest(Path(root)) if Path(root).is_dir() else None
    old = {rid: e["config"] for rid, e in ((manifest or {}).get("runs") or {}).items()
           if isinstance(e.get("config"), dict)}
    if not old:
        return None
    new = {c.run_id: c.to_dict() for c in configs}
    shown = differences_text(config_values({**old, **new}, set(POOLABLE)))
    if not shown:
        return None
    return (f"{root} holds {len(old)} run(s) of another experiment (they differ from this sweep in {shown}); "
            "fit will read them apart only with --where FIELD=VALUE (or compare them with --by FIELD): "
            "Ctrl-C now and choose another --out if that is not what you meant")


def check_given_once(paths: Iterable[str | Path]) -> None:
    """StudiesError (one line) when one PATH is given twice, however written (`runs/a runs/a`, `runs/a
    ./runs/a`): its runs would count twice in the fit, as if they were more seeds."""
    seen: dict[Path, str | Path] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in seen:
            also = "" if str(seen[key]) == str(p) else f" (as {seen[key]} and {p})"
            raise StudiesError(f"{seen[key]} is given twice{also}: its runs would count twice; give each "
                               "PATH once")
        seen[key] = p


def check_not_copies(table: pd.DataFrame, earlier: list[pd.DataFrame], ids: Iterable[str],
                     where: str | Path) -> None:
    """StudiesError (one line) when a run of `table` (read from `where`) is a run an earlier table already
    holds: the same run_id with the same rows (a copied results directory or log), which would count twice.
    Runs that only share a name (two logs that each call their run "run") differ in their rows; the caller
    keeps those apart by renaming them."""
    for r in sorted(ids):
        mine = _rows_of(table, r)
        for other in earlier:
            theirs = _rows_of(other, r)
            common = sorted(set(mine.columns) & set(theirs.columns))
            if len(theirs) and mine[common].equals(theirs[common]):
                raise StudiesError(f"run {r} of {where} is also in an earlier PATH with the same rows (a "
                                   "copy?): it would count twice; give each run once")


def _rows_of(table: pd.DataFrame, run_id: str) -> pd.DataFrame:
    rows = table.loc[table["run_id"].astype(str) == run_id]
    return rows.sort_values("compute").reset_index(drop=True) if "compute" in rows.columns else rows


def select_runs(table: pd.DataFrame, where: dict[str, list[str]]) -> pd.DataFrame:
    """The rows of the runs whose value of every FIELD in `where` is one of its values (`fit --where`: one
    experiment of a store that holds several, e.g. one dataset and lr of a study with tuning seeds).

    A run's value is its record's config field (or option) in a results directory
    (`table.attrs["configs"]`), else its column's value, which must be constant within the run (a logged lr
    schedule is not a setting to select on). Values compare as numbers where both parse as one (5.62e-05
    selects 0.0000562), else as text ("None" selects an unset field). StudiesError (one line) when a field is
    unknown or nothing is selected."""
    configs = table.attrs.get("configs") or {}
    runs = table["run_id"].astype(str)
    keep = np.ones(len(table), dtype=bool)
    missing = object()
    for field, values in where.items():
        in_configs = any(field in c or field in (c.get("options") or {}) for c in configs.values())
        if in_configs:
            per_run = {r: c.get(field, (c.get("options") or {}).get(field, missing))
                       for r, c in configs.items()}
        elif field in table.columns:
            col = table[field]
            if (col.groupby(runs).nunique(dropna=False) > 1).any():
                raise StudiesError(f"--where {field}: it changes within a run, so it selects no runs")
            per_run = col.groupby(runs).first().to_dict()
        else:
            raise StudiesError(f"--where {field}: no run setting or column of that name")
        ok = {r: v is not missing and any(_same_value(v, w) for w in values) for r, v in per_run.items()}
        keep &= runs.map(ok).fillna(False).to_numpy(dtype=bool)
    if not keep.any():
        said = " ".join(f"{f}={','.join(v)}" for f, v in where.items())
        raise StudiesError(f"--where {said} selects no run")
    out = table.loc[keep].reset_index(drop=True)
    chosen = set(runs[keep])
    out.attrs["configs"] = {r: c for r, c in configs.items() if r in chosen}
    return out


def _same_value(v, text: str) -> bool:
    """Whether a run's setting `v` is the value written `text` (numbers compare as numbers)."""
    try:
        return bool(np.isclose(float(v), float(text), rtol=1e-9, atol=0.0))
    except (TypeError, ValueError):
        return str(v) == text


def require_columns(table: pd.DataFrame, columns: Iterable[str], where: str = "the table") -> None:
    """StudiesError naming every missing column (users bring their own logs)."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        have = ", ".join(map(str, table.columns))
        raise StudiesError(f"{where} lacks column(s) {', '.join(missing)}; it has {have}")


def save_table(table: pd.DataFrame, path: str | Path) -> None:
    """Write a table by extension: .csv, .parquet / .pq or .jsonl (atomically: studies.files)."""
    atomic_write_table(Path(path), table)
