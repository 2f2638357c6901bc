"""What the log readers share: per-step records -> the learning-curve table (docs/DESIGN.md columns).

A framework logs dicts of metrics per optimiser step under its own key names; a reader gathers them into
{step: {key: value}} and a key map, and `build_table` names them in our vocabulary, adds the run geometry
(n, bp, batch, m) and reconstructs `compute` (cumulative rollouts) and `tokens` (cumulative generated tokens).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from isocompute.contract.columns import CURVE_COLUMNS
from studies.config import StudiesError

BASE_COLUMNS = ("run_id", *CURVE_COLUMNS)
"""The learning-curve columns (docs/DESIGN.md) every reader writes, NaN where its framework does not log them;
the framework's own numeric keys follow, unchanged, so `--metric eval_rewards/acc/mean` works too."""


def number(v) -> float:
    """A logged value as float: numbers, numeric strings, None -> nan (TRL writes NaN means as null)."""
    if v is None or isinstance(v, bool):
        return math.nan if v is None else float(v)
    if isinstance(v, int | float | np.integer | np.floating):
        return float(v)
    if isinstance(v, str):
        return parse_scalar(v)
    return math.nan


_WRAPPED = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")  # np.float64(0.5), tensor(0.5), float32(1e-3)


def parse_scalar(text: str) -> float:
    """A number as Python prints it (pprint of floats; numpy 2 reprs such as np.float64(0.25)); nan if not."""
    s = text.strip()
    m = _WRAPPED.match(s)
    if m:
        s = m.group(1).split(",")[0].strip()
    try:
        return float(s)
    except ValueError:
        return math.nan


def need_geometry(n: int | None, bp: int | None, source: str, n_hint: str, bp_hint: str) -> tuple[int, int]:
    """(n, bp), or a one-line StudiesError naming the flag(s) to pass and the framework setting they are."""
    missing = []
    if n is None:
        missing.append(f"--n ({n_hint})")
    if bp is None:
        missing.append(f"--bp ({bp_hint})")
    if missing:
        raise StudiesError(f"{source} does not record the rollouts per step; pass {' and '.join(missing)}")
    if int(n) < 1 or int(bp) < 1:
        raise StudiesError(f"--n and --bp must be positive, got n={n}, bp={bp}")
    return int(n), int(bp)


def merge_geometry(found: Mapping[str, int | None], given: Mapping[str, int | None], source: str
                   ) -> dict[str, int | None]:
    """The log's own n / bp where it has them, the caller's otherwise; a clash is an error naming both."""
    out = {}
    for key in ("n", "bp"):
        f, g = found.get(key), given.get(key)
        if f is not None and g is not None and int(f) != int(g):
            raise StudiesError(f"{source} records {key}={f} but --{key} {g} was passed; drop --{key}")
        out[key] = f if f is not None else g
    return out


def build_table(
    steps: Mapping[int, Mapping[str, float]],
    keymap: Mapping[str, str],
    *,
    run_id: str,
    backend: str,
    n: int | np.ndarray,
    bp: int | np.ndarray,
    compute: Callable[[np.ndarray], np.ndarray] | None = None,
    model: str = "",
    dataset: str = "",
    seed: float = math.nan,
    k: float = math.nan,
) -> pd.DataFrame:
    """One row per logged step (ascending). `keymap` {framework key: our column}; n and bp are the run's, or
    one per row (ascending steps) where the run records them per step; `compute(steps)` gives the
    cumulative rollouts after each optimiser step (default: step * bp * n, one generation batch per step).
    `tokens` = sum over logged steps of response_len x the rollouts generated since the previous one (the
    mean completion length of a logging window times its rollouts), interpolated in compute where a step
    logged no length (evaluation-only rows)."""
    idx = np.array(sorted(steps), dtype=float)
    rows = [steps[int(s)] for s in idx]
    raw = pd.DataFrame([{key: number(v) for key, v in r.items()} for r in rows])
    table = pd.DataFrame(index=range(len(idx)))
    for col in BASE_COLUMNS:
        table[col] = math.nan
    for key, col in keymap.items():
        if key in raw.columns:
            table[col] = raw[key].to_numpy(dtype=float)
    C = (idx * bp * n) if compute is None else np.asarray(compute(idx), dtype=float)
    table["run_id"], table["backend"], table["model"], table["dataset"] = run_id, backend, model, dataset
    table["seed"], table["n"], table["bp"], table["batch"] = seed, n, bp, n * bp
    table["m"], table["compute"] = idx.astype(int), C
    if np.isnan(table["k"].to_numpy(dtype=float)).all():
        table["k"] = k
    table["tokens"] = _tokens(C, table["response_len"].to_numpy(dtype=float))
    extra = raw[sorted(c for c in raw.columns if c not in table.columns)]  # key order differs between sources
    table = pd.concat([table, extra.reset_index(drop=True)], axis=1)
    for c in ("n", "bp", "batch", "m"):
        table[c] = table[c].astype(int)
    return table


def _tokens(C: np.ndarray, length: np.ndarray) -> np.ndarray:
    has = np.isfinite(length)
    if not has.any():
        return np.full(C.shape, np.nan)
    prev = np.concatenate([[0.0], C[has][:-1]])
    cum = np.cumsum(length[has] * (C[has] - prev))
    return np.interp(C, C[has], cum)


def files_under(root: Path, pattern: str, depth: int = 4) -> list[Path]:
    """Files matching `pattern` at most `depth` levels below `root` (sorted; hidden folders skipped)."""
    out = []
    for d in range(depth + 1):
        for p in root.glob("/".join(["*"] * d + [pattern])):
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts[:-1]):
                out.append(p)
    return sorted(set(out))
