"""End-to-end speed of GRPO on the tiny LM (issue 23), with its baselines measured in the same process.

1. rollouts/s of whole runs (`llm_backend.runner.run`: rollout + rewards + packed update + evaluations at
   the study schedule, model loading included) at bp 16 with n = 2, 8, 64 (targets: >= 5,000 at n 8,
   >= 1,000 at n 2): one run on one core, and two runs at once on the two cores (how sweeps use them);
2. rollout only: the kv engine vs transformers `generate` (HFEngine on LlamaForCausalLM loaded from the same
   folder, same prompts and sampling; target >= 10x) and vLLM where it loads on this model;
3. the update phase (packed forward + backward + AdamW on one step's batch) with our module and with
   transformers' LlamaForCausalLM (same weights), and against the float32 matmul peak measured here
   (model FLOPs = 6 * parameters * trained tokens; attention excluded, so this is a lower bound); with AMX
   also the bf16 update (bf16 compute copy, float32 master weights and AdamW state).

Usage: .venv/bin/python benchmarks/tiny_lm.py [--lm tiny] [--budget 2^14] [--threads 1] [--json]
       [--out docs/tiny_lm/benchmark.json]
The machine may be shared: the JSON records the load average before and after, and every ratio compares
numbers taken in this one process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path


def cpu_facts() -> dict:
    flags = set()
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    isa = (("amx_tile", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))
    kind = next((k for f, k in isa if f in flags), "?")
    return {"cpu": model, "isa": kind, "cores": os.cpu_count(), "avx512_bf16": "avx512_bf16" in flags}


def matmul_peak(threads: int, size: int = 512, reps: int = 20) -> float:
    """float32 GFLOP/s of a square matmul (best of `reps`)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * size**3 / best / 1e9


def end_to_end(lm: str, n: int, bp: int, budget: int, seed: int = 0) -> dict:
    from llm_backend.config import config_for
    from llm_backend.runner import run

    cfg = config_for(lm, dataset="easy", n=n, bp=bp, budget=budget, n_evals=8, seed=seed)
    t, c = time.perf_counter(), time.process_time()
    res = run(cfg)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    steps = res.steps
    return {
        "n": n, "bp": bp, "budget": budget, "steps": len(steps), "wall_s": wall, "cpu_s": cpu,
        "rollouts_per_s": budget / wall,
        # on a shared machine the process gets a fraction of a core: rollouts per CPU second is what an
        # idle core would give (one thread: wall = CPU when nothing else runs)
        "rollouts_per_cpu_s": budget / cpu,
        "t_rollout_s": sum(s["t_rollout"] for s in steps), "t_train_s": sum(s["t_train"] for s in steps),
        "tokens": int(steps[-1]["tokens"]), "evals": len(res.table["m"]),
        "val_mean_first_last": [float(res.table["val_mean"][0]), float(res.table["val_mean"][-1])],
    }


def _e2e_child(args) -> dict:
    import torch

    torch.set_num_threads(1)
    return end_to_end(*args)


def two_runs_at_once(lm: str, n: int, bp: int, budget: int) -> dict:
    """Two runs (seeds 0 and 1) in two processes at once, one core each, as `--jobs 2` sweeps run them:
    rollouts/s of the machine = both runs' rollouts over the wall time until the later one ends."""
    import multiprocessing as mp

    t = time.perf_counter()
    with mp.get_context("spawn").Pool(2) as pool:
        parts = pool.map(_e2e_child, [(lm, n, bp, budget, s) for s in (0, 1)])
    wall = time.perf_counter() - t  # includes both processes' start-up and imports
    return {"n": n, "bp": bp, "budget": budget, "runs": 2, "wall_s": wall,
            "rollouts_per_s": 2 * budget / wall, "run_wall_s": [p["wall_s"] for p in parts],
            "run_cpu_s": [p["cpu_s"] for p in parts],
            "two_cores_rollouts_per_cpu_s": sum(budget / p["cpu_s"] for p in parts)}


