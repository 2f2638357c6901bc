"""What a run outputs: the learning-curve table (one row per evaluation point, docs/DESIGN.md), the
per-problem pass@1 vectors, the per-step log, and `Curve`, the part of a run's state that becomes them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isocompute.contract.columns import CURVE_COLUMNS
from isocompute.contract.status import DONE
from llm_backend.config import LLMConfig

TABLE_COLUMNS = CURVE_COLUMNS
"""The learning-curve columns of the contract (isocompute.contract.columns), in its order."""

STEP_COLUMNS = ("reward", "entropy", "kl", "grad_norm", "response_len", "zero_var_frac")
"""Columns of a table row taken from the last step's log (NaN at step 0): the step log's names, but
`reward`, which the table calls batch_reward."""


@dataclass
class LLMResult:
    """Output of one run, shaped like sandbox.SimResult (docs/CONTRACTS.md) plus the per-step log."""

    config: LLMConfig
    table: dict[str, np.ndarray]
    pass1: dict[str, np.ndarray]
    steps: list[dict] = field(default_factory=list)
    status: str = DONE
    diverged_step: int | None = None
    reason: str | None = None
    final: dict[str, bytes] | None = None
    """The final state's checkpoint files (LLMConfig.keep_final; llm_backend.checkpoint.Checkpointer.files),
    else None."""

    def save(self, out_dir: str | Path) -> Path:
        """Write table.csv, steps.csv, pass1.csv (tidy) and config.json into out_dir."""
        import pandas as pd

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)

        def write(path: Path, text: str) -> None:  # atomic: a crash leaves the old file or the new one
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)

        write(out / "table.csv", pd.DataFrame(self.table).to_csv(index=False))
        write(out / "steps.csv", pd.DataFrame(self.steps).to_csv(index=False))
        rows = [
            {"compute": int(c), "split": "val", "problem": j, "pass1": float(p)}
            for c, vec in zip(self.pass1["compute"], self.pass1["val"], strict=True)
            for j, p in enumerate(vec)
        ]
        write(out / "pass1.csv", pd.DataFrame(rows).to_csv(index=False))
        write(
            out / "config.json",
            json.dumps(
                {
                    "config": self.config.to_dict(),
                    "status": self.status,
                    "diverged_step": self.diverged_step,
                    "reason": self.reason,
                },
                indent=1,
            ),
        )
        return out


@dataclass
class Curve:
    """The rows of the table so far, the step log and the pass@1 snapshots (validation problems, fixed train
    sample) of each row: the part of a checkpoint's state that is the run's output."""

    rows: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    snaps: list[list[float]] = field(default_factory=list)
    snaps_train: list[list[float]] = field(default_factory=list)

    def record(self, row: dict, last: dict | None, p1, p1_train) -> None:
        """One evaluation point: the row's own columns, the last step's (NaN before the first step) and the
        two pass@1 vectors."""
        from_step = {("batch_reward" if c == "reward" else c): last[c] if last else math.nan
                     for c in STEP_COLUMNS}
        self.rows.append({**row, **from_step})
        self.snaps.append([float(x) for x in p1])
        self.snaps_train.append([float(x) for x in p1_train])

    def result(self, cfg: LLMConfig, n_train: int, n_val: int, status=DONE, diverged_step=None,
               reason=None) -> LLMResult:
        """The LLMResult of these rows (n_train, n_val: the lengths of the two pass@1 vectors)."""
        table = {c: np.array([r[c] for r in self.rows]) for c in TABLE_COLUMNS}
        pass1 = {
            "compute": table["compute"].copy(),
            "train": np.array(self.snaps_train, dtype=np.float32).reshape(len(self.rows), n_train),
            "val": np.array(self.snaps, dtype=np.float32).reshape(len(self.rows), n_val),
        }
        return LLMResult(cfg, table, pass1, self.steps, status, diverged_step, reason)
