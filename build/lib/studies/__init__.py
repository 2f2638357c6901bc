"""Backend-agnostic orchestration and analysis: run configs, sweeps, the result store, executors, the CLI.

Importing `studies` is cheap (no engine, no pandas); engines load lazily in studies/backends.py.
"""

from studies.config import RunConfig, StudiesError

__all__ = ["RunConfig", "StudiesError"]