def timed(fn, reps: int) -> float:
    """Median seconds of `reps` calls (after one warm-up)."""
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def rollout_compare(lm: str, bp: int, n: int, reps: int, try_vllm: bool = True) -> dict:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from llm_backend.config import config_for
    from llm_backend.engines import HFEngine
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.runner import load_problems
    from llm_backend.tiny_sampler import KVEngine

    path = resolve_model(lm)
    cfg = config_for(lm, dataset="easy")
    train, _ = load_problems(cfg)
    prompts = [p.question for p in train[:bp]]
    own, tok = load_model(path), load_tokenizer(path)
    kv = KVEngine(own, tok)
    hf_model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    hf_tok = AutoTokenizer.from_pretrained(path)
    hf = HFEngine(hf_model, hf_tok, batch_size=bp * n)
    gen = dict(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=1.0)
    t_kv = timed(lambda: kv.generate(prompts, n, seed=1, **gen), reps)
    t_hf = timed(lambda: hf.generate(prompts, n, seed=1, **gen), max(2, reps // 4))
    out = {"bp": bp, "n": n, "kv_s": t_kv, "hf_generate_s": t_hf, "kv_rollouts_per_s": bp * n / t_kv,
           "hf_rollouts_per_s": bp * n / t_hf, "kv_over_hf": t_hf / t_kv}
    try:
        from llm_backend.engines import VLLMEngine, vllm_available

        if not try_vllm:
            raise RuntimeError("not tried (--no-vllm)")
        if not vllm_available():
            raise RuntimeError("vLLM not installed")
        vl = VLLMEngine(str(path), hf_tok, seed=0, max_model_len=64, kv_cache_gib=0.25, prefix_caching=True)
        vl.sync_weights(own)
        t_vl = timed(lambda: vl.generate(prompts, n, seed=1, **gen), max(2, reps // 4))
        out.update(vllm_s=t_vl, vllm_rollouts_per_s=bp * n / t_vl, kv_over_vllm=t_vl / t_kv)
        vl.close()
    except Exception as e:  # noqa: BLE001 - recorded, not hidden: the JSON says why vLLM is absent
        out["vllm_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    return out


def update_compare(lm: str, bp: int, n: int, reps: int, peak: float) -> dict:
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM

    from llm_backend import trainer
    from llm_backend.config import config_for
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.packed import make_packed_batch
    from llm_backend.runner import load_problems
    from llm_backend.tiny_sampler import KVEngine

    path = resolve_model(lm)
    cfg = config_for(lm, dataset="easy", n=n, bp=bp)
    train, _ = load_problems(cfg)
    own, tok = load_model(path), load_tokenizer(path)
    ro = KVEngine(own, tok).generate([p.question for p in train[:bp]], n, cfg.max_new_tokens, 1.0, seed=2)
    adv = np.random.default_rng(0).standard_normal(bp * n)
    pb = make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, n, tok.pad_token_id)
    trained = sum(x.real_tokens for x in pb.chunks())
    out = {"bp": bp, "n": n, "packed_tokens": trained, "completion_tokens": ro.num_tokens}
    hf = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32)
    for name, model in (("own", own), ("hf", hf)):
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
        t = timed(lambda m=model, o=opt: trainer.train_step(m, o, pb, cfg), reps)
        out[f"{name}_update_s"] = t
    if cpu_facts()["isa"] == "AMX":  # bf16 forward/backward on AMX, float32 master (trainer.MasterWeights)
        import copy

        master = copy.deepcopy(own)
        mixed = trainer.MasterWeights(master)
        opt = torch.optim.AdamW(master.parameters(), lr=1e-6)
        out["own_bf16_update_s"] = timed(lambda: trainer.train_step(master, opt, pb, cfg, None, mixed), reps)
    params = sum(p.numel() for p in own.parameters())
    gflop = 6 * params * trained / 1e9
    out.update(parameters=params, model_gflop=gflop, own_gflops=gflop / out["own_update_s"],
               matmul_peak_gflops=peak, own_share_of_peak=gflop / out["own_update_s"] / peak,
               own_over_hf=out["hf_update_s"] / out["own_update_s"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default="tiny")
    ap.add_argument("--budget", default="2^14", help="rollouts per end-to-end run")
    ap.add_argument("--ns", default="2,8,64")
    ap.add_argument("--bp", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None, help="write the JSON here too")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM attempt (its start-up is slow)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import torch

    from studies.config import parse_count

    if a.threads:
        torch.set_num_threads(a.threads)
    budget = parse_count(a.budget)
    load0 = os.getloadavg()
    peak = matmul_peak(a.threads)
    result = {
        "command": "benchmarks/tiny_lm.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k not in ("json", "out")),
        **cpu_facts(), "torch_threads": torch.get_num_threads(), "dtype": "float32",
        "loadavg_before": load0, "matmul_peak_gflops": peak,
        "end_to_end": [end_to_end(a.lm, int(n), a.bp, budget) for n in a.ns.split(",")],
        "two_runs_at_once": [two_runs_at_once(a.lm, int(n), a.bp, budget) for n in a.ns.split(",")],
        "rollout": rollout_compare(a.lm, a.bp, 8, a.reps, not a.no_vllm),
        "update": update_compare(a.lm, a.bp, 8, a.reps, peak),
        "loadavg_after": os.getloadavg(),
    }
    text = json.dumps(result, indent=1)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
    if a.json:
        print(json.dumps(result))
    else:
        print(text)


if __name__ == "__main__":
    main()
