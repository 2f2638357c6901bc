"""One run of any backend as a frozen, validated config, plus parsers for the CLI's count and list spelling.

`RunConfig` is the backend-agnostic description of one GRPO run with sampling compute C = bp * n * m
(docs/PAPER.md "The question"); each backend adapter (studies/backends.py) maps it onto its engine's own
config and validates the backend-specific `options`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from isocompute.contract.budget import STEPS_RULE, RunShape
from isocompute.contract.config import check_choice
from isocompute.contract.options import ADV_STDS, OBJECTIVES, SCALE_REWARDS


class StudiesError(ValueError):
    """Bad user input or an impossible request; the message is one line meant for the user (exit code 2)."""


def _f(default: Any, help: str) -> Any:  # noqa: A002 - `help` mirrors click's keyword
    """A dataclass field whose one-line documentation is kept in metadata, so the CLI shows the same text."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class RunConfig(RunShape):
    """Hyperparameters of one run, shared by all backends. A field that defaults to None takes the backend's
    own default (its help says which); the others mean the same on every backend."""

    backend: str = _f("sim", "Engine that runs it: sim (Numba simulator) or llm (GRPO on a causal LM).")
    model: str | None = _f(None,
        "Simulator policy preset: tabular, linear, mlp, interference, skills (None: tabular); sim only.")
    lm: str | None = _f(None,
        "Language model of the llm backend: tiny (a shipped Llama-architecture LM of 0.2M parameters trained "
        "from scratch on digit arithmetic, ~1000x cheaper per rollout), small (its 1M size, once made by "
        "`isocompute llm pretrain --lm small`), smollm2 or a local HF folder (None: the prepared SmolLM2).")
    dataset: str = _f("easy",
        "Difficulty preset relative to the base policy: easy, hard, xhard, veasy, dual, tri.")
    n: int = _f(8, "Rollouts per problem, the GRPO group size n.")
    bp: int = _f(32, "Problems per step, B_p.")
    budget: int = _f(2**20, f"Compute cap C in rollouts; the run takes {STEPS_RULE} steps.")
    seed: int = _f(0, "Seed of the training randomness (rollout sampling, problem order).")
    problem_seed: int | None = _f(None,
        "Seed of the problem set and initial policy (None: use seed); pairs runs.")
    lr: float | None = _f(None,
        "Base learning rate at the backend's reference batch (None: backend default).")
    lr_rule: str | None = _f(None,
        "Scaling of lr with batch = bp * n: constant, linear or sqrt (None: default).")
    optimizer: str | None = _f(None, "Optimiser: sgd, adam or adamw (None: backend default).")
    weight_decay: float | None = _f(None,
        "Decoupled decay toward the initial parameters (None: backend default).")
    scale_rewards: str = _f("group",
        "Advantage normalisation: group std, batch std, or none (mean baseline).")
    adv_std: str = _f("sample",
        "Std of the advantage denominator: sample (n - 1, as TRL and verl) or population (n).")
    adv_eps: float = _f(1e-4, "Added to the std in (r - mean) / (std + adv_eps) (TRL: 1e-4, verl: 1e-6).")
    kl_coef: float = _f(0.0,
                        "Coefficient of KL(pi || pi_init); 0 disables it (docs/PAPER.md: Hard uses none).")
    entropy_coef: float = _f(0.0,
        "Coefficient of the entropy bonus; 0 disables it (paired with KL in the paper).")
    zero_variance_filter: bool = _f(False, "Drop groups whose n rewards all agree from the update.")
    allocator: str = _f("fixed",
        "Rollout allocator name[:args] (fixed, knapsack, variance, gvm, ada, dynamic-sampling, skip-zero-var,"
        " schedule:double@F, schedule:zv@T, pilot-commit, dynamo); the llm backend has fixed, knapsack,"
        " dynamic-sampling, skip-zero-var, schedule:double@F, pilot-commit and dynamo.")
    n_est: int = _f(0,
        "Rollouts for the decoupled baseline (docs/PAPER.md finding 9); 0 uses the same n rollouts.")
    objective: str = _f("pg", "Surrogate objective: pg (plain policy gradient), ppo (clipped) or cispo.")
    k: int = _f(4, "k of the metrics best_k (pass@k) and worst_k (all k correct).")
    n_evals: int | None = _f(None,
        "Number of evaluation points, log-spaced in compute up to the budget (None: the backend's default).")
    d: int | None = _f(None, "Training set size D (None: the backend's default).")
    d_val: int | None = _f(None, "Validation set size (None: the backend's default).")
    device: str = _f("cpu", "Device of the run: cpu or cuda[:i]; cuda runs ask the Ray executor for a GPU.")
    options: tuple[tuple[str, Any], ...] = _f((),
        "Backend-specific KEY=VALUE options, checked by the adapter.")

    def __post_init__(self) -> None:
        # Normalise options to a sorted tuple of pairs so equal configs hash equally (run_id below).
        opts = self.options.items() if isinstance(self.options, dict) else self.options
        norm = []
        for pair in opts:
            if len(pair) != 2 or not isinstance(pair[0], str) or not pair[0]:
                raise StudiesError(f"options must be (key, value) pairs with a string key, got {pair!r}")
            key, value = pair
            if not (value is None or isinstance(value, bool | int | float | str)):
                raise StudiesError(f"option {key} must be a number, bool or string, got {value!r}")
            norm.append((key, value))
        keys = [k for k, _ in norm]
        if len(set(keys)) != len(keys):
            raise StudiesError(f"an option is given twice: {', '.join(sorted(keys))}")
        object.__setattr__(self, "options", tuple(sorted(norm)))
        validate(self)

    @property
    def run_id(self) -> str:
        """Deterministic id: a readable prefix plus 10 hex digits of SHA-1 over the canonical config."""
        d = self.to_dict()
        if d.get("allocator") == "fixed":  # fixed-n ids equal those of stores made before the field existed
            del d["allocator"]
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        name = self.model if self.backend == "sim" else self.lm
        name = name or ("tabular" if self.backend == "sim" else "smollm2")
        model = re.sub(r"[^A-Za-z0-9]+", "", str(name).rstrip("/").rsplit("/", 1)[-1])[:16] or "model"
        return f"{self.backend}-{model}-{self.dataset}-bp{self.bp}-n{self.n}-s{self.seed}-{digest}"

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)

    def replace(self, **changes: Any) -> RunConfig:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(changes)
        return RunConfig(**d)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["options"] = dict(self.options)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise StudiesError(f"unknown RunConfig field(s): {', '.join(sorted(unknown))}")
        d = dict(d)
        d["options"] = tuple(sorted((d.get("options") or {}).items()))
        return cls(**d)

    @classmethod
    def field_help(cls) -> dict[str, str]:
        """One-line documentation of every field (used verbatim as click help)."""
        return {f.name: f.metadata["help"] for f in fields(cls)}


