"""The tiny LM's two trainers on the batches a run trains on: time per forward + backward and equal gradients.

Training batches at n = 4, 16, 64 (bp 16 Easy training problems, the shipped tiny LM's draws and rewards, the
packed layout a run builds), one torch thread: `--rounds` rounds each of one `trainer.backward` (the policy's
log-probs, the GRPO loss, the backward pass) with LLMConfig.tiny_trainer "torch" and one with "compiled"
(llm_backend/tiny/train_kernel.py), alternated in both orders, a new draw (seed) per round; `--kl` adds the
reference model's forward (kl_coef 0.05, entropy_coef 0.001: the Easy recipe's terms). Prints the median
milliseconds of each, their ratio, and the largest gradient difference of a parameter relative to its largest
gradient entry.
Usage: .venv/bin/python benchmarks/tiny_trainer.py [--rounds 30] [--kl] [--json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from dataclasses import replace


def _case(model, ref, tok, probs, n, rounds, kl):
    import numpy as np

    from llm_backend import tasks
    from llm_backend.batch import Group, build_batch
    from llm_backend.config import config_for
    from llm_backend.tiny.sampler import KVEngine
    from llm_backend.trainer import backward

    terms = {"kl_coef": 0.05, "entropy_coef": 0.001} if kl else {}
    cfg = config_for("tiny", dataset="easy", n=n, bp=len(probs), budget=n * len(probs), **terms)
    engine = KVEngine(model, tok)
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    times = {"torch": [], "compiled": []}
    worst, tokens = 0.0, []
    for r in range(rounds + 1):  # round 0 untimed: loads (or compiles) the kernels
        ro = engine.generate(prompts, n, cfg.max_new_tokens, 1.0, 1.0, seed=r)
        groups = [Group(ro.prompt_ids[i:i + n], ro.token_ids[i:i + n], ro.logprobs[i:i + n],
                        np.array([tasks.reward(t, probs[i // n].answer) for t in ro.texts[i:i + n]]))
                  for i in range(0, len(ro.texts), n)]
        batch = build_batch(cfg, groups, tok.pad_token_id)
        grads = {}
        for who in ("torch", "compiled") if r % 2 else ("compiled", "torch"):
            model.zero_grad(set_to_none=False)
            t = time.perf_counter()
            backward(model, batch, replace(cfg, tiny_trainer=who), ref if kl else None)
            dt = time.perf_counter() - t
            grads[who] = {k: p.grad.clone() for k, p in model.named_parameters()}
            if r:
                times[who].append(dt)
        if r:
            tokens.append(sum(mb.real_tokens for mb in batch.chunks()))
            for k, g in grads["torch"].items():
                scale = float(g.abs().max())
                if scale > 0:
                    worst = max(worst, float((grads["compiled"][k] - g).abs().max()) / scale)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return {"torch_ms": ms["torch"], "compiled_ms": ms["compiled"], "speedup": ms["torch"] / ms["compiled"],
            "packed_tokens_median": statistics.median(tokens), "max_grad_rel_diff": worst}


def measure(rounds: int, kl: bool) -> list[dict]:
    import torch

    from llm_backend.config import config_for
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.problems import load_problems

    torch.set_num_threads(1)
    path = resolve_model("tiny")
    model, tok = load_model(path), load_tokenizer(path)
    ref = copy.deepcopy(model).requires_grad_(False)
    train, _ = load_problems(config_for("tiny", dataset="easy"))
    return [{"n": n, "bp": 16, "kl": kl, **_case(model, ref, tok, train[:16], n, rounds, kl)}
            for n in (4, 16, 64)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30, help="alternated rounds per n (default 30)")
    ap.add_argument("--kl", action="store_true", help="with the KL reference and the entropy term")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    load0 = os.getloadavg()
    res = measure(args.rounds, args.kl)
    if args.json:
        from tiny_lm import cpu_facts  # this folder's benchmark (run as a script: the folder is on the path)

        print(json.dumps({"command": f"benchmarks/tiny_trainer.py --rounds {args.rounds}"
                          + (" --kl" if args.kl else "") + " --json", **cpu_facts(), "rounds": args.rounds,
                          "loadavg_before": load0, "loadavg_after": os.getloadavg(), "results": res}))
        return
    for r in res:
        print(f"n = {r['n']:>2} ({r['packed_tokens_median']:.0f} packed tokens): "
              f"torch {r['torch_ms']:.2f} ms, "
              f"compiled {r['compiled_ms']:.2f} ms ({r['speedup']:.2f}x), "
              f"gradients within {r['max_grad_rel_diff']:.1e} of each parameter's largest")


if __name__ == "__main__":
    main()
