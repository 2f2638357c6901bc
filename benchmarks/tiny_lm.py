"""End-to-end speed of GRPO on the tiny LM, with its baselines measured in the same run.

1. whole runs (`llm_backend.loop.run`: rollout + rewards + packed update + evaluations, model loading
   included) at bp 16 with n = 4, 16, 64, budget 2^16 and the tiny-LM study's evaluation (16 log-spaced
   evaluations of avg@16 on the 317 Easy validation problems and 317 training problems), by this tree and by
   the reference commit (`--ref`, extracted from this repository's history into .cache/), each run in a fresh
   process: one run on one core, and two runs at once on the two cores (how a study's `--jobs 2` runs them);
   ratios new / reference of rollouts per second (wall) and per CPU second, over --e2e-reps runs of each
   tree interleaved new, ref, ref, new (`interleaved`), after one short untimed run of each (`warm_up`);
2. rollout only: the kv engine vs transformers `generate` (HFEngine on LlamaForCausalLM loaded from the same
   folder, same prompts and sampling; target >= 10x) and vLLM where it loads on this model;
3. the update phase (packed forward + backward + AdamW on one step's batch) with our module and with
   transformers' LlamaForCausalLM (same weights), and against the float32 matmul peak measured here
   (model FLOPs = 6 * parameters * trained tokens; attention excluded, so this is a lower bound); with AMX
   also the bf16 update (bf16 compute copy, float32 master weights and AdamW state). The update is timed in
   rounds of (our update, transformers' update, a matmul peak), interleaved, and its distance to the floor
   is the median over rounds of its time over that round's floor (a shared machine's speed drifts within
   seconds; the run-start peak is kept beside it); both models step the flat AdamW a run uses
   (trainer.flat_adamw).

   The update's and the sampler's model FLOP rates are reported as shares of that peak too.

Usage: .venv/bin/python benchmarks/tiny_lm.py [--lm tiny] [--budget 2^16] [--ref fd3ed65] [--threads 1]
       [--json] [--out docs/tiny_lm/benchmark.json]
       .venv/bin/python benchmarks/tiny_lm.py --table docs/tiny_lm/benchmark.json   (the docs' table)
The machine may be shared: the JSON records the load average before and after, and every ratio compares
numbers taken in this one process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
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


STUDY_EVAL = {"n_evals": 16, "k": 16, "d_val": 317}
"""The tiny-LM study's evaluation: 16 log-spaced points, avg@16 on the 317 Easy validation problems (and the
317 problems of the fixed training sample). d_val is explicit: both trees then evaluate the same problems."""

_E2E = """
import json, sys, time, torch
torch.set_num_threads(1)
from llm_backend.config import config_for
from llm_backend.loop import run
lm, n, bp, budget, seed, ev = json.loads(sys.argv[1])
cfg = config_for(lm, dataset="easy", n=n, bp=bp, budget=budget, seed=seed, **ev)
t, c = time.perf_counter(), time.process_time()
res = run(cfg)
wall, cpu = time.perf_counter() - t, time.process_time() - c
steps = res.steps
print(json.dumps({"n": n, "bp": bp, "budget": budget, "seed": seed, "steps": len(steps), "wall_s": wall,
                  "cpu_s": cpu, "rollouts_per_s": budget / wall, "rollouts_per_cpu_s": budget / cpu,
                  "t_rollout_s": sum(s["t_rollout"] for s in steps),
                  "t_train_s": sum(s["t_train"] for s in steps),
                  "evals": len(res.table["m"]), "val_mean_last": float(res.table["val_mean"][-1])}))
