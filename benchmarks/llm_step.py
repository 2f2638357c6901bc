"""One full GRPO step (rollout + train + weight sync) of llm_backend against TRL's GRPOTrainer, same process.

Same prompts (the committed easy split), model (the prepared SmolLM2-135M-Instruct), n, bp, max new tokens,
temperature and precision (--dtype; float32 by default: bf16 only pays on CPUs with AMX / AVX512-BF16);
kl_coef = beta = 0 on both. Reports completions per second and their ratio,
our train phase in the packed layout (bf16: with float32 master weights) against the straightforward padded
layout on the same rollouts, and the train phase's achieved FLOP/s against the matmul peak of that
precision measured here (torch, 2048^3). Run with the machine as idle as you can; timings are medians
over steps.

    .venv/bin/python benchmarks/llm_step.py --json [--steps 4] [--out docs/llm_study/llm_step.json]
    .venv/bin/python benchmarks/llm_step.py --ours-only --bp 8 --n 2,32   # study sizing (no TRL)
    .venv/bin/python benchmarks/llm_step.py --readme-line docs/llm_study/llm_step.json \
        --update-readme README.md   # the README's speed sentence, generated from that file
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "llm_study" / "gpu"


def matmul_peak(threads: int, dtypes: tuple[str, ...], size: int = 2048, reps: int = 3) -> dict:
    """Best-of-reps FLOP/s of a size^3 matmul per dtype ("bfloat16", "float32") on `threads` threads.

    On a CPU without AVX-512 BF16 / AMX (e.g. an AVX2-only AMD EPYC) bf16 matmuls are emulated and ~20x
    slower than float32, so the benchmark's precision is an option and the peak is that precision's.
    """
    import torch

    torch.set_num_threads(threads)
    out = {}
    for name in dtypes:
        dt = getattr(torch, name)
        a, b = torch.randn(size, size, dtype=dt), torch.randn(size, size, dtype=dt)
        a @ b
        best = min(_timed(lambda a=a, b=b: a @ b) for _ in range(reps))
        out[name] = 2 * size**3 / best
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def train_flops(model, batch, packed: bool) -> float:
    """Matmul FLOPs of forward + backward (6 per parameter per token): body over the tokens it runs on,
    head over the positions it runs on (completion targets packed; every position padded)."""
    body = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    head = model.get_output_embeddings().weight.numel()
    if packed:
        plan = batch.chunks()
        tokens = sum(mb.real_tokens for mb in plan)
        targets = sum(int(mb.tgt.numel()) for mb in plan)
        return 6 * body * tokens + 6 * head * targets
    tokens = int(batch.attention_mask.sum())
    return 6 * (body + head) * tokens


def ours(args, prompts, answers, n: int, bp: int, tok, path) -> dict:
    """Our step: vLLM (bf16, prefix caching) rollouts, packed bf16-master train step, sync; plus the padded
    autocast train step on the same rollouts (reference path) for the train-phase ratio."""
    import numpy as np
    import torch

    from llm_backend import loss, tasks, trainer
    from llm_backend.batch import make_padded_batch
    from llm_backend.config import LLMConfig
    from llm_backend.engines import cached_engine
    from llm_backend.model import load_model
    from llm_backend.packed import make_packed_batch

    cfg = LLMConfig(n=n, bp=bp, budget=n * bp, max_new_tokens=args.max_new_tokens,
                    temperature=args.temperature, train_dtype=args.dtype, engine_dtype=args.dtype)
    model = load_model(path)
    model.train()
    mixed = trainer.MasterWeights(model) if args.dtype == "bfloat16" else None
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.effective_lr())
    ref_model = load_model(path)
    ref_model.train()
    ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=cfg.effective_lr())
    policy = mixed.compute if mixed is not None else model  # what the engine syncs from
    eng = cached_engine(policy, tok, str(path), dtype=args.dtype, max_model_len=512, kv_cache_gib=1.0,
                        gpu_memory_utilization=0.35)
    rows = []
    for step in range(args.steps + 1):  # step 0 is warm-up
        idx = [(step * bp + j) % len(prompts) for j in range(bp)]
        t0 = time.perf_counter()
        ro = eng.generate([prompts[i] for i in idx], n, cfg.max_new_tokens, cfg.temperature, 1.0, seed=step)
        t1 = time.perf_counter()
        rew = np.array([tasks.reward(t, answers[idx[i // n]]) for i, t in enumerate(ro.texts)]).reshape(bp, n)
        adv = loss.advantages(rew).reshape(-1)
        pb = make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, n, tok.pad_token_id,
                               row_tokens=cfg.row_tokens, micro_tokens=cfg.micro_tokens)
        t2 = time.perf_counter()
        trainer.train_step(model, opt, pb, cfg, mixed=mixed)
        t3 = time.perf_counter()
        sync = eng.sync_weights(policy)
        t4 = time.perf_counter()
        row = {"rollout_s": t1 - t0, "train_s": t3 - t1, "sync_s": t4 - t3, "step_s": t4 - t0,
               "completion_tokens": ro.num_tokens, "sync_inner_s": sync,
               "train_flops": train_flops(model, pb, packed=True)}
        if not args.ours_only or args.padded:
            padded = make_padded_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, tok.pad_token_id,
                                       microbatch=cfg.microbatch, dtype=cfg.train_dtype)
            pcfg = LLMConfig(**{**cfg.to_dict(), "train_layout": "padded"})
            t5 = time.perf_counter()
            trainer.train_step(ref_model, ref_opt, padded, pcfg)
            row["padded_train_s"] = time.perf_counter() - t5
            row["padded_flops"] = train_flops(ref_model, padded, packed=False)
        del t2
        rows.append(row)
        print(f"ours n={n} bp={bp} step {step}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items()),
              file=sys.stderr)
    meas = rows[1:]
    med = {k: statistics.median(r[k] for r in meas) for k in meas[0]}
    med["completions_per_s"] = n * bp / med["step_s"]
    return {"n": n, "bp": bp, "steps": meas, "median": med}


def trl_step(args, questions, answers, n: int, bp: int, path) -> dict:
    """TRL GRPOTrainer on the same prompts (chat template through TRL), bf16, generate with transformers."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from llm_backend import tasks
    from llm_backend.model import load_model, load_tokenizer

    ans = dict(zip(questions, answers, strict=True))

    def reward(prompts, completions, **kw):
        out = []
        for p, c in zip(prompts, completions, strict=True):
            q = p[-1]["content"] if isinstance(p, list) else p
            text = c[0]["content"] if isinstance(c, list) else c
            out.append(tasks.reward(text, ans[q]))
        return out

    class Timer(TrainerCallback):
        def __init__(self):
            self.t = []

        def on_step_begin(self, a, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            self.t.append(time.perf_counter() - self.t0)

    sys_prompt = tasks.SYSTEM_PROMPT
    data = Dataset.from_dict({"prompt": [[{"role": "system", "content": sys_prompt},
                                          {"role": "user", "content": q}] for q in questions]})
    tok = load_tokenizer(path)
    tok.padding_side = "left"
    model = load_model(path)
    cfg = GRPOConfig(
        output_dir="/tmp/isocompute_trl_bench", num_generations=n, per_device_train_batch_size=n * bp,
        max_completion_length=args.max_new_tokens, max_steps=args.steps + 1, logging_steps=1,
        save_strategy="no", report_to=[], learning_rate=1e-5, use_cpu=True, seed=0,
        dataloader_num_workers=0, disable_tqdm=True, temperature=args.temperature, beta=0.0,
        bf16=args.dtype == "bfloat16",
        top_k=0, shuffle_dataset=False,
    )
    timer = Timer()
    tr = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=data, processing_class=tok,
                     callbacks=[timer])
    torch.manual_seed(0)
    from llm_backend.logs import stdout_to_stderr

    with stdout_to_stderr():  # Trainer prints its log dicts to stdout; --json stdout holds one object
        tr.train()
    meas = timer.t[1:]
    med = statistics.median(meas)
    print(f"trl n={n} bp={bp}: steps {[round(x, 2) for x in timer.t]}", file=sys.stderr)
    return {"n": n, "bp": bp, "step_s": meas, "median_step_s": med, "completions_per_s": n * bp / med}


