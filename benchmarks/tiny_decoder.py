"""The kv sampler's two decoders on the draws a tiny-LM run makes: time per generate call and equal rows.

Training draws at n = 4, 16, 64 (bp 16 Easy training problems) and the study's evaluation (avg@16 on the 317
validation and 317 training-sample problems, compacted), the shipped tiny LM, one torch thread: `--rounds`
rounds each of one call with decoder="torch" and one with "compiled" (KVEngine.generate; kernel.py),
alternated in both orders, seeds 0.. per round. Prints the median milliseconds per call of each, their ratio,
how many rows drew the same tokens and the largest log-prob difference among them.
Usage: .venv/bin/python benchmarks/tiny_decoder.py [--rounds 30] [--eval-rounds 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def _case(engine, prompts, n, rounds, compact):
    times = {"torch": [], "compiled": []}
    rows = same = 0
    worst = 0.0
    engine.generate(prompts[:2], n, 10, 1.0, seed=0, compact=compact)  # loads (or compiles) the kernel
    for r in range(rounds):
        got = {}
        for dec in ("torch", "compiled") if r % 2 else ("compiled", "torch"):
            t = time.perf_counter()
            got[dec] = engine.generate(prompts, n, 10, 1.0, seed=r, compact=compact, decoder=dec)
            times[dec].append(time.perf_counter() - t)
        for a, b, la, lb in zip(got["torch"].token_ids, got["compiled"].token_ids, got["torch"].logprobs,
                                got["compiled"].logprobs, strict=True):
            rows += 1
            if a == b:
                same += 1
                worst = max([worst] + [abs(x - y) for x, y in zip(la, lb, strict=True)])
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return {"torch_ms": ms["torch"], "compiled_ms": ms["compiled"], "speedup": ms["torch"] / ms["compiled"],
            "rows": rows, "rows_equal": same, "max_logprob_diff": worst}


def measure(rounds: int, eval_rounds: int) -> list[dict]:
    import torch

    from llm_backend import tasks
    from llm_backend.config import config_for
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.problems import load_problems, train_eval_sample
    from llm_backend.tiny.sampler import KVEngine

    torch.set_num_threads(1)
    path = resolve_model("tiny")
    model, tok = load_model(path), load_tokenizer(path)
    engine = KVEngine(model, tok)
    cfg = config_for("tiny", dataset="easy", d_val=317, k=16)
    train, val = load_problems(cfg)
    out = []
    for n in (4, 16, 64):
        prompts = [tasks.build_prompt(tok, p.question) for p in train[:16]]
        out.append({"draw": "training", "n": n, "bp": 16, **_case(engine, prompts, n, rounds, False)})
    probs = list(val) + list(train_eval_sample(train, cfg, len(val)))
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    ev = _case(engine, prompts, 16, eval_rounds, True)
    out.append({"draw": "evaluation", "n": 16, "bp": len(prompts), **ev})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30, help="alternated rounds per training n (default 30)")
    ap.add_argument("--eval-rounds", type=int, default=4,
                    help="alternated rounds of the evaluation (default 4)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.rounds < 1 or args.eval_rounds < 1:
        ap.error("--rounds and --eval-rounds must be >= 1")
    res = measure(args.rounds, args.eval_rounds)
    if args.json:
        print(json.dumps({"rounds": args.rounds, "eval_rounds": args.eval_rounds, "loadavg": os.getloadavg(),
                          "results": res}))
        return
    for r in res:
        print(f"{r['draw']:>10} n = {r['n']:>2}: torch {r['torch_ms']:.2f} ms, "
              f"compiled {r['compiled_ms']:.2f} ms ({r['speedup']:.2f}x), "
              f"rows equal {r['rows_equal']}/{r['rows']}, "
              f"log-probs within {r['max_logprob_diff']:.1e}")


if __name__ == "__main__":
    main()