"""


def tree(ref: str | None) -> Path:
    """The import root of the code to time: this repository, or commit `ref` extracted once into .cache/."""
    import subprocess
    import tarfile
    import tempfile

    root = Path(__file__).resolve().parents[1]
    if ref is None:
        return root
    sha = subprocess.run(["git", "-C", str(root), "rev-parse", ref], check=True, capture_output=True,
                         text=True).stdout.strip()
    dest = root / ".cache" / f"tree-{sha[:12]}"
    if not (dest / ".complete").is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no .cache/
        blob = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", sha, "isocompute",
                               "sandbox", "llm_backend", "studies"], check=True, capture_output=True).stdout
        tmp = Path(tempfile.mkdtemp(dir=root / ".cache", prefix=".extract-"))
        with tempfile.TemporaryFile() as f:
            f.write(blob)
            f.seek(0)
            with tarfile.open(fileobj=f) as tar:
                tar.extractall(tmp, filter="data")
        (tmp / ".complete").write_text(sha + "\n")
        tmp.rename(dest)
    return dest


def end_to_end(root: Path, lm: str, n: int, bp: int, budget: int, seed: int = 0) -> dict:
    """One run of the code under `root` in a fresh process on one torch thread."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(root)}
    arg = json.dumps([lm, n, bp, budget, seed, STUDY_EVAL])
    proc = subprocess.run([sys.executable, "-c", _E2E, arg], cwd=root, env=env, capture_output=True,
                          text=True)
    if proc.returncode:
        raise RuntimeError(f"run under {root} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def two_runs_at_once(root: Path, lm: str, n: int, bp: int, budget: int) -> dict:
    """Two runs (seeds 0 and 1) in two processes at once, one core each, as a `--jobs 2` study runs them:
    rollouts/s of the machine = both runs' rollouts over the wall time until the later one ends."""
    from concurrent.futures import ThreadPoolExecutor

    t = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        parts = list(pool.map(lambda s: end_to_end(root, lm, n, bp, budget, s), (0, 1)))
    wall = time.perf_counter() - t  # includes both processes' start-up and imports
    return {"n": n, "bp": bp, "budget": budget, "runs": 2, "wall_s": wall,
            "rollouts_per_s": 2 * budget / wall, "run_wall_s": [p["wall_s"] for p in parts],
            "run_cpu_s": [p["cpu_s"] for p in parts]}


def warm_up(roots: dict, lm: str, bp: int) -> dict:
    """One short untimed run of each tree (n 4, 2^8 rollouts, its evaluations included) before the timed
    ones: the first process after a change to llm_backend/tiny/kernel.py compiles the kernel into Numba's
    on-disk cache (~15-25 s, once per install and edit), which no later run pays. Returns each tree's
    warm-up wall seconds."""
    return {k: end_to_end(root, lm, 4, bp, 256)["wall_s"] for k, root in roots.items()}


def interleaved(roots: dict, measure, reps: int, speedups: dict) -> dict:
    """`reps` measurements of each tree, in the order new, ref, ref, new, new, ref, ... (ABBA: a machine
    whose speed drifts linearly over the benchmark's minutes slows both trees alike; a shared cloud core's
    speed was seen to change by 1.2x between runs minutes apart: docs/tiny_lm/README.md, "Speed").

    Every run does the same work, so each speedup name -> the ratio ref / new of the time `speedups[name]`
    (wall_s, cpu_s) summed over the reps (the rate over all of them). Returns those, the median-wall
    measurement of each tree ("new", "ref"; of two, the slower), all of them ("new_runs", "ref_runs") and
    the first speedup per rep ("speedup_per_rep": its spread shows the machine's drift)."""
    names = list(roots)
    runs = {k: [] for k in names}
    for i in range(reps):
        for k in (names if i % 2 == 0 else names[::-1]):
            runs[k].append(measure(roots[k]))
    out = {k: sorted(v, key=lambda r: r["wall_s"])[len(v) // 2] for k, v in runs.items()}
    out.update({f"{k}_runs": v for k, v in runs.items()})
    if "ref" in runs:
        for name, key in speedups.items():
            out[name] = sum(r[key] for r in runs["ref"]) / sum(r[key] for r in runs["new"])
        key = next(iter(speedups.values()))
        out["speedup_per_rep"] = [y[key] / x[key] for x, y in zip(runs["new"], runs["ref"], strict=True)]
    return out


def timed(fn, reps: int, best: bool = False) -> float:
    """Median (best: smallest) seconds of `reps` calls (after one warm-up)."""
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts) if best else statistics.median(ts)


def rollout_compare(lm: str, bp: int, n: int, reps: int, peak: float, try_vllm: bool = True) -> dict:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from llm_backend.config import config_for
    from llm_backend.engines import HFEngine
    from llm_backend.model import load_model, load_tokenizer, resolve_model
    from llm_backend.problems import load_problems
    from llm_backend.tiny.sampler import KVEngine

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
    # the sampler's model FLOPs: 2 * parameters per token it runs (the bp prompts once, then every row at
    # each decoding step until the last row ends; attention excluded): a lower bound of its work
    ro = kv.generate(prompts, n, seed=1, **gen)
    P = max(len(tok.encode(p)) for p in prompts)
    processed = bp * P + bp * n * (max(len(t) for t in ro.token_ids) - 1)
    gflop = 2 * own.num_parameters() * processed / 1e9
    out = {"bp": bp, "n": n, "kv_s": t_kv, "hf_generate_s": t_hf, "kv_rollouts_per_s": bp * n / t_kv,
           "hf_rollouts_per_s": bp * n / t_hf, "kv_over_hf": t_hf / t_kv, "kv_model_gflop": gflop,
           "kv_share_of_peak": gflop / t_kv / peak}
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
    from llm_backend.problems import load_problems
    from llm_backend.tiny.sampler import KVEngine

    path = resolve_model(lm)
    cfg = config_for(lm, dataset="easy", n=n, bp=bp, budget=bp * n)
    train, _ = load_problems(cfg)
    own, tok = load_model(path), load_tokenizer(path)
    ro = KVEngine(own, tok).generate([p.question for p in train[:bp]], n, cfg.max_new_tokens, 1.0, seed=2)
    adv = np.random.default_rng(0).standard_normal(bp * n)
    pb = make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, n, tok.pad_token_id,
                           row_tokens=cfg.row_tokens, micro_tokens=cfg.micro_tokens)
    trained = sum(x.real_tokens for x in pb.chunks())
    out = {"bp": bp, "n": n, "packed_tokens": trained, "completion_tokens": ro.num_tokens}
    hf = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32)
    steps = {}
    for name, model in (("own", own), ("hf", hf)):
        model.train()
        opt = trainer.flat_adamw(model, cfg)  # the optimiser a run uses (llm_backend.trainer.Trainer)
        steps[name] = lambda m=model, o=opt: trainer.train_step(m, o, pb, cfg)  # noqa: E731
        steps[name]()  # warm-up
    # rounds of (own update, hf update, matmul peak), interleaved: a shared machine's speed drifts over
    # seconds, and each round's three numbers are taken at one moment
    rounds = []
    for _ in range(reps):
        row = {}
        for name, step in steps.items():
            t = time.perf_counter()
            step()
            row[name] = time.perf_counter() - t
        row["peak"] = matmul_peak(1, reps=5)
        rounds.append(row)
    for name in steps:
        out[f"{name}_update_s"] = statistics.median(r[name] for r in rounds)
        out[f"{name}_update_best_s"] = min(r[name] for r in rounds)
    peaks = [r["peak"] for r in rounds]
    if cpu_facts()["isa"] == "AMX":  # bf16 forward/backward on AMX, float32 master (trainer.MasterWeights)
        import copy

        master = copy.deepcopy(own)
        mixed = trainer.MasterWeights(master)
        opt = torch.optim.AdamW(master.parameters(), lr=1e-6)
        out["own_bf16_update_s"] = timed(lambda: trainer.train_step(master, opt, pb, cfg, None, mixed), reps)
    params = sum(p.numel() for p in own.parameters())
    gflop = 6 * params * trained / 1e9
    out["peak_at_run_start_gflops"] = peak
    out["peaks_beside_update_gflops"] = peaks
    peak = statistics.median(peaks)  # measured in every round, beside the updates' timings
    out.update(parameters=params, model_gflop=gflop, own_gflops=gflop / out["own_update_s"],
               matmul_peak_gflops=peak, own_share_of_peak=gflop / out["own_update_s"] / peak,
               # the float32 matmul floor of the update (its model FLOPs at the peak) and how far above it:
               # the median over rounds of the update's time over the floor at that round's peak
               floor_s=gflop / peak,
               own_over_floor=statistics.median(r["own"] / (gflop / r["peak"]) for r in rounds),
               # the same with the update's best time, the statistic of the peak (best of its reps)
               own_best_over_floor=out["own_update_best_s"] / (gflop / peak),
               own_over_hf=out["hf_update_s"] / out["own_update_s"])
    return out


