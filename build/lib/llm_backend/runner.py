"""The names callers import from `llm_backend.runner` (studies, tests, benchmarks): the run loop now lives in
llm_backend/loop.py, its parts in problems, evaluation, checkpoint and results."""

from isocompute.contract.schedule import eval_steps
from llm_backend.checkpoint import Checkpointer as _Checkpointer
from llm_backend.checkpoint import config_key as _config_key
from llm_backend.loop import engine_options, run
from llm_backend.problems import MIXES, PACKAGED_SPLITS, load_problems, train_eval_sample
from llm_backend.problems import problem_order as _problem_order
from llm_backend.results import TABLE_COLUMNS, LLMResult

__all__ = ["MIXES", "PACKAGED_SPLITS", "TABLE_COLUMNS", "LLMResult", "_Checkpointer", "_config_key",
           "_problem_order", "engine_options", "eval_steps", "load_problems", "run", "train_eval_sample"]