# Upper bounds of what one run may ask for, derived from the engines rather than taste:
MAX_COUNT = 2**62
"""Largest count the CLI parses: compute, n and bp live in int64 columns and kernels (2^63 - 1), with room."""
MAX_BUDGET = 2**53
"""Largest budget: `compute` is plotted and fitted as float64, which is exact for integers up to 2^53."""
MAX_STEPS = 2**30
"""Most optimiser steps one run may take (m = budget // rollouts per step): ~10^9 steps is already hours of
the fastest simulator kernel; beyond it a typo (--budget 2^63) would look like a hang."""
MAX_SEED = 2**63 - 1
"""Seeds go into the int64 `seed` column and numpy's SeedSequence."""
MAX_D = 2**31 - 1
"""Problem indices are int32 in the pass@1 snapshots (studies.backends.tidy_pass1)."""
MAX_N_EVALS = 4096
"""Evaluation points per run; each keeps a pass@1 snapshot of every problem."""
MAX_K = 2**16
"""k of metric@k; sampled metrics draw k answers per problem at every evaluation point."""


def _pow2(v: int) -> str:
    return f"2^{v.bit_length() - 1}" if v > 0 and v & (v - 1) == 0 else str(v)


def validate(c: RunConfig) -> None:
    """Backend-agnostic checks; raise StudiesError with one line quoting the bad values."""
    if not isinstance(c.backend, str) or not c.backend:
        raise StudiesError(f"backend must be a name such as 'sim', got {c.backend!r}")
    for name in ("n", "bp", "budget", "seed", "n_est", "k", "n_evals", "d", "d_val"):
        v = getattr(c, name)
        optional = name in ("n_evals", "d", "d_val")
        if (v is not None or not optional) and (isinstance(v, bool) or not isinstance(v, int)):
            raise StudiesError(f"{name} must be an integer, got {v!r}")
    check_choice("adv_std", c.adv_std, ADV_STDS, StudiesError)
    if not (isinstance(c.adv_eps, int | float) and c.adv_eps >= 0 and math.isfinite(c.adv_eps)):
        raise StudiesError(f"adv_eps must be >= 0, got {c.adv_eps!r}")
    if c.d_val is not None and c.d_val < 1:
        raise StudiesError(f"d_val must be >= 1, got {c.d_val}")
    check_choice("scale_rewards", c.scale_rewards, SCALE_REWARDS, StudiesError)
    check_choice("objective", c.objective, OBJECTIVES, StudiesError)
    if c.n < 1:
        raise StudiesError(f"n must be >= 1, got {c.n}")
    if c.n < 2 and c.n_est == 0:
        raise StudiesError(f"n = {c.n} < 2 leaves the group baseline without signal; use n >= 2 or set n_est")
    if c.n_est < 0 or c.n_est == 1:
        raise StudiesError(f"n_est must be 0 (use the n rollouts) or >= 2, got {c.n_est}")
    if c.bp < 1:
        raise StudiesError(f"bp must be >= 1, got {c.bp}")
    if c.seed < 0 or (c.problem_seed is not None and c.problem_seed < 0):
        raise StudiesError(f"seeds must be >= 0, got seed={c.seed}, problem_seed={c.problem_seed}")
    if c.d is not None and c.d < 1:
        raise StudiesError(f"d must be >= 1, got {c.d}")
    if c.d is not None and c.bp > c.d:
        raise StudiesError(f"bp = {c.bp} exceeds the training set size d = {c.d}")
    if c.budget < c.rollouts_per_step:
        raise StudiesError(f"budget {c.budget} is smaller than one step (bp * (n + n_est) = "
                           f"{c.rollouts_per_step} rollouts)")
    if c.lr is not None and not (c.lr > 0 and math.isfinite(c.lr)):
        raise StudiesError(f"lr must be positive, got {c.lr}")
    for name in ("kl_coef", "entropy_coef", "weight_decay"):
        v = getattr(c, name)
        if v is not None and not (v >= 0 and math.isfinite(v)):
            raise StudiesError(f"{name} must be >= 0, got {v}")
    if c.k < 1:
        raise StudiesError(f"k must be >= 1, got {c.k}")
    if c.n_evals is not None and c.n_evals < 2:
        raise StudiesError(f"n_evals must be >= 2, got {c.n_evals}")
    if not re.fullmatch(r"cpu|cuda(:\d+)?|auto", c.device):
        raise StudiesError(f"device must be cpu, cuda, cuda:i or auto, got {c.device!r}")
    _check_bounds(c)


