"""Where a tiny-LM GRPO run spends its time, by phase, at n = 4, 16 and 64 (bp 16).

One run per n (`llm_backend.loop.run`, one torch thread, the tiny-LM study's evaluation: avg@16 on the 317
Easy validation problems and 317 training problems at 16 log-spaced points) under cProfile; each phase is the
cumulative time of the functions that make it up:

    sampling        KVEngine.generate of the training rollouts (prefill, decoding, Gumbel draws, decode)
    reward          tasks.reward of the training rollouts
    batch           batch.build_batch (advantages, packed rows and masks)
    forward+backward  trainer.backward (policy log-probs, loss, autograd), incl. the KL reference's log-probs
    old log-probs   trainer.old_logprobs (only for ppo / cispo with several updates)
    optimiser       the AdamW step (torch's functional adam) and the gradient clipping
    evaluation      evaluation.evaluate (its sampling and grading)
    other           the rest of the run: allocator, history, logging, checkpoints, loading

cProfile adds a fixed cost per Python call, so Python-heavy phases read somewhat larger than they are; the
shares, not the seconds, are the result. Usage:
    .venv/bin/python benchmarks/tiny_lm_profile.py [--budget 2^15] [--ns 4,16,64]
        [--out docs/tiny_lm/profile.json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from pathlib import Path

PHASES = {
    "sampling": [("llm_backend/tiny/sampler.py", "generate")],
    "reward": [("llm_backend/tasks.py", "reward")],
    "batch": [("llm_backend/batch.py", "build_batch")],
    "forward+backward": [("llm_backend/trainer.py", "backward")],
    "old log-probs": [("llm_backend/trainer.py", "old_logprobs")],
    # torch's functional AdamW: what trainer.FlatAdamW.step and torch.optim.AdamW.step both call
    "optimiser": [("torch/optim/adam.py", "adam"), ("torch/nn/utils/clip_grad.py", "clip_grad_norm_")],
    "evaluation": [("llm_backend/evaluation.py", "evaluate")],
}
"""Phase -> (file suffix, function name) of the calls whose cumulative time it is."""


def _cumulative(stats: pstats.Stats, file: str, func: str) -> float:
    return sum(v[3] for (f, _, name), v in stats.stats.items() if f.endswith(file) and name == func)


def profile_run(n: int, bp: int, budget: int) -> dict:
    import torch

    from llm_backend.config import config_for
    from llm_backend.loop import run

    torch.set_num_threads(1)
    cfg = config_for("tiny", dataset="easy", n=n, bp=bp, budget=budget, n_evals=16, k=16, d_val=317)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    run(cfg)
    prof.disable()
    total = time.perf_counter() - t
    stats = pstats.Stats(prof)
    phases = {k: sum(_cumulative(stats, f, fn) for f, fn in v) for k, v in PHASES.items()}
    # evaluation's own sampling and grading are inside it: take them out of the training phases
    phases["sampling"] = max(phases["sampling"] - _eval_part(stats, "generate"), 0.0)
    phases["reward"] = max(phases["reward"] - _eval_part(stats, "reward"), 0.0)
    phases["other"] = max(total - sum(phases.values()), 0.0)
    return {"n": n, "bp": bp, "budget": budget, "wall_s_profiled": total, "seconds": phases,
            "share": {k: v / total for k, v in phases.items()}}


def _eval_part(stats: pstats.Stats, func: str) -> float:
    """Seconds of `func` called from evaluation.evaluate (through its callers' records)."""
    out = 0.0
    for (f, _, name), v in stats.stats.items():
        if name == func and (f.endswith("tiny/sampler.py") or f.endswith("tasks.py")):
            for caller, cv in v[4].items():
                if caller[0].endswith("evaluation.py"):
                    out += cv[3]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="2^15")
    ap.add_argument("--ns", default="4,16,64")
    ap.add_argument("--bp", type=int, default=16)
    ap.add_argument("--out", default=None, help="write the JSON here too")
    a = ap.parse_args()
    from tiny_lm import cpu_facts  # this folder's benchmark (run as a script: the folder is on the path)

    from studies.config import parse_count

    load0 = os.getloadavg()
    runs = [profile_run(int(n), a.bp, parse_count(a.budget)) for n in a.ns.split(",")]
    out = {"command": f"benchmarks/tiny_lm_profile.py --budget {a.budget} --ns {a.ns} --bp {a.bp}",
           **cpu_facts(), "loadavg_before": load0, "loadavg_after": os.getloadavg(), "runs": runs}
    text = json.dumps(out, indent=1)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
