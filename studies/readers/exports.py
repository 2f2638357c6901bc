"""wandb and TensorBoard CSV exports of TRL / verl runs as learning-curve tables (`--format csv`).

- wandb panel export ("Download CSV" of a line plot): a step column ("Step", or the x-axis key such as
  train/global_step) and one column "<run name> - <key>" per run, with "__MIN" / "__MAX" companions
  (left out).
- wandb run history (`run.history().to_csv()`): a `_step` column and one column per key, one run per file.
- TensorBoard scalars ("Download CSV"): columns "Wall time,Step,Value", one file per (run, tag), named
  run-<run>-tag-<tag>.csv with "/" in the tag written as "_"; a folder of them is one table.
Keys are those of the framework under each logger: TRL through transformers' WandbCallback /
TensorBoardCallback (train/reward, eval/reward, train/frac_reward_zero_std, ...), verl as it logs them
(critic/score/mean, val-core/...). Exports carry no batch settings: --n and --bp are needed.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from studies.config import StudiesError
from studies.readers import trl, verl
from studies.readers.common import build_table, files_under, need_geometry

KEYMAP = {
    **{f"train/{k}": v for k, v in trl.KEYMAP.items() if not k.startswith("eval_")},
    "eval/reward": "val_mean",
    **verl.KEYMAP,
}
"""Logger key -> column; TensorBoard file names spell "/" as "_", matched through `_norm`."""

_TB_NAME = re.compile(r"^run-(.+)-tag-(.+)\.csv$")
_STEP_KEYS = ("train/global_step", "training/global_step", "Step", "_step", "step", "global_step")
N_HINT = "rollouts per prompt: TRL num_generations, verl actor_rollout_ref.rollout.n"
BP_HINT = "prompts per optimiser step: verl data.train_batch_size"


def _norm(key: str) -> str:
    return key.replace("/", "_")


def _header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return next(csv.reader(f), [])


def _kind(path: Path) -> str | None:
    if path.suffix.lower() != ".csv":
        return None
    head = _header(path)
    if head[:3] == ["Wall time", "Step", "Value"]:
        return "tensorboard"
    if any(" - " in h for h in head) and any(h in _STEP_KEYS for h in head):
        return "wandb"
    if "_step" in head and "run_id" not in head:
        return "wandb"
    return None


def sniff_wandb(path: Path) -> bool:
    return path.is_file() and _kind(path) == "wandb"


def sniff_tensorboard(path: Path) -> bool:
    if path.is_dir():
        return any(_kind(p) == "tensorboard" for p in files_under(path, "*.csv", 2))
    return _kind(path) == "tensorboard"


def _to_table(steps: dict[int, dict], run_id: str, backend: str, n, bp, source: str) -> pd.DataFrame:
    nn, bb = need_geometry(n, bp, source, N_HINT, BP_HINT)
    keymap = {}
    for key in {k for rec in steps.values() for k in rec}:
        for src, col in KEYMAP.items():
            if _norm(key) == _norm(src):
                keymap[key] = col
    # TensorBoard file names spell val-core/<source>/... as val-core_<source>_...
    val = ("val-core_", "val-aux_")
    tb_val = {s: {key.replace("_", "/"): v for key, v in rec.items() if key.startswith(val)}
              for s, rec in steps.items()}
    steps, k = verl._validation({s: {**rec, **tb_val[s]} for s, rec in steps.items()})
    keymap.update(val_mean="val_mean", val_best_k="val_best_k", val_worst_k="val_worst_k")
    return build_table(steps, keymap, run_id=run_id, backend=backend, n=nn, bp=bb, k=k)


def read_wandb(path: Path, n: int | None = None, bp: int | None = None) -> pd.DataFrame:
    df = pd.read_csv(path)
    step_col = next((c for c in _STEP_KEYS if c in df.columns), None)
    if step_col is None:
        raise StudiesError(f"{path}: no step column ({', '.join(_STEP_KEYS)})")
    per_run: dict[str, dict[int, dict]] = {}
    for col in df.columns:
        if col == step_col or col.endswith("__MIN") or col.endswith("__MAX"):
            continue
        run, sep, key = col.partition(" - ")
        if not sep:
            run, key = path.stem, col
        vals = pd.to_numeric(df[col], errors="coerce")
        for s, v in zip(df[step_col], vals, strict=True):
            if pd.notna(s) and pd.notna(v):
                per_run.setdefault(run, {}).setdefault(int(s), {})[key] = float(v)
    if not per_run:
        raise StudiesError(f"{path}: no numeric metric columns")
    return pd.concat([_to_table(st, run, "wandb", n, bp, str(path)) for run, st in sorted(per_run.items())],
                     ignore_index=True)


def read_tensorboard(path: Path, n: int | None = None, bp: int | None = None) -> pd.DataFrame:
    files = [path] if path.is_file() else [p for p in files_under(path, "*.csv", 2)
                                           if _kind(p) == "tensorboard"]
    per_run: dict[str, dict[int, dict]] = {}
    for f in files:
        m = _TB_NAME.match(f.name)
        run, tag = (m.group(1), m.group(2)) if m else (f.parent.name, f.stem)
        df = pd.read_csv(f)
        for s, v in zip(df["Step"], pd.to_numeric(df["Value"], errors="coerce"), strict=True):
            if pd.notna(v):
                per_run.setdefault(run, {}).setdefault(int(s), {})[tag] = float(v)
    if not per_run:
        raise StudiesError(f"no TensorBoard CSV export under {path}")
    tables = [_to_table(st, run, "tensorboard", n, bp, str(path)) for run, st in sorted(per_run.items())]
    return pd.concat(tables, ignore_index=True)
