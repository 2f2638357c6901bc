"""The kv sampler's two decoding attentions on training draws: time per generate call and equal rows.

For n = 4, 16, 64 at bp 16 (the Easy training problems, the shipped tiny LM, one torch thread), `--rounds`
rounds each of one call with attention="sdpa" and one with "bmm" (KVEngine.generate by the torch path,
decoder="torch"), alternated in both orders, seeds 0.. per round; prints the median milliseconds per call of
each and how many rows drew the same tokens.
Usage: .venv/bin/python benchmarks/tiny_attention.py [--rounds 60] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def measure(rounds: int) -> list[dict]:
    import torch

    from llm_backend.config import config_for
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.problems import load_problems
    from llm_backend.tiny.sampler import KVEngine

    torch.set_num_threads(1)
    path = resolve_model("tiny")
    model, tok = load_model(path), load_tokenizer(path)
    out = []
    for n in (4, 16, 64):
        cfg = config_for("tiny", dataset="easy", n=n, bp=16, budget=16 * n)
        prompts = [p.question for p in load_problems(cfg)[0][:16]]
        engine = KVEngine(model, tok)
        times = {"sdpa": [], "bmm": []}
        same = rows = 0
        for r in range(rounds):
            got = {}
            for att in ("sdpa", "bmm") if r % 2 else ("bmm", "sdpa"):
                t = time.perf_counter()
                got[att] = engine.generate(prompts, n, cfg.max_new_tokens, 1.0, seed=r, attention=att,
                                           decoder="torch")
                times[att].append(time.perf_counter() - t)
            same += sum(a == b for a, b in zip(got["sdpa"].token_ids, got["bmm"].token_ids, strict=True))
            rows += len(got["sdpa"].token_ids)
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        out.append({"n": n, "bp": 16, "sdpa_ms": ms["sdpa"], "bmm_ms": ms["bmm"],
                    "bmm_over_sdpa": ms["bmm"] / ms["sdpa"], "rows": rows, "rows_equal": same})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60, help="alternated rounds per n (default 60)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    res = measure(args.rounds)
    if args.json:
        print(json.dumps({"rounds": args.rounds, "results": res}))
        return
    for r in res:
        print(f"n = {r['n']:>2}: sdpa {r['sdpa_ms']:.2f} ms, bmm {r['bmm_ms']:.2f} ms "
              f"({r['bmm_over_sdpa']:.2f}x), rows equal {r['rows_equal']}/{r['rows']}")


if __name__ == "__main__":
    main()