TARGETS = {"single": {4: 2.0, 16: 1.5, 64: 1.5}, "pair": {4: 1.7}, "update_over_floor": 3.0}
"""The speed targets the tiny LM was set (docs/tiny_lm/README.md, "Speed"): single-run ratios by n, the
two-runs-at-once aggregate ratio, the update's distance to the matmul floor at n = 64."""


def markdown(result: dict) -> str:
    """The results table docs/tiny_lm/README.md quotes, rendered from a benchmark JSON (`--table FILE`)."""
    def met(x, target):
        if target is None:
            return f"**{x:.2f}x**"
        return f"**{x:.2f}x** ({'met' if x >= target else 'not met'}: {target:g}x)"

    single = {r["n"]: r for r in result["end_to_end"]}
    pairs = {r["n"]: r for r in result["two_runs_at_once"]}
    ns = sorted(single)
    rows = ["| | " + " | ".join(f"n = {n}" for n in ns) + " |", "|---" * (len(ns) + 1) + "|"]

    def row(label, cell):
        rows.append(f"| {label} | " + " | ".join(cell(n) for n in ns) + " |")

    reps = len(single[ns[0]]["speedup_per_rep"])
    which = "the slower of the two runs" if reps == 2 else f"the median of the {reps} runs"
    over = "both" if reps == 2 else f"all {reps}"
    row(f"one run on one core, rollouts/s of {which} (fd3ed65)",
        lambda n: f"{single[n]['new']['rollouts_per_s']:,.0f} ({single[n]['ref']['rollouts_per_s']:,.0f})")
    row(f"ratio over {over} reps (fd3ed65's seconds over this tree's, summed)",
        lambda n: met(single[n]["speedup_wall"], TARGETS["single"].get(n)))
    row("each rep's ratio", lambda n: " / ".join(f"{x:.2f}x" for x in single[n]["speedup_per_rep"]))
    row(f"rollout / train seconds of {which} (fd3ed65)",
        lambda n: "{:.1f} / {:.1f} ({:.1f} / {:.1f})".format(
            single[n]["new"]["t_rollout_s"], single[n]["new"]["t_train_s"], single[n]["ref"]["t_rollout_s"],
            single[n]["ref"]["t_train_s"]))
    row("two runs at once on two cores, aggregate rollouts/s (fd3ed65), ratio",
        lambda n: "" if n not in pairs else "{:,.0f} ({:,.0f}): {}".format(
            pairs[n]["new"]["rollouts_per_s"], pairs[n]["ref"]["rollouts_per_s"],
            met(pairs[n]["speedup_aggregate"], TARGETS["pair"].get(n))))
    u, ro, r = result["update"], result["rollout"], result
    load = (r["loadavg_before"][0], r["loadavg_after"][0])
    head = (f"CPU: {r['cpu']} ({r['isa']}), {r['cores']} cores, {r['torch_threads']} torch thread(s); 1-min "
            f"load {load[0]:.2f} before, {load[1]:.2f} after; float32 matmul peak "
            f"{u['matmul_peak_gflops']:.1f} GFLOP/s beside the update timings.")
    floor_ok = "met" if u["own_over_floor"] <= TARGETS["update_over_floor"] else "not met"
    lines = [head, "", *rows, "",
             f"- The update at n = {u['n']}: median {u['own_update_s'] * 1e3:.1f} ms, "
             f"**{u['own_over_floor']:.2f}x** the float32 matmul floor ({floor_ok}: within "
             f"{TARGETS['update_over_floor']:g}x; {u['own_share_of_peak']:.0%} of the peak), "
             f"{u['own_over_hf']:.2f}x the speed of transformers' LlamaForCausalLM on the same weights.",
             f"- Rollouts only, bp {ro['bp']} x n {ro['n']}: the kv engine {ro['kv_rollouts_per_s']:,.0f} "
             f"rollouts/s, {ro['kv_over_hf']:.2f}x transformers `generate` ({ro['kv_share_of_peak']:.0%} of "
             f"the peak)."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default="tiny")
    ap.add_argument("--budget", default="2^16", help="rollouts per end-to-end run")
    ap.add_argument("--ns", default="4,16,64", help="n of the single end-to-end runs")
    ap.add_argument("--pair-ns", default="4,64", help="n of the two-runs-at-once measurements")
    ap.add_argument("--bp", type=int, default=16)
    ap.add_argument("--ref", default="fd3ed65", help="reference commit timed in the same run ('' for none)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--reps", type=int, default=20, help="repetitions of the rollout and update timings")
    ap.add_argument("--e2e-reps", type=int, default=2,
                    help="end-to-end measurements per tree and n, interleaved new, ref, ref, new, ...")
    ap.add_argument("--update-n", type=int, default=64, help="n of the update-vs-peak measurement")
    ap.add_argument("--out", default=None, help="write the JSON here too")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM attempt (its start-up is slow)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--table", metavar="FILE", help="print the markdown table of a saved result and exit")
    a = ap.parse_args()
    if a.table:
        try:
            print(markdown(json.loads(Path(a.table).read_text())))
        except (OSError, ValueError, KeyError) as e:
            print(f"error: {a.table}: not a benchmark result ({type(e).__name__}: {e})", file=sys.stderr)
            sys.exit(2)
        return
    import torch

    from studies.config import parse_count

    if a.threads:
        torch.set_num_threads(a.threads)
    budget = parse_count(a.budget)
    load0 = os.getloadavg()
    peak = matmul_peak(a.threads)
    roots = {"new": tree(None), **({"ref": tree(a.ref)} if a.ref else {})}
    warm = warm_up(roots, a.lm, a.bp)
    single, pairs = [], []
    for n in (int(x) for x in a.ns.split(",")):
        single.append({"n": n, **interleaved(roots, lambda r, n=n: end_to_end(r, a.lm, n, a.bp, budget),
                                              a.e2e_reps, {"speedup_wall": "wall_s",
                                                           "speedup_cpu": "cpu_s"})})
    for n in (int(x) for x in a.pair_ns.split(",") if x):
        pairs.append({"n": n, **interleaved(roots, lambda r, n=n: two_runs_at_once(r, a.lm, n, a.bp, budget),
                                             a.e2e_reps, {"speedup_aggregate": "wall_s"})})
    result = {
        "command": "benchmarks/tiny_lm.py " + " ".join(
            f"--{k.replace('_', '-')}" + ("" if isinstance(v, bool) else f" {v}")
            for k, v in vars(a).items() if k not in ("json", "out", "table") and v is not False),
        **cpu_facts(), "torch_threads": torch.get_num_threads(), "dtype": "float32", "ref": a.ref,
        "study_eval": STUDY_EVAL, "loadavg_before": load0, "matmul_peak_gflops": peak,
        "warmup_wall_s": warm,
        "end_to_end": single, "two_runs_at_once": pairs,
        "rollout": rollout_compare(a.lm, a.bp, 8, a.reps, peak, not a.no_vllm),
        "update": update_compare(a.lm, a.bp, a.update_n, a.reps, peak),
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
