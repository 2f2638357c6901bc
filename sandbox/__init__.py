"""Numba GRPO simulators for compute-optimal allocation of RL sampling compute (numpy + numba only).

Public entry points: `run(config) -> SimResult`, `run_many(configs, threads, on_result) -> list[SimResult]`
(many runs on threads of the process, each equal to `run` alone and handed to on_result as it ends),
`SimConfig`, `ConfigError`; diagnostics from inside a run
(`train_snapshots`, `pass1_of`, `metrics_of`, `gradient_pieces`, sandbox/diagnostics.py); closed forms in
`sandbox.theory`.
"""

from sandbox._cache import invalidate_stale_kernels

invalidate_stale_kernels()

from sandbox.config import ZERO_PASS1, ConfigError, SimConfig  # noqa: E402
from sandbox.diagnostics import gradient_pieces, metrics_of, pass1_of, train_snapshots  # noqa: E402
from sandbox.runner import SimResult, run, run_many  # noqa: E402

__all__ = ["ZERO_PASS1", "ConfigError", "SimConfig", "SimResult", "gradient_pieces", "metrics_of", "pass1_of",
           "run", "run_many", "train_snapshots"]
