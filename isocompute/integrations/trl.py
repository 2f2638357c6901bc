"""TRL's live side: `IsoComputeCallback`, a TrainerCallback that writes a GRPO run's learning-curve table
while it trains and records the run's geometry (n, bp, ...) in trainer_state.json, so the reader
(`studies.readers.trl`) needs no --n / --bp. Importable without TRL or transformers: the callback class is
built from transformers' TrainerCallback only when it is asked for."""

from __future__ import annotations

import math
import os
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from studies.readers.trl import CALLBACK_NAME, Geometry, log_history_to_table


def __getattr__(name: str):
    # the callback subclasses transformers' TrainerCallback, imported only when the callback is asked for, so
    # that reading logs (and the isocompute CLI) never imports transformers
    if name != CALLBACK_NAME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from transformers import TrainerCallback
        from transformers.trainer_callback import ExportableState
    except ImportError as e:
        raise ImportError(f"IsoComputeCallback needs transformers (the trl extra): {e}") from None
    cls = type(CALLBACK_NAME, (_Callback, TrainerCallback, ExportableState),
               {"__doc__": _Callback.__doc__, "__module__": __name__})
    globals()[CALLBACK_NAME] = cls
    return cls


class _Callback:
    """Writes the learning-curve table of a TRL GRPO run while it trains (every log and at the end), so
    `isocompute fit` works on a run in progress; records the run's geometry in trainer_state.json too.

    path: .parquet / .csv / .jsonl file (default: <output_dir>/isocompute.parquet). Written to a temporary
    name and renamed, so a reader never sees half a file. Rebuilt from `state.log_history` each time, so it
    equals what `isocompute fit <output_dir>/checkpoint-N/trainer_state.json` reads.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = None if path is None else str(path)
        self.geometry: dict | None = None
        self.model = ""
        self.seed: int | None = None
        self.run_id = ""

    def state(self) -> dict:
        return {"args": {"path": self.path},
                "attributes": {"geometry": self.geometry, "model": self.model, "seed": self.seed,
                               "run_id": self.run_id}}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not hasattr(args, "num_generations"):
            raise ValueError("IsoComputeCallback needs a GRPO trainer (its args have no num_generations)")
        self.geometry = asdict(Geometry.from_args(args))
        self.seed = int(args.seed)
        cfg = getattr(model, "config", None)
        self.model = str(getattr(cfg, "_name_or_path", "") or "")
        self.run_id = Path(args.output_dir).name
        if self.path is None:
            self.path = str(Path(args.output_dir) / "isocompute.parquet")
        # trainer_state.json saved from now on (checkpoints, save_state) carries the geometry
        state.stateful_callbacks[CALLBACK_NAME] = self.state()

    def on_log(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.write(state.log_history)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.write(state.log_history)

    def table(self, log_history: list[dict]) -> pd.DataFrame:
        if self.geometry is None:
            raise RuntimeError("the callback has not seen on_train_begin yet")
        return log_history_to_table(log_history, Geometry(**self.geometry), self.run_id, model=self.model,
                                    seed=math.nan if self.seed is None else float(self.seed))

    def write(self, log_history: list[dict]) -> None:
        if not any("step" in e and "train_runtime" not in e for e in log_history):
            return
        from studies.io import save_table

        out = Path(self.path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
        save_table(self.table(log_history), tmp)
        os.replace(tmp, out)
