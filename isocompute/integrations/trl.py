"""TRL's live side: `IsoComputeCallback`, a TrainerCallback that writes a GRPO run's learning-curve table
while it trains and records what each step was: its group size n, prompts bp and the rollouts spent so far
(`studies.readers.trl.LOGGED`), in every log entry and so in trainer_state.json, so the reader
(`studies.readers.trl`) needs no --n / --bp and a run resumed at another num_generations is recorded as a
schedule (each step with the n it had), never relabelled. With `IsoComputeGRPOTrainer`
(isocompute/integrations/trl_grpo.py) the trainer logs these counts itself, from its batches, and the
callback adds only the run's label. Importable without TRL or transformers: the callback class is built
from transformers' TrainerCallback only when it is asked for."""

from __future__ import annotations

import math
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from isocompute.integrations.allocation import segments_label
from studies.readers.trl import CALLBACK_NAME, LOGGED, Geometry, log_history_to_table


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

    A plain GRPOTrainer's steps are recorded from its GRPOConfig: `segments` holds one entry per geometry the
    run trained under ({"step": steps done when it began, "compute": rollouts spent by then, **geometry}); a
    resume at another geometry (read from the checkpoint's record) opens a new segment, and the run's label
    (`allocator`) becomes `n-schedule:...`. `allocator` set by IsoComputeGRPOTrainer means the trainer logs
    the counts itself.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = None if path is None else str(path)
        self.geometry: dict | None = None
        self.segments: list[dict] = []
        self.allocator: str | None = None
        """The run's label when a trainer that counts its own rollouts set it; None: a plain GRPOTrainer."""
        self.model = ""
        self.seed: int | None = None
        self.run_id = ""

    def state(self) -> dict:
        return {"args": {"path": self.path},
                "attributes": {"geometry": self.geometry, "segments": self.segments, "model": self.model,
                               "seed": self.seed, "run_id": self.run_id, "allocator": self.label()}}

    def label(self) -> str | None:
        """The run's `allocator` column: the trainer's label, else `fixed-n{n}` or, after a resume at another
        n, the schedule its segments make (segments_label)."""
        if self.allocator is not None:
            return self.allocator
        if not self.segments:
            return None
        return segments_label([(seg["step"], seg["n"]) for seg in self.segments], "steps")

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not hasattr(args, "num_generations"):
            raise ValueError("IsoComputeCallback needs a GRPO trainer (its args have no num_generations)")
        self.geometry = asdict(Geometry.from_args(args))
        self.segments = _saved_segments((state.stateful_callbacks or {}).get(CALLBACK_NAME))
        step = int(state.global_step)
        self.segments = [seg for seg in self.segments if seg["step"] < step or step == 0 and seg["step"] == 0]
        last = self.segments[-1] if self.segments else None
        if last is None or {k: last[k] for k in self.geometry} != self.geometry:
            self.segments.append({"step": step, "compute": self.compute_at(step), **self.geometry})
        self.seed = int(args.seed)
        cfg = getattr(model, "config", None)
        self.model = str(getattr(cfg, "_name_or_path", "") or "")
        self.run_id = Path(args.output_dir).name
        if self.path is None:
            self.path = str(Path(args.output_dir) / "isocompute.parquet")
        # trainer_state.json saved from now on (checkpoints, save_state) carries the geometry
        state.stateful_callbacks[CALLBACK_NAME] = self.state()

    def compute_at(self, step: int) -> float:
        """Rollouts a plain GRPOTrainer had generated after `step` optimiser steps, segment by segment."""
        seg = next((s for s in reversed(self.segments) if s["step"] <= step), None)
        if seg is None:
            return 0.0
        g = Geometry(**{k: seg[k] for k in Geometry.__dataclass_fields__})
        return float(seg["compute"] + g.compute(np.array([step - seg["step"]]))[0])

    def record(self, entry: dict) -> None:
        """Add n, bp and compute of the entry's step (LOGGED) to a plain GRPOTrainer's log entry."""
        if self.allocator is not None or "step" not in entry or "train_runtime" in entry:
            return
        step = int(entry["step"])
        seg = next((s for s in reversed(self.segments) if s["step"] < step or s["step"] == 0), None)
        if seg is None:
            return
        entry.setdefault(LOGGED["n"], seg["n"])
        entry.setdefault(LOGGED["bp"], seg["bp"])
        entry.setdefault(LOGGED["compute"], self.compute_at(step))

    def on_log(self, args, state, control, **kwargs):
        if state.log_history:
            self.record(state.log_history[-1])
        if state.is_world_process_zero:
            self.write(state.log_history)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.write(state.log_history)

    def table(self, log_history: list[dict]) -> pd.DataFrame:
        if self.geometry is None:
            raise RuntimeError("the callback has not seen on_train_begin yet")
        return log_history_to_table(log_history, Geometry(**self.geometry), self.run_id, model=self.model,
                                    seed=math.nan if self.seed is None else float(self.seed),
                                    allocator=self.label())

    def write(self, log_history: list[dict]) -> None:
        if not any("step" in e and "train_runtime" not in e for e in log_history):
            return
        from studies.io import save_table

        out = Path(self.path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
        save_table(self.table(log_history), tmp)
        os.replace(tmp, out)


def _saved_segments(saved) -> list[dict]:
    """The segments of a record the callback saved in a checkpoint's trainer_state.json (a record from before
    segments existed: its one geometry from step 0); [] when there is none."""
    if isinstance(saved, list):
        saved = saved[-1] if saved else None
    attrs = (saved or {}).get("attributes") or {}
    if attrs.get("segments"):
        return [dict(s) for s in attrs["segments"]]
    if attrs.get("geometry"):
        return [{"step": 0, "compute": 0.0, **attrs["geometry"]}]
    return []
