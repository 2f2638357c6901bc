"""Declarative description of what each figure needs: studies (kind, preset, dataset, grid, budget, seeds).

A figure module declares `STUDIES` as `StudySpec`s; `paper_figs.build` turns them into `studies` sweeps, runs
or reuses them, and hands the figure a dict of tables keyed by study name (`name` -> learning-curve table,
`name + ".pass1"` -> tidy pass@1 snapshots). Policy presets are named by role here, in one place, so stronger
interference presets (science issue) swap in by editing `PRESETS` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

Overrides = tuple[tuple[str, Any], ...]

PRESETS: dict[str, dict[str, Any]] = {
    "tabular": {"model": "tabular"},
    "interference": {"model": "interference"},
    "linear": {"model": "linear"},
    "mlp": {"model": "mlp"},
}
"""Role -> RunConfig fields (model name; backend options as `options`). The figures refer to roles only."""

LLM_PRESETS: dict[str, dict[str, Any]] = {}
"""Role -> RunConfig fields for `--backend llm` (filled by the LLM backend's presets when it lands)."""

POW2 = tuple(2**k for k in range(1, 9))
"""n = 2 .. 256, the default n grid (the paper's 8 .. 2048 scaled to the simulator's budgets)."""


@dataclass(frozen=True)
class StudySpec:
    """One study a figure needs. Variants run the same grid with RunConfig overrides and add a `variant`
    column."""

    name: str
    """Key of the study's tables and of its results sub-directory."""
    kind: str = "n-vs-m"
    """Sweep kind of studies.sweeps: n-vs-m, fixed-batch or joint."""
    preset: str = "interference"
    """Policy role, looked up in PRESETS (or LLM_PRESETS for the llm backend)."""
    dataset: str = "easy"
    n: tuple[int, ...] = POW2
    bp: tuple[int, ...] = (32,)
    batch: tuple[int, ...] = ()
    """fixed-batch only: values of bp * n."""
    bmax: int | None = None
    """joint only: the largest bp * n."""
    budget: int = 2**18
    """Compute cap in rollouts of every run."""
    seeds: int = 2
    base: Overrides = ()
    """RunConfig overrides shared by every run (e.g. (("kl_coef", 0.05),)); `options` as a tuple of pairs."""
    variants: tuple[tuple[str, Overrides], ...] = ()
    """(label, overrides) pairs; each label becomes a value of the `variant` column."""

    def scaled(self, seeds: int | None = None, budget_factor: float = 1.0) -> StudySpec:
        """A resized copy (the `--size` of `isocompute figs`): more seeds or a larger budget."""
        from dataclasses import replace

        return replace(self, seeds=seeds or self.seeds, budget=int(self.budget * budget_factor))


@dataclass(frozen=True)
class FigureSpec:
    """One figure: what it mirrors, what it needs, how it is drawn and summarised for the gallery."""

    id: str
    paper: str
    """Paper figure(s) it mirrors, e.g. '6' or '16-17' ('' for our own)."""
    title: str
    studies: tuple[StudySpec, ...]
    make: Callable[[dict[str, pd.DataFrame]], Figure]
    summary: Callable[[dict[str, pd.DataFrame]], dict]
    paper_finding: str
    """One line: what the paper found (from PAPER.md / the captions)."""
    ours: Callable[[dict], str]
    """One line from the summary numbers: what our run shows (no hand-typed numbers)."""
    backends: tuple[str, ...] = field(default=("sim",))
    text: Callable[[dict[str, pd.DataFrame]], str] | None = None
    """Optional text the build prints after drawing (the headline prints the n*(C) tables)."""
