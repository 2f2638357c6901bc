"""TRL GRPOTrainer runs as learning-curve tables: a reader of `trainer_state.json` (needs neither TRL nor
transformers). The live TrainerCallback that records a run's geometry is `isocompute.integrations.trl`.

Compute (TRL 1.16, trl/trainer/grpo_config.py `__post_init__` and grpo_trainer.py `_prepare_inputs`):
`per_device_train_batch_size` counts completions; one generation batch holds `generation_batch_size` =
per_device_train_batch_size x processes x steps_per_generation completions (steps_per_generation defaults
to gradient_accumulation_steps), i.e. generation_batch_size / num_generations prompts, and it is generated
once every steps_per_generation x num_iterations micro-steps. An optimiser step is gradient_accumulation_steps
micro-steps, so after `step` optimiser steps ceil(step x GA / (spg x num_iterations)) batches were generated.
With the defaults that is one batch per step: n = num_generations, bp = generation_batch_size / n,
compute = step x bp x n. `trainer_state.json` does not record these settings; a run with `IsoComputeCallback`
stores them in its `stateful_callbacks`, other runs need `--n` and `--bp`.

Logged keys (grpo_trainer.py `_generate_and_score_completions`, `log`): reward, reward_std,
frac_reward_zero_std, completions/mean_length, num_tokens (prompt + completion tokens), entropy, kl,
eval_* for evaluation, plus Trainer's step, epoch, learning_rate, grad_norm, loss.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.config import StudiesError
from studies.readers.common import build_table, files_under, merge_geometry, need_geometry, number

KEYMAP = {
    "reward": "batch_reward",
    "frac_reward_zero_std": "zero_var_frac",
    "eval_reward": "val_mean",
    "completions/mean_length": "response_len",
    "entropy": "entropy",
    "kl": "kl",
    "grad_norm": "grad_norm",
    "learning_rate": "lr",
    "epoch": "epoch",
}
"""TRL / Trainer log key -> learning-curve column (the raw keys stay as extra columns)."""

LOGGED = {"n": "isocompute/n", "bp": "isocompute/bp", "compute": "isocompute/compute",
          "rollouts_trained": "isocompute/rollouts_trained"}
"""Column -> the log key under which a run records it per optimiser step: the group size n and prompts bp of
the step, and the rollouts generated (compute) and trained so far. `IsoComputeGRPOTrainer` logs them as it
counts them from its batches; `IsoComputeCallback` adds them to a plain GRPOTrainer's log entries from the
geometry in force at each step (so a run resumed at another num_generations keeps what each step was)."""
STATE_NAME = "trainer_state.json"
CALLBACK_NAME = "IsoComputeCallback"
N_HINT = "GRPOConfig.num_generations"
BP_HINT = ("prompts per optimiser step = per_device_train_batch_size x processes x "
           "gradient_accumulation_steps / num_generations")


@dataclass(frozen=True)
class Geometry:
    """Rollouts of a GRPO run: n completions per prompt, bp prompts per generation batch, and how often a
    batch is generated (in optimiser steps: every spg x iterations / GA of them; 1 with TRL's defaults)."""

    n: int
    bp: int
    gradient_accumulation_steps: int = 1
    steps_per_generation: int = 1
    num_iterations: int = 1

    @classmethod
    def from_args(cls, args: Any) -> Geometry:
        """From a GRPOConfig (after its __post_init__, which resolves generation_batch_size)."""
        n = int(args.num_generations)
        gbs = int(args.generation_batch_size)
        if gbs % n:
            raise ValueError(f"generation_batch_size {gbs} is not a multiple of num_generations {n}")
        return cls(n=n, bp=gbs // n, gradient_accumulation_steps=int(args.gradient_accumulation_steps),
                   steps_per_generation=int(args.steps_per_generation),
                   num_iterations=int(getattr(args, "num_iterations", 1)))

    def compute(self, steps: np.ndarray) -> np.ndarray:
        """Cumulative rollouts generated after each optimiser step."""
        micro = np.asarray(steps, dtype=float) * self.gradient_accumulation_steps
        batches = np.ceil(micro / (self.steps_per_generation * self.num_iterations) - 1e-9)
        return batches * self.bp * self.n


def log_history_to_table(log_history: list[dict], geometry: Geometry, run_id: str, model: str = "",
                         seed: float = math.nan, allocator: str | None = None) -> pd.DataFrame:
    """The learning-curve table of a TRL `log_history`: one row per logged optimiser step, train and eval
    entries of a step merged; the end-of-training summary (train_runtime, train_loss) is left out.

    n, bp and compute come from the steps' own records (LOGGED) where the run has them, carried forward to a
    step that logged only an evaluation; steps before any record take `geometry`'s. `allocator` (the run's
    label: `fixed-n4`, `n-schedule:...`, an allocator spec) becomes a column when given."""
    steps: dict[int, dict] = {}
    for entry in log_history:
        if "step" not in entry or "train_runtime" in entry:
            continue
        steps.setdefault(int(entry["step"]), {}).update({k: v for k, v in entry.items() if k != "step"})
    if not steps:
        raise StudiesError(f"{run_id}: the TRL log has no logged steps yet")
    idx = np.array(sorted(steps), dtype=float)
    rec = {col: pd.Series([number(steps[int(s)].get(key)) for s in idx], dtype=float).ffill().to_numpy()
           for col, key in LOGGED.items()}
    n = np.where(np.isfinite(rec["n"]), rec["n"], geometry.n).astype(int)
    bp = np.where(np.isfinite(rec["bp"]), rec["bp"], geometry.bp).astype(int)
    C = np.where(np.isfinite(rec["compute"]), rec["compute"], geometry.compute(idx))
    table = build_table(steps, KEYMAP, run_id=run_id, backend="trl", n=n, bp=bp, compute=lambda _: C,
                        model=model, seed=seed)
    if np.isfinite(rec["rollouts_trained"]).any():
        table["rollouts_trained"] = rec["rollouts_trained"]
    if allocator:
        table["allocator"] = allocator
    return table


# ------------------------------------------------------------------------------------------------- reader
def sniff(path: Path) -> bool:
    """A trainer_state.json, or a folder holding some (runs, checkpoints)."""
    if path.is_dir():
        return bool(files_under(path, STATE_NAME))
    if path.name == STATE_NAME:
        return True
    if path.suffix.lower() != ".json" or path.stat().st_size > 200_000_000:
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.read(4096)
    return '"log_history"' in head or '"global_step"' in head


def _run_of(state_file: Path) -> Path:
    """The run folder of a trainer_state.json: its folder, or the one above a checkpoint-N folder."""
    d = state_file.parent
    return d.parent if d.name.startswith("checkpoint-") else d


def read(path: Path, n: int | None = None, bp: int | None = None) -> pd.DataFrame:
    """Learning-curve table of one trainer_state.json or of every run below a folder (per run, its latest
    checkpoint's file: log_history is cumulative)."""
    files = [path] if path.is_file() else files_under(path, STATE_NAME)
    if not files:
        raise StudiesError(f"no {STATE_NAME} under {path}")
    latest: dict[Path, tuple[int, Path]] = {}
    for f in files:
        state = _load_state(f)
        key = _run_of(f)
        step = int(state.get("global_step") or 0)
        if key not in latest or step > latest[key][0] or (step == latest[key][0] and f.parent == key):
            latest[key] = (step, f)
    tables = []
    for run_dir, (_, f) in sorted(latest.items()):
        if path.is_file():
            run_id = run_dir.name or f.stem
        else:
            run_id = str(run_dir.relative_to(path)) if run_dir != path else path.resolve().name
        tables.append(state_to_table(_load_state(f), run_id, n=n, bp=bp, source=str(f)))
    return pd.concat(tables, ignore_index=True)


def _load_state(f: Path) -> dict:
    try:
        text = f.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise StudiesError(f"cannot read {f}: {getattr(e, 'strerror', None) or e}") from None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as e:
        raise StudiesError(f"{f} is not a TRL trainer_state.json: it is not JSON ({e.msg} at line "
                           f"{e.lineno}, column {e.colno}); give --format csv for a table, or the run's "
                           "trainer_state.json") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise StudiesError(f"{f} is not a Trainer state file (no log_history list)")
    return state


def state_to_table(state: dict, run_id: str, n: int | None = None, bp: int | None = None,
                   source: str = STATE_NAME) -> pd.DataFrame:
    """Table of a loaded trainer_state.json; geometry from our callback's record there, else n / bp."""
    saved = (state.get("stateful_callbacks") or {}).get(CALLBACK_NAME)
    if isinstance(saved, list):
        saved = saved[-1]
    attrs = (saved or {}).get("attributes") or {}
    geo = attrs.get("geometry")
    g = merge_geometry({"n": (geo or {}).get("n"), "bp": (geo or {}).get("bp")}, {"n": n, "bp": bp}, source)
    if geo and g["n"] == geo["n"] and g["bp"] == geo["bp"]:
        geometry = Geometry(**geo)
    else:
        geometry = Geometry(*need_geometry(g["n"], g["bp"], source, N_HINT, BP_HINT))
    return log_history_to_table(state["log_history"], geometry, run_id, model=attrs.get("model") or "",
                                seed=float(attrs["seed"]) if attrs.get("seed") is not None else math.nan,
                                allocator=attrs.get("allocator"))
