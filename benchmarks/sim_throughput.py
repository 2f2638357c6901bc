"""Simulator throughput: rollouts per second on one core, as a ratio to a per-rollout numpy GRPO step.

Target setting: tabular and interference at bp = 32, K = 8, n = 256, log-spaced evaluation on 1,024
validation problems (and 1,024 training problems), `dim` = 64 (the `interference` preset fixes its embedding
dimension at 16, so `mlp` at dim = 64 is measured too). The baseline runs the same GRPO step (Adam, group
advantages) in numpy, drawing every rollout separately and computing per-rollout advantages and log-prob
gradients, vectorised over rollouts (the strong baseline); the literal one-rollout-at-a-time Python loop is
timed too (the weak baseline). Both are timed over a few hundred steps in the same process.
Times are CPU seconds of this process (time.process_time), which a shared machine disturbs less than wall
time; the simulated run includes problem generation and all evaluations.

--single: one interference run at n = 256, bp = 32, d = d_val = 1024, 32 evaluations, to --budget,
with 1 and with 2 threads (sandbox.run `threads`: training on one, the evaluations on the others), best of
--reps wall times taken alternately in this process, as rollouts per second of wall time (target 8e8 on 2
cores), with the tables checked equal bit for bit; --ref COMMIT times that commit's simulator on the same run
in the same process (its sandbox/ read from git, one thread), for the ratio against it. --out FILE writes the
JSON object (docs/sim_throughput.json).

Usage: python benchmarks/sim_throughput.py [--budget 2^27] [--baseline-steps 200] [--json]
       python benchmarks/sim_throughput.py --single [--budget 2^27] [--reps 3] [--ref COMMIT] [--out FILE]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from sandbox import SimConfig, run  # noqa: E402
from sandbox.policies import build_policy  # noqa: E402
from sandbox.problems import make_problems  # noqa: E402

TARGET_RATE = 5e8
TARGET_RATIO = 100.0
TARGET_SINGLE = 8e8
"""Target of one interference run at n = 256 on 2 cores, rollouts per second of wall time."""


def _count(text: str) -> int:
    text = text.strip()
    if "^" in text:
        a, b = text.split("^")
        return int(a) ** int(b)
    return int(float(text))


def baseline_step_seconds(cfg: SimConfig, steps: int) -> float:
    """Seconds per GRPO step of a straightforward numpy implementation (per-rollout draws and gradients)."""
    problems = make_problems(cfg)
    pol = build_policy(cfg, problems)
    rng = np.random.default_rng(0)
    theta = pol.theta0.copy()
    m1 = np.zeros_like(theta)
    m2 = np.zeros_like(theta)
    K, n, bp, d = cfg.K, cfg.n, cfg.bp, cfg.d
    lr, b1, b2, eps = cfg.effective_lr(), cfg.beta1, cfg.beta2, cfg.adam_eps
    perm = rng.permutation(d)
    pos = 0
    pol.forward(theta, perm[:bp])  # compile / load the policy kernels outside the timing
    pol.backward(theta, perm[:bp], np.zeros((bp, K)))
    t0 = time.process_time()
    for t in range(1, steps + 1):
        if pos + bp > d:
            perm, pos = rng.permutation(d), 0
        idx = perm[pos:pos + bp]
        pos += bp
        z = pol.forward(theta, idx)  # (bp, K)
        pi = np.exp(z - z.max(axis=1, keepdims=True))
        pi /= pi.sum(axis=1, keepdims=True)
        # every rollout drawn separately: inverse-CDF of one uniform per rollout
        u = rng.random((bp, n, 1))
        answers = (u > np.cumsum(pi, axis=1)[:, None, :]).sum(axis=2).clip(max=K - 1)  # (bp, n)
        r = (answers == problems.correct[idx][:, None]).astype(np.float64)
        mean = r.mean(axis=1, keepdims=True)
        std = r.std(axis=1, keepdims=True)
        adv = np.where(std > 0, (r - mean) / np.where(std > 0, std, 1.0), 0.0)  # (bp, n)
        onehot = np.eye(K)[answers]  # (bp, n, K)
        glogp = onehot - pi[:, None, :]  # d log pi(a_j) / dz per rollout
        dz = -(adv[:, :, None] * glogp).mean(axis=1) / bp  # descent gradient on logits (bp, K)
        g = pol.backward(theta, idx, dz)
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g * g
        theta -= lr * (m1 / (1 - b1**t)) / (np.sqrt(m2 / (1 - b2**t)) + eps)
    return (time.process_time() - t0) / steps


def loop_step_seconds(cfg: SimConfig, steps: int) -> float:
    """Seconds per step of the literal implementation: a Python loop draws and scores each rollout."""
    problems = make_problems(cfg)
    pol = build_policy(cfg, problems)
    rng = np.random.default_rng(0)
    theta = pol.theta0.copy()
    K, n, bp, d, lr = cfg.K, cfg.n, cfg.bp, cfg.d, cfg.effective_lr()
    pol.forward(theta, np.arange(bp))  # compile / load outside the timing
    pol.backward(theta, np.arange(bp), np.zeros((bp, K)))
    t0 = time.process_time()
    for _ in range(steps):
        idx = rng.choice(d, size=bp, replace=False)
        z = pol.forward(theta, idx)
        dz = np.zeros((bp, K))
        for b in range(bp):
            pi = np.exp(z[b] - z[b].max())
            pi /= pi.sum()
            answers = [rng.choice(K, p=pi) for _ in range(n)]
            rewards = [1.0 if a == problems.correct[idx[b]] else 0.0 for a in answers]
            mean = sum(rewards) / n
            std = (sum((r - mean) ** 2 for r in rewards) / n) ** 0.5
            for a, r in zip(answers, rewards, strict=True):
                adv = (r - mean) / std if std > 0 else 0.0
                glogp = -pi.copy()
                glogp[a] += 1.0
                dz[b] -= adv * glogp / (n * bp)
        theta -= lr * pol.backward(theta, idx, dz)  # plain SGD: the loop, not the optimiser, is the point
    return (time.process_time() - t0) / steps


def measure(model: str, dim: int, budget: int, baseline_steps: int) -> dict:
    cfg = SimConfig(model=model, dim=dim, bp=32, K=8, n=256, d=1024, d_val=1024, budget=budget, n_evals=32)
    run(SimConfig(**{**cfg.to_dict(), "budget": cfg.batch * 4}), threads=1)  # compile / load the kernel cache
    t0 = time.process_time()
    res = run(cfg, threads=1)
    sim_s = time.process_time() - t0
    rollouts = cfg.steps * cfg.batch
    rate = rollouts / sim_s
    base = baseline_step_seconds(cfg, baseline_steps)
    base_rate = cfg.batch / base
    loop = loop_step_seconds(cfg, 2)
    return {"model": model, "dim": dim, "steps": cfg.steps, "evals": int(res.table["m"].size),
            "sim_seconds": sim_s, "sim_us_per_step": sim_s / cfg.steps * 1e6, "rollouts_per_s": rate,
            "baseline_us_per_step": base * 1e6, "baseline_rollouts_per_s": base_rate,
            "ratio": rate / base_rate,
            "loop_us_per_step": loop * 1e6, "loop_ratio": rate / (cfg.batch / loop),
            "meets_rate": rate >= TARGET_RATE, "meets_ratio": rate / base_rate >= TARGET_RATIO}


def single_run(budget: int, reps: int = 3, threads=(1, 2), ref: str | None = None) -> dict:
    """Wall time of one interference run (n = 256, bp = 32) with each thread count, best of `reps` taken in
    turn, and with `ref`'s simulator (one thread) in the same rotation; tables checked equal across counts."""
    cfg = SimConfig(model="interference", bp=32, K=8, n=256, d=1024, d_val=1024, budget=budget, n_evals=32)
    small = SimConfig(**{**cfg.to_dict(), "budget": cfg.batch * 4})
    runners = {f"threads={t}": (lambda c, t=t: run(c, threads=t)) for t in threads}
    for f in runners.values():
        f(small)  # compile / load the kernel cache
    old = None
    if ref:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from sim_sweep import _old_config, old_sandbox

        old = old_sandbox(ref)
        if old is not None:
            old.run(_old_config(old, small))
            runners[f"ref {ref}"] = lambda c: old.run(_old_config(old, c))
    load0 = os.getloadavg()
    wall = {k: [] for k in runners}
    cpu = {k: [] for k in runners}
    tables = {}
    names = list(runners)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            w, c = time.perf_counter(), time.process_time()
            res = runners[name](cfg)
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
            tables[name] = res.table
    rollouts = cfg.steps * cfg.batch
    first = tables[names[0]]
    floats = [c for c in first if first[c].dtype.kind == "f"]
    same = {k: all(np.array_equal(first[c], t[c], equal_nan=True) for c in floats) for k, t in tables.items()}
    rows = {k: {"wall_s": min(wall[k]), "cpu_s": min(cpu[k]), "rollouts_per_s": rollouts / min(wall[k]),
                "walls_s": wall[k], "table_equals_threads_1": same[k]} for k in runners}
    two = rows.get("threads=2")
    out = {"model": "interference", "n": 256, "bp": 32, "d": 1024, "d_val": 1024, "budget": budget,
           "steps": cfg.steps, "evals": int(first["m"].size), "reps": reps, "runs": rows,
           "ratio_2_over_1_threads": rows["threads=1"]["wall_s"] / two["wall_s"] if two else None,
           "target_rollouts_per_s": TARGET_SINGLE,
           "meets_target": bool(two and two["rollouts_per_s"] >= TARGET_SINGLE),
           "load_before": list(load0), "load_after": list(os.getloadavg()),
           "cpu": _cpu_name()}
    if old is not None:
        base = rows[f"ref {ref}"]["wall_s"]
        out["ref"] = ref
        out["ratio_vs_ref"] = {k: base / r["wall_s"] for k, r in rows.items() if k.startswith("threads")}
    return out


