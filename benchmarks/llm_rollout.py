"""Rollout and GRPO-step speed of the LLM backend, as ratios against baselines measured in the same run.

1. generated tokens/s of the in-process vLLM engine vs transformers `generate` (HFEngine) on identical
   prompts and sampling settings (target ratio >= 2);
2. seconds of one weight sync into vLLM (reload_weights + reset_prefix_cache; target <= 1 s for 135M);
3. the time split of one GRPO step: rollout / log-probs + backward + AdamW / sync.

Both engines run at the same precision (--dtype: vLLM's weights, bf16 autocast for transformers); the
GRPO step trains at --train-dtype.

Usage: .venv/bin/python benchmarks/llm_rollout.py [--prompts 8] [--n 8] [--max-new-tokens 32]
       [--dtype float32|bfloat16] [--train-dtype float32|bfloat16] [--json]
Needs the prepared model (`isocompute llm prepare`) and vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.25, help="vLLM share of memory")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="rollout precision")
    ap.add_argument("--train-dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import numpy as np
    import torch

    from llm_backend import loss, tasks, trainer
    from llm_backend.batch import make_padded_batch
    from llm_backend.config import LLMConfig
    from llm_backend.engines import HFEngine, VLLMEngine
    from llm_backend.model import load_model, load_tokenizer, prepare

    path = prepare()
    tok = load_tokenizer(path)
    model = load_model(path)
    probs = tasks.generate_arithmetic(a.prompts, 0, digits=1)
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    gen = dict(n=a.n, max_new_tokens=a.max_new_tokens, temperature=a.temperature, top_p=1.0)

    t0 = time.perf_counter()
    vl = VLLMEngine(
        str(path),
        tok,
        seed=0,
        gpu_memory_utilization=a.gpu_memory_utilization,
        kv_cache_gib=1.0,
        dtype=a.dtype,
    )
    startup = time.perf_counter() - t0
    vl.sync_weights(model)
    vl.generate(prompts[:2], 2, 4, a.temperature)  # warm-up
    ro_v = vl.generate(prompts, **gen)
    hf = HFEngine(model, tok, batch_size=a.prompts * a.n, dtype=a.dtype)
    ro_h = hf.generate(prompts, seed=0, **gen)
    v_tps, h_tps = ro_v.num_tokens / ro_v.seconds, ro_h.num_tokens / ro_h.seconds

    syncs = [vl.sync_weights(model) for _ in range(3)]

    # one GRPO step at bp = prompts, n = n: rollout -> log-probs + backward + AdamW -> sync
    cfg = LLMConfig(
        n=a.n,
        bp=a.prompts,
        budget=a.n * a.prompts,
        max_new_tokens=a.max_new_tokens,
        temperature=a.temperature,
        engine_dtype=a.dtype,
        train_dtype=a.train_dtype,
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.effective_lr())
    t0 = time.perf_counter()
    ro = vl.generate(prompts, **gen)
    t1 = time.perf_counter()
    rew = np.array([tasks.reward(t, probs[i // a.n].answer) for i, t in enumerate(ro.texts)]).reshape(
        a.prompts, a.n
    )
    adv = loss.advantages(rew, cfg.scale_rewards).reshape(-1)
    batch = make_padded_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, tok.pad_token_id,
                              microbatch=cfg.microbatch, dtype=cfg.train_dtype)
    opt.zero_grad()
    agg = trainer.backward(model, batch, cfg)
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
    opt.step()
    t2 = time.perf_counter()
    sync = vl.sync_weights(model)
    out = {
        "prompts": a.prompts,
        "n": a.n,
        "max_new_tokens": a.max_new_tokens,
        "temperature": a.temperature,
        "dtype": a.dtype,
        "train_dtype": a.train_dtype,
        "threads": torch.get_num_threads(),
        "loadavg_1min": os.getloadavg()[0],
        "vllm_startup_s": round(startup, 2),
        "vllm_tokens": ro_v.num_tokens,
        "vllm_s": round(ro_v.seconds, 2),
        "vllm_tokens_per_s": round(v_tps, 1),
        "hf_tokens": ro_h.num_tokens,
        "hf_s": round(ro_h.seconds, 2),
        "hf_tokens_per_s": round(h_tps, 1),
        "ratio_vllm_over_hf": round(v_tps / h_tps, 2),
        "sync_s_median": round(statistics.median(syncs), 3),
        "sync_s_all": [round(s, 3) for s in syncs],
        "step_rollout_s": round(t1 - t0, 2),
        "step_train_s": round(t2 - t1, 2),
        "step_sync_s": round(sync, 3),
        "step_tokens": ro.num_tokens,
        "step_logp_mismatch_mean": agg["mismatch_abs_sum"] / max(agg["tokens"], 1),
    }
    vl.close()
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>28}: {v}")


if __name__ == "__main__":
    main()
