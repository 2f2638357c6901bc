"""Measurements from inside simulator runs, recorded beside the run's table (ResultStore.write_extra).

The only module of the claims report that reaches into the simulator, and only through its public functions
(`sandbox.train_snapshots`, `sandbox.gradient_pieces`, `sandbox.problems.make_problems`), imported lazily so
the report's other sections need no Numba. Each probe skips runs that already have their measurement, so a
rerun of the report costs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable

from studies.claims.common import noise_scale_from_pieces
from studies.config import RunConfig
from studies.declared import Tables
from studies.store import ResultStore


def _sim_config(cfg: RunConfig):
    from studies.backends import get_backend

    return get_backend("sim").sim_config(cfg)


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
    from sandbox.problems import make_problems

    sc = _sim_config(cfg)
    return {"source": [str(s) for s in make_problems(sc).source[sc.d :]]}


def noise_scale_along(cfg: RunConfig, quarters: int = 4, problems: int = 512) -> dict:
    """Gradient noise scale B_simple at steps m / 4^k (k = quarters..0) of the run: parameters from
    sandbox.train_snapshots, per-problem GRPO gradients from sandbox.gradient_pieces (one piece = one problem
    with its n rollouts, so B_simple is in groups; times n in rollouts)."""
    import numpy as np

    from sandbox import gradient_pieces, train_snapshots

    sc = _sim_config(cfg)
    stops = sorted({max(1, sc.steps // 4**k) for k in range(quarters, -1, -1)})
    rows = []
    for m, theta in zip(stops, train_snapshots(sc, stops), strict=True):
        pieces = gradient_pieces(sc, theta, problems=min(problems, sc.d), seed=0)
        g = noise_scale_from_pieces(pieces)
        zero = float(np.mean(~pieces.any(axis=1)))
        rows.append({"m": int(m), "compute": int(m * sc.bp * (sc.n + sc.n_est)), "zero_var_frac": zero, **g})
    return {"n": sc.n, "rows": rows}
