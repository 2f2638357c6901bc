"""Numba GRPO simulators for compute-optimal allocation of RL sampling compute (numpy + numba only).

Public entry points: `run(config) -> SimResult`, `SimConfig`, `ConfigError`; closed forms in `sandbox.theory`.
"""

from sandbox.config import ConfigError, SimConfig
from sandbox.runner import SimResult, run

__all__ = ["ConfigError", "SimConfig", "SimResult", "run"]
