"""Option values both engines (and studies' RunConfig and CLI) accept under the same names and meaning.

One tuple per option, so a value added here is offered by the CLI (click.Choice), checked by every config and
named in every error message at once. An option only one engine has (the simulator's policy models, the llm
backend's loss aggregations) stays in that engine's config."""

from __future__ import annotations

DATASETS = ("easy", "hard", "xhard", "veasy", "dual", "tri")
"""Difficulty presets: ranges of avg@16 under the initial policy (docs/DESIGN.md); the llm backend adds its
uncalibrated `arith` and .jsonl paths."""
OPTIMIZERS = ("sgd", "adam", "adamw")
"""Optimisers of the simulator; the llm backend always uses AdamW (docs/PAPER.md "Healthy recipe")."""
LR_RULES = ("constant", "linear", "sqrt")
"""How lr scales with batch B = bp * n (isocompute.contract.lr.effective_lr)."""
SCALE_REWARDS = ("group", "batch", "none")
"""Advantage normalisation A = (r - mean) / (std + adv_eps): by the group's std, the batch's std, or none."""
ADV_STDS = ("sample", "population")
"""Std convention of the advantage scale: sample (n - 1, as TRL and verl) or population (n)."""
OBJECTIVES = ("pg", "ppo", "cispo")
"""Surrogate objectives: plain policy gradient, clipped ratio, clipped stop-gradient IS weight."""

ZERO_PASS1 = 1e-3
"""A problem with pass@1 below this counts as zero (`*_zero_frac` from exact pass@1): below the resolution
of avg@k for k <= 1000, and a softmax never reaches exactly 0. The one threshold of both engines."""