MARK = "<!-- llm_step -->"
TARGETS = {"ratio_vs_trl": 4.0, "train_vs_matmul_floor": 2.0}
"""The targets: >= 4x TRL's completions/s; the train phase within 2x of the matmul-peak floor."""


def readme_line(out: dict) -> str:
    """The README's real-LLM speed sentence, generated from the JSON object `main` writes (first run)."""
    c, mach, e = out["config"], out["machine"], out["runs"][0]
    m = e["ours"]["median"]
    cmd = (f"benchmarks/llm_step.py --json --steps {c['steps']} --n {c['n']} --bp {c['bp']}"
           + (f" --dtype {c['dtype']}" if c["dtype"] != "float32" else "")
           + (f" --out {c['out']}" if c.get("out") else ""))
    load = f"1-min load {mach['load_avg'][0]:.1f} at start, {mach['load_avg_end'][0]:.1f} at end"
    text = (f"Measured on {out.get('date') or 'an unrecorded date'}, on {mach['cpu'] or 'an unrecorded CPU'} "
            f"({'/'.join(mach['isa']) or 'no avx2'}, {mach['threads']} threads; {load}; not necessarily "
            "yours), "
            f"by `{cmd}` ({c['dtype']}): our full GRPO step (n = {e['n']}, "
            f"bp = {e['bp']}, <= {c['max_new_tokens']} new tokens) took {m['step_s']:.1f} s (rollout "
            f"{m['rollout_s']:.1f}, train {m['train_s']:.1f}, sync {m['sync_s']:.1f}; medians of "
            f"{c['steps']} steps)")
    if "trl" in e:
        ok = "met" if e["ratio_vs_trl"] >= TARGETS["ratio_vs_trl"] else "not met"
        text += (f", {e['ratio_vs_trl']:.2f}x the completions/s of TRL's GRPOTrainer on the same prompts "
                 f"({e['trl']['median_step_s']:.1f} s per step; target {TARGETS['ratio_vs_trl']:g}x: {ok})")
    if "train_speedup_vs_padded" in e:
        text += f"; the packed shared-prompt trainer {e['train_speedup_vs_padded']:.2f}x the padded one"
    ok = "met" if e["train_vs_matmul_floor"] <= TARGETS["train_vs_matmul_floor"] else "not met"
    return text + (f"; the train phase {e['train_vs_matmul_floor']:.1f}x above the {c['dtype']} matmul floor "
                   f"measured in the same run (target {TARGETS['train_vs_matmul_floor']:g}x: {ok}).")


