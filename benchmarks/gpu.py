"""The tiny LM on CUDA and SmolLM2-135M with vLLM on the GPU: rollouts per second on a device machine.

(a) whole runs of the tiny LM (`llm_backend.loop.run` with `config_for("tiny", device="cuda")`: model loading,
    kv-engine rollouts, rewards, packed update and the tiny-LM study's evaluation, 16 log-spaced avg@16 on the
    317 Easy validation and 317 training problems) at bp 16, n 4 / 16 / 64, budget 2^16: rollouts per wall
    second, and the rollout and train seconds of the run's steps;
(b) SmolLM2-135M-Instruct with the vLLM engine (in-process, llm_backend.engines.VLLMEngine) and the trainer on
    the GPU: rollouts per second of `generate` (bp 16 prompts of the Easy split x n, median of 3 calls after a
    warm-up) and the time of a whole GRPO step (rollout, rewards, packed update, weight sync: loop.run's step
    log, median over the steps after the first) at the same n.

Each measurement runs in a child process with a timeout, so the whole script stays within --max-seconds
(default 540: a 10-minute device call with room to start and copy back); whatever did not fit is recorded as
skipped. Writes one JSON (--out, default docs/tiny_lm/gpu.json) with the GPU's name, torch / CUDA / vLLM /
transformers versions and every number. Without a CUDA device it prints one line to stderr
("no CUDA device: ...") and exits 2, writing nothing.

The kv engine on CUDA keeps two things on the CPU: the Gumbel noise of every draw (one seeded CPU generator,
so a seed draws the same tokens on any device) and the draw itself, which copies each step's (rows, 18)
logits to the host; every matmul, the attention and the KV caches are on the device.

Usage: python benchmarks/gpu.py [--out docs/tiny_lm/gpu.json] [--max-seconds 540] [--ns 4,16,64]
       [--budget 2^16] [--no-vllm] [--smol-engine-dtype bfloat16] [--smol-train-dtype bfloat16]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "tiny_lm" / "gpu.json"

STUDY_EVAL = {"n_evals": 16, "k": 16, "d_val": 317}
"""The tiny-LM study's evaluation (as benchmarks/tiny_lm.py): 16 log-spaced points, avg@16 on the 317 Easy
validation problems and the 317 problems of the fixed training sample."""

TINY_RUN_CAP_S = 150
"""Most seconds one tiny-LM run may take, so the SmolLM2 part keeps its share of the time cap."""

SMOL_STEPS = 3
"""GRPO steps per n of the SmolLM2 part (the first is a warm-up: the medians are over the later ones)."""


def parse_budget(text: str) -> int:
    """`2^16` or `65536`."""
    base, _, exp = text.partition("^")
    return int(base) ** int(exp) if exp else int(base)


def no_cuda_reason() -> str | None:
    """Why there is no CUDA device to measure (None: there is one)."""
    try:
        import torch
    except ImportError as e:
        return f"torch is not importable ({e})"
    if not torch.cuda.is_available():
        return (f"torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no GPU: "
                "torch.cuda.is_available() is False")
    return None


def facts() -> dict:
    """The machine and the versions the numbers belong to."""
    import torch

    out = {
        "gpu": torch.cuda.get_device_name(0),
        "gpu_count": torch.cuda.device_count(),
        "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
    }
    from importlib.metadata import PackageNotFoundError, version

    for name in ("vllm", "transformers"):  # read from the install, not imported (vLLM's import takes seconds)
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    try:
        out["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                                       capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out["commit"] = None
    return out


# --- children: each prints one JSON line per result, flushed, so a timed-out child still reports some ---

def _emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def child_tiny(n: int, bp: int, budget: int) -> None:
    """One whole tiny-LM run on CUDA."""
    import torch

    from llm_backend.config import config_for
    from llm_backend.loop import run

    cfg = config_for("tiny", dataset="easy", n=n, bp=bp, budget=budget, seed=0, device="cuda", **STUDY_EVAL)
    torch.cuda.synchronize()
    t = time.perf_counter()
    res = run(cfg)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t
    steps = res.steps
    _emit({"n": n, "bp": bp, "budget": budget, "steps": len(steps), "wall_s": round(wall, 2),
           "rollouts_per_s": round(budget / wall, 1),
           "t_rollout_s": round(sum(s["t_rollout"] for s in steps), 2),
           "t_train_s": round(sum(s["t_train"] for s in steps), 2),
           "evals": len(res.table["m"]), "val_mean_last": float(res.table["val_mean"][-1])})


def child_smol(ns: list[int], bp: int, engine_dtype: str, train_dtype: str, deadline: float) -> None:
    """SmolLM2-135M-Instruct: vLLM generate rollouts/s and the GRPO step time, per n, until `deadline`."""
    import torch

    from llm_backend import tasks
    from llm_backend.config import LLMConfig
    from llm_backend.engines import VLLMEngine
    from llm_backend.loop import run
    from llm_backend.model import load_tokenizer, prepare
    from llm_backend.problems import load_problems

    path = prepare()
    tok = load_tokenizer(path)
    base = dict(model=str(path), engine="vllm", device="cuda", dataset="easy", bp=bp, seed=0, n_evals=1,
                d_val=16, k=1, train_eval=False, engine_dtype=engine_dtype, train_dtype=train_dtype)
    cfg0 = LLMConfig(n=max(ns), budget=bp * max(ns), **base)
    t = time.perf_counter()
    eng = VLLMEngine(str(path), tok, seed=0, max_model_len=cfg0.max_model_len,
                     gpu_memory_utilization=cfg0.gpu_memory_utilization, dtype=engine_dtype,
                     kv_cache_gib=cfg0.kv_cache_gib)
    _emit({"engine_start_s": round(time.perf_counter() - t, 2), "max_new_tokens": cfg0.max_new_tokens,
           "temperature": cfg0.temperature})
    train, _ = load_problems(cfg0)
    prompts = [tasks.build_prompt(tok, p.question) for p in train[:bp]]
    try:
        for n in ns:
            if time.time() > deadline:
                _emit({"skipped": f"n = {n} and later: time cap"})
                break
            eng.generate(prompts, n, cfg0.max_new_tokens, cfg0.temperature, seed=99)  # warm-up
            secs, tokens = [], []
            for s in range(3):
                ro = eng.generate(prompts, n, cfg0.max_new_tokens, cfg0.temperature, seed=s)
                secs.append(ro.seconds)
                tokens.append(ro.num_tokens)
            sec = statistics.median(secs)
            _emit({"generate": {"n": n, "bp": bp, "rollouts": bp * n, "seconds": round(sec, 4),
                                "rollouts_per_s": round(bp * n / sec, 1),
                                "tokens_per_s": round(statistics.median(tokens) / sec, 1),
                                "seconds_all": [round(x, 4) for x in secs]}})
            if time.time() > deadline:
                _emit({"skipped": f"GRPO steps at n = {n}: time cap"})
                break
            cfg = LLMConfig(n=n, budget=bp * n * SMOL_STEPS, **base)
            torch.cuda.synchronize()
            res = run(cfg, engine=eng)
            later = res.steps[1:] or res.steps

            def med(key, rows=later):
                return round(statistics.median(r[key] for r in rows), 4)

            step = {"n": n, "bp": bp, "steps": len(res.steps), "t_step_s": med("t_step"),
                    "t_rollout_s": med("t_rollout"), "t_train_s": med("t_train"), "t_sync_s": med("t_sync"),
                    "rollouts_per_s": round(bp * n / med("t_step"), 1),
                    "tokens_per_rollout": round(statistics.median(r["response_len"] for r in later), 1),
                    "t_step_all": [round(r["t_step"], 4) for r in res.steps]}
            _emit({"grpo_step": step})
    finally:
        eng.close()


# --- parent ---

def _child(spec: dict, timeout: float) -> tuple[list[dict], str | None]:
    """Run this script as a child on `spec`; (its JSON lines, an error or None). A child that runs past
    `timeout` is killed; the lines it printed before still count."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    err = None
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=max(timeout, 1))
        out = proc.stdout
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            err = f"exit {proc.returncode}: {last[-500:]}"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"time cap: killed after {timeout:.0f} s"
    lines = []
    for line in out.splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a library's print to stdout
    return lines, err


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu.py", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="JSON to write (default: docs/tiny_lm/gpu.json)")
    ap.add_argument("--max-seconds", type=float, default=540, help="cap on the whole script (default 540)")
    ap.add_argument("--ns", default="4,16,64", help="group sizes n (default 4,16,64)")
    ap.add_argument("--bp", type=int, default=16, help="prompts per step (default 16)")
    ap.add_argument("--budget", default="2^16", help="rollouts of each tiny-LM run (default 2^16)")
    ap.add_argument("--no-vllm", action="store_true", help="skip the SmolLM2 / vLLM part")
    ap.add_argument("--no-tiny", action="store_true", help="skip the tiny-LM part")
    ap.add_argument("--smol-engine-dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--smol-train-dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        spec = json.loads(a.child)
        if spec["part"] == "tiny":
            child_tiny(spec["n"], spec["bp"], spec["budget"])
        else:
            child_smol(spec["ns"], spec["bp"], spec["engine_dtype"], spec["train_dtype"], spec["deadline"])
        return 0

    t0 = time.time()
    deadline = t0 + a.max_seconds - 5  # the last seconds: writing the JSON
    if (why := no_cuda_reason()) is not None:
        print(f"no CUDA device: {why}", file=sys.stderr)
        return 2
    ns = [int(x) for x in a.ns.split(",") if x]
    budget = parse_budget(a.budget)
    out = {"command": "python benchmarks/gpu.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t0)), "max_seconds": a.max_seconds,
           **facts(), "tiny": {"bp": a.bp, "budget": budget, **STUDY_EVAL, "runs": []},
           "smollm2": {"bp": a.bp, "engine_dtype": a.smol_engine_dtype, "train_dtype": a.smol_train_dtype,
                       "generate": [], "grpo_step": []}}
    smol_share = 0.0 if a.no_vllm else 0.4  # of the cap, kept for the SmolLM2 part
    if not a.no_tiny:
        for n in ns:
            left = deadline - time.time() - smol_share * a.max_seconds
            if left < 10:
                out["tiny"]["runs"].append({"n": n, "skipped": "time cap"})
                continue
            spec = {"part": "tiny", "n": n, "bp": a.bp, "budget": budget}
            lines, err = _child(spec, min(left, TINY_RUN_CAP_S))
            out["tiny"]["runs"].append(lines[-1] if lines else {"n": n, "error": err})
    if not a.no_vllm:
        left = deadline - time.time()
        spec = {"part": "smol", "ns": ns, "bp": a.bp, "engine_dtype": a.smol_engine_dtype,
                "train_dtype": a.smol_train_dtype, "deadline": deadline - 0.15 * max(left, 0)}
        lines, err = _child(spec, left) if left > 30 else ([], "time cap")
        smol = out["smollm2"]
        for line in lines:
            if "generate" in line:
                smol["generate"].append(line["generate"])
            elif "grpo_step" in line:
                smol["grpo_step"].append(line["grpo_step"])
            elif "skipped" in line:
                smol.setdefault("skipped", []).append(line["skipped"])
            else:
                smol.update(line)
        if err:
            smol["error"] = err
    out["wall_s"] = round(time.time() - t0, 1)
    path = Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path} ({out['wall_s']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
