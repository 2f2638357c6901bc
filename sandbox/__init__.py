"""Numba GRPO simulators for compute-optimal allocation of RL sampling compute (numpy + numba only).

Public entry points: `run(config) -> SimResult`, `SimConfig`, `ConfigError`; closed forms in `sandbox.theory`.
"""

from sandbox._cache import invalidate_stale_kernels

invalidate_stale_kernels()

from sandbox.config import ConfigError, SimConfig  # noqa: E402
from sandbox.runner import SimResult, run  # noqa: E402

__all__ = ["ConfigError", "SimConfig", "SimResult", "run"]