def readme_from(path: Path) -> str:
    """`readme_line` of the JSON at `path`, dated: its "date", else the file's commit date
    (studies.provenance.measured_on)."""
    sys.path.insert(0, str(ROOT))
    from studies.provenance import measured_on

    rec = json.loads(Path(path).read_text())
    return readme_line(rec | {"date": measured_on(rec, Path(path))})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="8")
    ap.add_argument("--bp", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4, help="measured steps (after one warm-up step)")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="precision of both sides; bfloat16 only pays with AMX / AVX512-BF16")
    ap.add_argument("--ours-only", action="store_true", help="skip TRL (and the padded path unless --padded)")
    ap.add_argument("--padded", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=None, help="also write the JSON object here")
    ap.add_argument("--readme-line", metavar="JSON", help="print the README line generated from JSON; no run")
    ap.add_argument("--update-readme", metavar="README", help="with --readme-line: write it into README")
    args = ap.parse_args()
    if args.readme_line:
        sys.path.insert(0, str(ROOT))
        from studies.files import write_marked_block
        line = readme_from(Path(args.readme_line))
        if args.update_readme:
            write_marked_block(Path(args.update_readme), MARK, MARK, line)
        print(line)
        return

    import torch

    import llm_backend
    from llm_backend import tasks
    from llm_backend.model import load_tokenizer, prepare

    llm_backend.quiet_logging(False)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    torch.set_num_threads(args.threads)
    path = prepare()
    tok = load_tokenizer(path)
    probs = tasks.load_jsonl(DATA / "easy.train.jsonl") + tasks.load_jsonl(DATA / "easy.val.jsonl")
    questions = [p.question for p in probs]
    answers = [p.answer for p in probs]
    prompts = [tasks.build_prompt(tok, q) for q in questions]
    peak = matmul_peak(args.threads, tuple(dict.fromkeys((args.dtype, "float32"))))
    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info if ln.startswith("flags")), [])
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    result = {"machine": {"threads": args.threads, "cpus": os.cpu_count(), "cpu": cpu, "isa": isa,
                          "load_avg": os.getloadavg()},
              "matmul_peak_flops": peak, "config": vars(args), "runs": [], "date": time.strftime("%Y-%m-%d")}
    for n in [int(x) for x in args.n.split(",")]:
        o = ours(args, prompts, answers, n, args.bp, tok, path)
        m = o["median"]
        entry = {"n": n, "bp": args.bp, "ours": o}
        entry["train_flops_per_s"] = m["train_flops"] / m["train_s"]
        entry["train_vs_matmul_floor"] = m["train_s"] / (m["train_flops"] / peak[args.dtype])
        if "padded_train_s" in m:
            entry["train_speedup_vs_padded"] = m["padded_train_s"] / m["train_s"]
        if not args.ours_only:
            t = trl_step(args, questions, answers, n, args.bp, path)
            entry["trl"] = t
            entry["ratio_vs_trl"] = m["completions_per_s"] / t["completions_per_s"]
        result["runs"].append(entry)
    result["machine"]["load_avg_end"] = os.getloadavg()
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    if args.json:
        print(text)
    else:
        for e in result["runs"]:
            m = e["ours"]["median"]
            print(f"n={e['n']} bp={e['bp']}: ours {m['step_s']:.2f} s/step (rollout {m['rollout_s']:.2f}, "
                  f"train {m['train_s']:.2f}, sync {m['sync_s']:.2f}), {m['completions_per_s']:.1f} compl/s; "
                  f"train {e['train_flops_per_s'] / 1e12:.3f} TFLOP/s, "
                  f"{e['train_vs_matmul_floor']:.2f}x the floor"
                  + (f"; padded/packed train {e['train_speedup_vs_padded']:.2f}x" if "train_speedup_vs_padded"
                     in e else "")
                  + (f"; TRL {e['trl']['median_step_s']:.2f} s/step, ratio {e['ratio_vs_trl']:.2f}x"
                     if "trl" in e else ""))


if __name__ == "__main__":
    main()