def _cpu_name() -> str:
    """The CPU model and its widest SIMD (from /proc/cpuinfo; '' where that is not readable)."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    simd = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else ""
    return f"{model}, {simd}, {os.cpu_count()} cores".replace(", ,", ",")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="2^27", help="rollouts per simulated run (default 2^27)")
    ap.add_argument("--baseline-steps", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--single", action="store_true", help="one interference run at n = 256, 1 vs 2 threads")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ref", default=None, help="with --single: an older commit timed in the same process")
    ap.add_argument("--out", help="with --single: write the JSON object to this file")
    args = ap.parse_args()
    budget = _count(args.budget)
    if args.single:
        out = single_run(budget, args.reps, ref=args.ref)
        out["command"] = "python benchmarks/sim_throughput.py " + " ".join(sys.argv[1:])
        if args.out:
            with open(args.out, "w") as f:
                f.write(json.dumps(out, indent=1) + "\n")
        if args.json:
            print(json.dumps(out))
            return
        for k, r in out["runs"].items():
            print(f"{k:<16} {r['wall_s']:7.3f} s wall {r['cpu_s']:7.3f} s CPU {r['rollouts_per_s']:10.3g} "
                  f"rollouts/s  same table: {r['table_equals_threads_1']}")
        verdict = "met" if out["meets_target"] else "not met"
        print(f"2 threads / 1: x{out['ratio_2_over_1_threads']:.2f}; target {TARGET_SINGLE:.0e} rollouts/s "
              f"on 2 threads: {verdict} (load {out['load_before'][0]:.1f} -> {out['load_after'][0]:.1f}, "
              f"{out['cpu']})")
        return
    rows = [measure(m, 64, budget, args.baseline_steps) for m in ("tabular", "interference", "mlp")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':<13}{'us/step':>9}{'rollouts/s':>12}{'numpy us/step':>15}{'numpy r/s':>11}{'ratio':>8}"
          f"{'loop us/step':>14}{'loop ratio':>11}")
    for r in rows:
        name = f"{r['model']}" + ("" if r["model"] == "interference" else f"/{r['dim']}")
        print(f"{name:<13}{r['sim_us_per_step']:>9.1f}{r['rollouts_per_s']:>12.3g}{r['baseline_us_per_step']:>15.0f}"
              f"{r['baseline_rollouts_per_s']:>11.3g}{r['ratio']:>8.0f}{r['loop_us_per_step']:>14.0f}"
              f"{r['loop_ratio']:>11.0f}")
    print(f"targets: >= {TARGET_RATE:.0e} r/s, ratio >= {TARGET_RATIO:.0f}. numpy: per-rollout draws and")
    print("gradients vectorised over rollouts; loop: one Python iteration per rollout (CPU time, one core)")


if __name__ == "__main__":
    main()
