"""A worked example: TRL's own GRPOTrainer with an n schedule, on the shipped tiny LM, then `isocompute fit`
on what it wrote. CPU, about a minute with the defaults.

    python examples/trl_n_schedule.py OUT [--steps 40] [--schedule 4@0,16@20] [--allocator SPEC]
                                          [--vllm-mode server|colocate]

Two runs on the same prompts (two-digit sums; reward 1 for the exact sum), each through
`IsoComputeGRPOTrainer` (isocompute/integrations/trl_grpo.py), TRL's GRPOTrainer with the group size decided
per step: OUT/fixed (n = 4 throughout) and OUT/schedule (n = 4, then 16 once 20 steps are done; or
`--allocator SPEC`, a per-prompt allocator such as knapsack:nmax=16, in place of the schedule). Each run's
output folder holds TRL's trainer_state.json and the isocompute.parquet table its IsoComputeCallback writes,
with n, bp and the rollouts generated and trained per step, counted from the batches. Then it runs

    isocompute fit OUT --by allocator

which reads both runs at their true compute (the schedule's steps at n = 16 cost four times those at 4).
The tiny LM is a Llama folder shipped in the package (llm_backend/models/tiny): transformers loads it as
LlamaForCausalLM with its character tokenizer (`llm_backend.model.resolve_model("tiny")` finds it).

A setting the trainer cannot serve (vLLM's server mode with a per-prompt allocator, whose n differ between
prompts) ends with one line on stderr and exit 2, before anything is written.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

PROMPTS = [f"{a}+{b}=" for a in range(10, 100, 7) for b in range(11, 100, 9)]
"""Two-digit sums: the tiny LM gets them right some of the time, so groups carry a signal."""


def sum_reward(prompts, completions, **kwargs):
    """1.0 when the completion is the exact sum of the prompt's two numbers, else 0.0."""
    out = []
    for p, c in zip(prompts, completions, strict=True):
        a, b = p.rstrip("=").split("+")
        out.append(float(c.strip() == str(int(a) + int(b))))
    return out


def parse_schedule(text: str):
    """`4@0,16@20` -> NSchedule.at_steps({0: 4, 20: 16}) (n@steps done)."""
    from isocompute.integrations.allocation import AllocationError, NSchedule

    try:
        phases = {int(at): int(n) for n, at in (part.split("@") for part in text.split(","))}
    except ValueError:
        raise AllocationError(f"--schedule takes n@step,n@step,... (e.g. 4@0,16@20), got {text!r}") from None
    return NSchedule.at_steps(phases)


def trainer(out: Path, allocation, steps: int, vllm_mode: str | None):
    """An IsoComputeGRPOTrainer on the tiny LM: 8 prompts a step, lr 3e-4 (2e-3 collapses this model's
    rewards to 0 within 10 steps), TRL's transformers generation unless `vllm_mode`; nothing is written
    until it trains."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging
    from trl import GRPOConfig

    from isocompute.integrations.trl_grpo import IsoComputeGRPOTrainer
    from llm_backend.model import resolve_model

    torch.set_num_threads(1)
    logging.disable_progress_bar()
    tiny = resolve_model("tiny")
    n0 = allocation.n0 if hasattr(allocation, "n0") else 4
    vllm = {"use_vllm": True, "vllm_mode": vllm_mode} if vllm_mode else {}
    args = GRPOConfig(output_dir=str(out), num_generations=n0, per_device_train_batch_size=8 * n0,
                      num_generations_eval=4, per_device_eval_batch_size=16, max_completion_length=4,
                      max_steps=steps, learning_rate=3e-4, logging_steps=1, eval_strategy="steps",
                      eval_steps=max(1, steps // 8), save_strategy="no", report_to=[], use_cpu=True, seed=0,
                      data_seed=0, disable_tqdm=True, temperature=1.0, **vllm)
    return IsoComputeGRPOTrainer(model=AutoModelForCausalLM.from_pretrained(tiny), reward_funcs=sum_reward,
                                 args=args, train_dataset=Dataset.from_dict({"prompt": PROMPTS[::2]}),
                                 eval_dataset=Dataset.from_dict({"prompt": PROMPTS[1::2][:16]}),
                                 processing_class=AutoTokenizer.from_pretrained(tiny), allocation=allocation)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="Folder for the two runs (created when training starts).")
    ap.add_argument("--steps", type=int, default=40, help="Optimiser steps of each run (default 40).")
    ap.add_argument("--schedule", default=None, help="n@steps,... (default: 4@0,16@<steps / 2>).")
    ap.add_argument("--allocator", default=None,
                    help="A per-prompt allocator spec (e.g. knapsack:nmax=16) in place of the schedule.")
    ap.add_argument("--vllm-mode", choices=("server", "colocate"), default=None,
                    help="Generate with TRL's vLLM in this mode (needs vLLM; default: transformers).")
    a = ap.parse_args(argv)
    from isocompute.integrations.allocation import AllocationError

    try:
        if a.steps < 2:
            raise AllocationError(f"--steps must be >= 2, got {a.steps}")
        second = a.allocator or parse_schedule(a.schedule or f"4@0,16@{a.steps // 2}")
        runs = [trainer(a.out / "schedule", second, a.steps, a.vllm_mode),
                trainer(a.out / "fixed", "fixed", a.steps, a.vllm_mode)]
    except AllocationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from transformers import set_seed

    for t in runs:
        set_seed(0)  # both runs draw the same numbers until the schedule changes n
        t.train()
        t.save_state()
    cmd = [sys.executable, "-m", "isocompute", "fit", str(a.out), "--by", "allocator"]
    print("$ isocompute fit", a.out, "--by allocator", flush=True)
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
