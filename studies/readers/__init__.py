"""Readers of third-party training logs (TRL trainer_state.json, verl JSONL / console logs, wandb and
TensorBoard CSV exports), each mapping a log to the learning-curve table of docs/DESIGN.md.

`READERS` is the one registry `studies.io.load_table` consults: a literal table, so every reader is there as
soon as `studies.io` is imported, whatever was imported before. `--format auto` tries them in this order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from studies.readers import exports, trl, verl


class Reader(NamedTuple):
    """A log format: `sniff(path) -> bool` says whether `path` is in it; `read(path, n=None, bp=None)` maps it
    to the learning-curve table (n / bp: the caller's values for what the log cannot tell). `family` groups
    formats under one `--format` value (the wandb and TensorBoard CSV exports answer to `--format csv` as well
    as to their own names)."""

    name: str
    sniff: Callable[[Path], bool]
    read: Callable[..., pd.DataFrame]
    family: str | None = None


LOGS = ("a TRL trainer_state.json or run folder, a verl console log or JSONL, a wandb or TensorBoard CSV "
        "export")
"""The logs the READERS read, in words (what `fit` and `load_table` say they accept)."""

READERS: dict[str, Reader] = {r.name: r for r in (
    Reader("trl", trl.sniff, trl.read),
    Reader("verl", verl.sniff, verl.read),
    Reader("wandb", exports.sniff_wandb, exports.read_wandb, family="csv"),
    Reader("tensorboard", exports.sniff_tensorboard, exports.read_tensorboard, family="csv"),
)}