def _check_bounds(c: RunConfig) -> None:
    """Upper bounds (MAX_* above), each message naming the limit, so no request hangs or overflows."""
    if c.budget > MAX_BUDGET:
        raise StudiesError(f"budget {_pow2(c.budget)} exceeds 2^53 rollouts (compute must stay exact in "
                           "float64)")
    if c.steps > MAX_STEPS:
        raise StudiesError(f"budget {_pow2(c.budget)} pays for {c.steps} steps of {c.rollouts_per_step} "
                           f"rollouts; at most 2^30 steps per run: raise bp * n or lower the budget")
    for name in ("seed", "problem_seed"):
        v = getattr(c, name)
        if v is not None and v > MAX_SEED:
            raise StudiesError(f"{name} must be <= 2^63 - 1 (int64), got {v}")
    for name in ("d", "d_val"):
        v = getattr(c, name, None)
        if v is not None and v > MAX_D:
            raise StudiesError(f"{name} must be <= 2^31 - 1 problems (int32 problem index), got {_pow2(v)}")
    if c.n_evals is not None and c.n_evals > MAX_N_EVALS:
        raise StudiesError(f"n_evals must be <= {MAX_N_EVALS} evaluation points, got {c.n_evals}")
    if c.k > MAX_K:
        raise StudiesError(f"k must be <= 2^16, got {_pow2(c.k)}")


