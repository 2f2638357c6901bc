"""Measurements from inside simulator runs, recorded beside the run's table (ResultStore.write_extra).

The simulator's internals (parameter snapshots, per-problem gradients, problem sources) come through
studies.backends (sim_val_sources, sim_gradient_pieces), the one module that may import an engine, and load
Numba only when a probe runs. Each probe skips runs that already have their measurement, so a rerun of the
report costs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from isocompute.reports.claims.common import noise_scale_from_pieces
from studies.backends import sim_gradient_pieces, sim_val_sources
from studies.config import RunConfig
from studies.declared import Tables
from studies.store import ResultStore


def record(
    store: ResultStore,
    t: Tables,
    study: str,
    name: str,
    want: Callable[[RunConfig], bool],
    measure: Callable[[RunConfig], dict],
) -> None:
    """Write measure(cfg) as extra `name` of every finished run of `study` with want(cfg) that lacks one."""
    for _, cfg in t.done(study):
        if want(cfg) and store.read_extra(cfg.run_id, name) is None:
            store.write_extra(cfg.run_id, name, measure(cfg))


def val_sources(cfg: RunConfig) -> dict:
    """{"source": [difficulty preset of each validation problem]} (mixes such as `dual`, finding 8)."""
    return {"source": sim_val_sources(cfg)}


def noise_scale_along(cfg: RunConfig, quarters: int = 4, problems: int = 512) -> dict:
    """Gradient noise scale B_simple at steps m / 4^k (k = quarters..0) of the run (one piece = one problem
    with its n rollouts, so B_simple is in groups; times n in rollouts)."""
    rows = []
    for m, compute, pieces in sim_gradient_pieces(cfg, quarters, problems):
        zero = float(np.mean(~pieces.any(axis=1)))
        rows.append({"m": m, "compute": compute, "zero_var_frac": zero, **noise_scale_from_pieces(pieces)})
    return {"n": cfg.n, "rows": rows}
