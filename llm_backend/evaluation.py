"""Evaluation points of a run and what is measured there: k samples per validation problem (and per problem
of the fixed train sample) -> the val_* / train_* metrics and the per-problem pass@1 vectors."""

from __future__ import annotations

import math

import numpy as np

from llm_backend import tasks
from llm_backend.config import ZERO_PASS1, LLMConfig
from llm_backend.engines import derive_seed


def metrics(r: np.ndarray, prefix: str) -> dict:
    """mean (avg@k), best_k (pass@k), worst_k (all k correct), zero_frac of rewards (problems, k)."""
    p1 = r.mean(1)
    return {
        f"{prefix}_mean": float(p1.mean()),
        f"{prefix}_best_k": float((r.max(1) > 0).mean()),
        f"{prefix}_worst_k": float((r.min(1) > 0).mean()),
        f"{prefix}_zero_frac": float((p1 < ZERO_PASS1).mean()),
    }


def evaluate(engine, tok, val, cfg: LLMConfig, step: int, train_sample=()) -> tuple[dict, np.ndarray,
                                                                                     np.ndarray]:
    """k samples per validation problem (and per problem of the fixed train sample), one generate call.

    An engine's `eval_options` (keywords of its generate) apply here only: the kv engine's row compaction.
    Returns the val_* and train_* metrics (train_* NaN without a train sample) and both pass@1 vectors.
    Evaluation rollouts are not counted as compute.
    """
    probs = list(val) + list(train_sample)
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    seed = derive_seed(cfg.seed, step, "eval")
    opts = getattr(engine, "eval_options", {})
    ro = engine.generate(prompts, cfg.k, cfg.max_new_tokens, cfg.temperature, cfg.top_p, seed=seed, **opts)
    r = np.array([tasks.reward(t, probs[i // cfg.k].answer) for i, t in enumerate(ro.texts)])
    r = r.reshape(-1, cfg.k)
    rv, rt = r[: len(val)], r[len(val) :]
    out = metrics(rv, "val")
    if len(rt):
        out.update(metrics(rt, "train"))
    else:
        out.update({f"train_{k}": math.nan for k in ("mean", "best_k", "worst_k", "zero_frac")})
    return out, rv.mean(1), rt.mean(1)