# ----------------------------------------------------------------------------------------------------------
# CLI spelling (docs/DESIGN.md "CLI contracts"): counts as 1024, 4e6 or 2^22; lists as 2,4,8 or 2^1..2^8.

_POW = re.compile(r"^\s*(\d+)\s*\^\s*(\d+)\s*$")


def parse_count(text: str | int) -> int:
    """Parse a positive count written as an integer, in scientific notation (4e6) or as a power (2^22)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    s = str(text).strip().replace("_", "")
    m = _POW.match(s)
    if m:
        base, exp = int(m.group(1)), int(m.group(2))
        # bound before computing: 10^100000000 would take minutes to build
        if base > 1 and ((base.bit_length() - 1) * exp > 62 or base**exp > MAX_COUNT):
            raise StudiesError(f"count {_short(text)} exceeds 2^62 (the int64 kernels' range)")
        return base**exp
    if re.fullmatch(r"[+-]?\d+", s):
        v = int(s) if len(s) <= 25 else MAX_COUNT + 1
        if abs(v) > MAX_COUNT:
            raise StudiesError(f"count {_short(text)} exceeds 2^62 (the int64 kernels' range)")
        return v
    try:
        v = float(s)
    except ValueError:
        raise StudiesError(f"not a count: {text!r} (write 1024, 4e6 or 2^22)") from None
    if not math.isfinite(v) or v != int(v):
        raise StudiesError(f"not a whole count: {text!r}")
    if abs(v) > MAX_COUNT:
        raise StudiesError(f"count {_short(text)} exceeds 2^62 (the int64 kernels' range)")
    return int(v)


def _short(text: Any, most: int = 40) -> str:
    r = repr(text)
    return r if len(r) <= most else r[: most - 5] + "...'"


def parse_count_list(text: str) -> list[int]:
    """Parse a comma list of counts; an item `2^a..2^b` expands to the powers of two 2^a, ..., 2^b."""
    out: list[int] = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            raise StudiesError(f"empty item in list {text!r}")
        if ".." in item:
            lo, hi = (part.strip() for part in item.split("..", 1))
            mlo, mhi = _POW.match(lo), _POW.match(hi)
            if not (mlo and mhi and mlo.group(1) == mhi.group(1)):
                raise StudiesError(f"a range must read like 2^1..2^8 (same base), got {item!r}")
            base, a, b = int(mlo.group(1)), int(mlo.group(2)), int(mhi.group(2))
            if b < a:
                raise StudiesError(f"empty range {item!r}")
            if base < 2:
                raise StudiesError(f"a range needs a base >= 2, got {item!r}")
            parse_count(hi)  # bounds the largest item (and so the length of the range) before expanding
            out.extend(base**e for e in range(a, b + 1))
        else:
            out.append(parse_count(item))
    return out


def parse_option(text: str) -> tuple[str, Any]:
    """Parse a backend option KEY=VALUE; VALUE becomes an int, float, bool or stays a string."""
    if "=" not in text:
        raise StudiesError(f"option must read KEY=VALUE, got {text!r}")
    key, raw = (s.strip() for s in text.split("=", 1))
    if not key:
        raise StudiesError(f"option without a key: {text!r}")
    low = raw.lower()
    value: Any
    if low in ("true", "false"):
        value = low == "true"
    else:
        try:
            value = parse_count(raw) if re.fullmatch(r"\d+\s*\^\s*\d+|[+-]?\d+", raw) else float(raw)
        except (StudiesError, ValueError):
            value = raw
    return key, value
