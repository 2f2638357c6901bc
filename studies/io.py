"""Load learning-curve tables: a results directory of ours, or users' own logs (CSV / Parquet / JSONL).

DESIGN.md: divergence is data, not a silent curve, so diverged runs are left out of the table with a visible
warning that names them; runs that never finished (failed, killed) are left out the same way.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from studies.config import StudiesError


class LeftOutRunsWarning(UserWarning):
    """Some runs of a results directory are not in the loaded table (diverged or unfinished)."""


def _names(ids: list[str], most: int = 8) -> str:
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _finished_records(root: Path) -> dict[str, dict]:
    records = {}
    for p in sorted((root / "runs").glob("*.json")):
        try:
            rec = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("status") in ("done", "diverged") and "run_id" in rec:
            records[rec["run_id"]] = rec
    return records


# ------------------------------------------------------------------------------------------ reader registry
class Reader(NamedTuple):
    """A log format: `sniff(path) -> bool` says whether `path` is in it; `read(path, n=None, bp=None)` maps it
    to the learning-curve table (n / bp: the caller's values for what the log cannot tell)."""

    name: str
    sniff: Callable[[Path], bool]
    read: Callable[..., pd.DataFrame]
    family: str | None


READERS: dict[str, Reader] = {}
"""Readers of third-party logs, tried in registration order by `load_table(path, fmt="auto")`. studies cannot
import the packages that know those formats (DESIGN.md arrows), so they register here at import (TRL / verl /
wandb / TensorBoard: `isocompute.integrations`)."""

def register_reader(name: str, sniff: Callable[[Path], bool], read: Callable[..., pd.DataFrame],
                    family: str | None = None) -> None:
    """Register (or replace) the reader `name`; `family` groups formats under one `--format` value (the
    wandb and TensorBoard CSV exports answer to `--format csv` as well as to their own names)."""
    READERS[name] = Reader(name, sniff, read, family)


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
    if p.is_dir() and ((p / "manifest.json").exists() or (p / "runs").is_dir()) and fmt in ("auto", "csv"):
        return _load_dir(p, include_diverged, kind)
    reader = _pick_reader(p, fmt)
    if reader is None:
        if p.is_dir():
            known = "|".join(f for f in formats() if f != "auto")
            raise StudiesError(f"{p} is not a results directory (no manifest.json or runs/) and holds no log "
                               f"this version reads; pass --format {known}")
        return _read_plain(p)
    table = reader.read(p, n=n, bp=bp)
    if metric is not None and metric in table.columns:
        table = table.loc[table[metric].notna()].reset_index(drop=True)
        if table.empty:
            raise StudiesError(f"{p} ({reader.name} log) has no logged {metric}; columns with values: "
                               f"{', '.join(map(str, table.columns))}")
    return table


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
    raise StudiesError(f"unknown table format {suffix or '(none)'} of {p}; use .csv, .parquet or .jsonl")


def _load_dir(root: Path, include_diverged: bool, kind: str) -> pd.DataFrame:
    if not (root / "runs").is_dir() and not (root / "manifest.json").exists():
        raise StudiesError(f"{root} is not a results directory (no manifest.json or runs/)")
    records = _finished_records(root)
    manifest_runs: dict = {}
    if (root / "manifest.json").exists():
        try:
            manifest_runs = json.loads((root / "manifest.json").read_text()).get("runs", {})
        except json.JSONDecodeError:
            manifest_runs = {}
    diverged = sorted(r for r, rec in records.items() if rec["status"] == "diverged")
    unfinished = sorted(set(manifest_runs) - set(records))
    if diverged and not include_diverged:
        steps = {r: records[r].get("diverged_step") for r in diverged}
        shown = [f"{r} (step {steps[r]})" for r in diverged]
        warnings.warn(f"left out {len(diverged)} diverged run(s): {_names(shown)}", LeftOutRunsWarning,
                      stacklevel=2)
    if unfinished:
        warnings.warn(f"left out {len(unfinished)} unfinished run(s): {_names(unfinished)}",
                      LeftOutRunsWarning, stacklevel=2)
    keep = sorted(r for r, rec in records.items() if include_diverged or rec["status"] == "done")
    suffix = ".parquet" if kind == "table" else ".pass1.parquet"
    frames = [pd.read_parquet(root / "runs" / f"{r}{suffix}") for r in keep]
    if not frames:
        raise StudiesError(f"{root} holds no finished runs")
    return pd.concat(frames, ignore_index=True)


def require_columns(table: pd.DataFrame, columns: Iterable[str], where: str = "the table") -> None:
    """StudiesError naming every missing column (users bring their own logs)."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        have = ", ".join(map(str, table.columns))
        raise StudiesError(f"{where} lacks column(s) {', '.join(missing)}; it has {have}")


def save_table(table: pd.DataFrame, path: str | Path) -> None:
    """Write a table by extension: .csv, .parquet / .pq or .jsonl."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        table.to_csv(p, index=False)
    elif suffix in (".parquet", ".pq"):
        table.to_parquet(p, index=False)
    elif suffix in (".jsonl", ".json"):
        table.to_json(p, orient="records", lines=True)
    else:
        raise StudiesError(f"unknown table format {suffix or '(none)'} of {p}; use .csv, .parquet or .jsonl")
