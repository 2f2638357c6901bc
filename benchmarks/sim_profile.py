"""Where a simulator step and an evaluation spend their time, phase by phase.

The GRPO step of the default options (plain PG, Adam, group advantages, no KL / entropy, no decoupled
baseline, no length model: what the Fig-6 sweep runs) is re-run here as a copy of `grpo.train_kernel`'s
loop calling the same helpers, with the CPU's cycle counter read between phases; `grpo._evaluate` likewise.
The copy's final parameters are checked against the real kernel's bit for bit, so the split is that of the
code the runs execute. Cycles are turned into CPU seconds by timing the whole loop with process_time (on a
shared machine CPU time is disturbed less than wall time; all figures here are CPU microseconds).

Phases of a step: batch (epoch shuffle, problem indices), logits (`batch_logits`), sample (softmax and the
rollout counts), adv (baselines and advantages), grad (logit gradients of the groups with signal), backward
(`batch_backward` and the private gradient rows), norm (gradient norm and divergence check), opt (Adam on
the shared block and the touched private rows). Of an evaluation: logits, softmax, metrics.

--length: CPU microseconds per step of one tabular run (easy, bp 32, n 2, seed 0) between 1/16 of
its budget and the end, at budget 2^22 and 2^26, with the kernels' flush of tiny values (grpo.TINY), without
it (hp[HP_TINY] = 0: plain arithmetic, subnormals included) and without it under FTZ/DAZ
(sandbox/fpflags.py, the hardware's own flush, as a reference), all in this process; flat in run length
means 2^26 / 2^22 near 1.
--compile: seconds (wall and CPU) of a first `sandbox.run_many` of the demo's two presets with an
empty NUMBA_CACHE_DIR, in a fresh process, and of the same call again with that cache filled.
--write writes docs/sim_profile.json and the table docs/SIM_PROFILE.md from what was measured.

Usage: python benchmarks/sim_profile.py [--n 2,8,256] [--models tabular,interference] [--steps 20000]
       [--length] [--compile] [--json] [--write]
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from sandbox import SimConfig, grpo  # noqa: E402
from sandbox.kernels.layout import ADAM, SMALL_N  # noqa: E402
from sandbox.kernels.objective import advantages, logit_gradient, reward_std  # noqa: E402
from sandbox.kernels.optimizer import grad_norm, step  # noqa: E402
from sandbox.kernels.rollouts import _categorical_counts  # noqa: E402
from sandbox.kernels.softmax import _softmax_row, _softmax_rows  # noqa: E402
from sandbox.kernels.train import _private_grads  # noqa: E402
from sandbox.policies import batch_backward, batch_logits, work_size  # noqa: E402
from sandbox.rng import multinomial, shuffle  # noqa: E402
from sandbox.runner import prepare  # noqa: E402

STEP_PHASES = ("batch", "logits", "sample", "adv", "grad", "backward", "norm", "opt")
EVAL_PHASES = ("logits", "softmax", "metrics")


@intrinsic
def _cycles(typingctx):
    """The CPU's cycle counter (llvm.readcyclecounter: rdtsc on x86)."""
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@njit(error_model="numpy")
def _profiled_steps(kind, data, S, s_sh, s_pr, d, offset, correct, theta, theta0, m1, m2, pw, row_t, stamp,
                    perm, st, hp, ip, rs, moved, K, m_end, cyc):
    """`grpo.train_kernel` for plain PG with Adam / SGD, no KL, entropy, n_est or length model; cycles per
    phase added to cyc (8,)."""
    n = ip[grpo.IP_N]
    bp = ip[grpo.IP_BP]
    opt = ip[grpo.IP_OPT]
    scale = ip[grpo.IP_SCALE]
    sample_std = ip[grpo.IP_SAMPLE_STD] != 0
    categorical = ip[grpo.IP_SAMPLER] == grpo.SAMPLER_AUTO and n <= SMALL_N
    lr = hp[grpo.HP_LR]
    b1 = hp[grpo.HP_B1]
    b2 = hp[grpo.HP_B2]
    eps = hp[grpo.HP_EPS]
    wd = hp[grpo.HP_WD] if opt != ADAM else 0.0
    adv_eps = hp[grpo.HP_ADV_EPS]
    tiny = hp[grpo.HP_TINY]
    has_priv = s_pr != 0.0
    batch = np.empty(bp, dtype=np.int64)
    counts = np.empty((bp, K), dtype=np.int64)
    Z = np.empty((bp, K))
    logp_old = np.empty((bp, K))
    pis = np.empty((bp, K))
    DZ = np.empty((bp, K))
    PG_ = np.empty((bp, K))
    a_c = np.empty(bp)
    a_w = np.empty(bp)
    silent = np.empty(bp, dtype=np.bool_)
    keep = np.ones(bp, dtype=np.bool_)  # no zero-variance filter
    work = np.zeros(work_size(kind, data[3], K, bp))
    gshared = np.zeros(S)
    pflat = np.zeros(d * K if has_priv else K)
    pgrad = pflat.reshape((pflat.shape[0] // K, K))
    touched = np.empty(bp, dtype=np.int64)
    logp0 = np.zeros((1, K))
    smx = np.empty(bp)
    smxe = np.empty(bp * K)
    while st[grpo.ST_STEP] < m_end:
        t_step = st[grpo.ST_STEP]
        t0 = _cycles()
        for b in range(bp):
            if st[grpo.ST_POS] >= d:
                shuffle(rs, perm)
                st[grpo.ST_POS] = 0
            batch[b] = perm[st[grpo.ST_POS]]
            st[grpo.ST_POS] += 1
        t1 = _cycles()
        cyc[0] += t1 - t0
        if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, batch, Z, work):
            return 1
        t2 = _cycles()
        cyc[1] += t2 - t1
        tot_c = 0.0
        _softmax_rows(Z, bp, pis, logp_old, False, smx, smxe)
        for b in range(bp):
            g = batch[b]
            cg = correct[g]
            if categorical:
                c = _categorical_counts(rs, pis[b], n, cg, False, counts[b])
            else:
                multinomial(rs, pis[b], n, cg, counts[b])
                c = counts[b, cg]
            tot_c += c
            a_c[b] = c / n
        t3 = _cycles()
        cyc[2] += t3 - t2
        bmean = tot_c / (bp * n)
        batch_std = reward_std(bmean, bp * n, sample_std)
        for b in range(bp):
            mean = a_c[b]
            c = counts[b, correct[batch[b]]]
            std = reward_std(mean, n, sample_std)
            ac, aw = advantages(c, n, mean, std, scale, batch_std, adv_eps)
            if c == 0 or c == n:
                ac, aw = 0.0, 0.0
            a_c[b] = ac
            a_w[b] = aw
            silent[b] = ac == 0.0 and aw == 0.0
        t4 = _cycles()
        cyc[3] += t4 - t3
        n_loud = 0
        inv = 1.0 / bp
        for b in range(bp):
            dz = DZ[b]
            if silent[b]:
                for k in range(K):
                    dz[k] = 0.0
                continue
            n_loud += 1
            g = batch[b]
            logit_gradient(counts[b], n, correct[g], a_c[b], a_w[b], pis[b], logp_old[b], logp_old[b],
                           logp0[0], grpo.PG, 0.0, 0.0, 0.0, dz)
            for k in range(K):
                dz[k] = -dz[k] * inv
        t5 = _cycles()
        cyc[4] += t5 - t4
        for j in range(S):
            gshared[j] = 0.0
        if n_loud > 0:
            batch_backward(kind, theta, data, S, s_sh, s_pr, d, batch, DZ, gshared, PG_, work)
        n_touched = 0
        if has_priv:
            n_touched = _private_grads(batch, keep, silent, 0, bp, t_step + 1, stamp, PG_, pgrad, touched)
        t6 = _cycles()
        cyc[5] += t6 - t5
        gn = grad_norm(gshared, pgrad, touched, n_touched, tiny)
        if not np.isfinite(gn):
            return 2
        t7 = _cycles()
        cyc[6] += t7 - t6
        step(theta, theta0, m1, m2, pw, row_t, moved, st, gshared, pflat, K, touched, n_touched, opt, lr, b1,
             b2, eps, wd, tiny)
        cyc[7] += _cycles() - t7
        st[grpo.ST_STEP] += 1
    return 0


@njit(error_model="numpy")
def _profiled_eval(kind, data, S, s_sh, s_pr, d, offset, correct, logp0, theta, n, k_metric, reps, cyc):
    """The exact-metric path of `grpo._evaluate`, reps times; cycles per phase into cyc (3,)."""
    K = logp0.shape[1]
    G = offset.shape[0]
    C = grpo.EVAL_CHUNK
    Z = np.empty((C, K))
    logp = np.empty(K)
    pi = np.empty(K)
    idx = np.empty(C, dtype=np.int64)
    work = np.zeros(work_size(kind, data[3], K, C))
    total = 0.0
    for _ in range(reps):
        for lo in range(0, G, C):
            nb = min(C, G - lo)
            for i in range(nb):
                idx[i] = lo + i
            t0 = _cycles()
            batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work)
            t1 = _cycles()
            cyc[0] += t1 - t0
            for i in range(nb):
                g = lo + i
                _softmax_row(Z, i, logp, pi)
                Z[i, 0] = pi[correct[g]]
                if g < d:
                    h = 0.0
                    klv = 0.0
                    for k in range(K):
                        h -= pi[k] * logp[k]
                        klv += pi[k] * (logp[k] - logp0[g, k])
                    Z[i, 1] = h + klv
            t2 = _cycles()
            cyc[1] += t2 - t1
            for i in range(nb):
                p = Z[i, 0]
                total += p + 1.0 - (1.0 - p) ** k_metric + p**k_metric + (1.0 if p < 1e-3 else 0.0)
                if lo + i < d:
                    total += p**n + (1.0 - p) ** n + Z[i, 1]
            cyc[2] += _cycles() - t2
    return total


def profile(model: str, n: int, steps: int, evals: int) -> dict:
    """Phase split of `steps` GRPO steps (from the run's midpoint state) and of `evals` evaluations."""
    cfg = SimConfig(model=model, n=n, bp=32, budget=max(2 * steps, 64) * 32 * n)
    a, b = prepare(cfg), prepare(cfg)
    mid = steps // 2
    a.train_to(mid)
    b.train_to(mid)
    args = b.policy.args()
    cyc = np.zeros(len(STEP_PHASES), dtype=np.int64)

    def mirror(state, m_end, cyc):
        return _profiled_steps(*args, state.theta, state.theta0, state.m1, state.m2, state.pw, state.row_t,
                               state.stamp, state.perm, state.st, state.hp, state.ip, state.rs, state.moved,
                               cfg.K, m_end, cyc)

    t0 = time.process_time()
    a.train_to(mid + steps)
    real_s = time.process_time() - t0
    t0 = time.process_time()
    assert mirror(b, mid + steps, cyc) == 0
    hz = cyc.sum() / (time.process_time() - t0)  # cycles per CPU second, phases' share of the loop's CPU time
    same = bool(np.array_equal(a.theta, b.theta))
    ecyc = np.zeros(len(EVAL_PHASES), dtype=np.int64)
    _profiled_eval(*args, b.logp0, b.theta, n, cfg.k, 1, ecyc)
    ecyc[:] = 0
    t0 = time.process_time()
    _profiled_eval(*args, b.logp0, b.theta, n, cfg.k, evals, ecyc)
    ehz = ecyc.sum() / (time.process_time() - t0)
    pt, pv, out = np.empty(cfg.d), np.empty(cfg.d_val), np.empty(12)
    t0 = time.process_time()
    for _ in range(evals):
        b.evaluate(b.theta, pt, pv, out)
    real_eval = time.process_time() - t0
    plain_s, cached_s, cached_same = _evals_along_run(cfg, steps, evals)
    us = {p: float(c) / hz / steps * 1e6 for p, c in zip(STEP_PHASES, cyc, strict=True)}
    eus = {p: float(c) / ehz / evals * 1e6 for p, c in zip(EVAL_PHASES, ecyc, strict=True)}
    full_steps = cfg.steps
    return {"model": model, "n": n, "bp": 32, "steps_timed": steps, "mirror_equals_kernel": same,
            "us_per_step": real_s / steps * 1e6, "us_per_step_phases": us,
            "us_per_eval": real_eval / evals * 1e6, "us_per_eval_phases": eus,
            "run_evals": {"points": evals, "us_per_eval_plain": plain_s, "us_per_eval_cached": cached_s,
                          "cached_equals_plain": cached_same},
            "eval_share_at_2^26": _eval_share(model, n, real_s / steps,
                                              (cached_s if cached_s is not None else plain_s) / 1e6),
            "steps_at_budget_2^26": 2**26 // (32 * n), "steps_now": full_steps}


def _evals_along_run(cfg: SimConfig, steps: int, evals: int):
    """Mean CPU microseconds of an evaluation at `evals` log-spaced points of a `steps`-step run: the plain
    `grpo._evaluate` (what runner.evaluate calls) and `grpo._evaluate_cached` as `_run_full` calls it (None
    on commits without it), and whether both gave the same numbers bit for bit."""
    from sandbox.runner import eval_steps

    st = prepare(cfg)
    args = st.policy.args()
    G = cfg.d + cfg.d_val
    cached = getattr(grpo, "_evaluate_cached", None)
    cache, cstamp = np.zeros((G, getattr(grpo, "N_CACHE", 1))), np.full(G, -1, dtype=np.int64)
    bufs = [(np.empty(cfg.d), np.empty(cfg.d_val), np.empty(12)) for _ in range(2)]
    t_plain = t_cached = 0.0
    same = True
    pts = eval_steps(steps, evals)
    for m in pts:
        st.train_to(int(m))
        rs_a, rs_b = st.rs_eval.copy(), st.rs_eval.copy()
        t0 = time.process_time()
        grpo._evaluate(*args, st.problems.lens, st.logp0, st.theta, cfg.n, cfg.k, False, rs_a, *bufs[0])
        t_plain += time.process_time() - t0
        if cached is not None:
            t0 = time.process_time()
            cached(*args, st.problems.lens, st.logp0, st.theta, cfg.n, cfg.k, False, rs_b, *bufs[1], cache,
                   cstamp, st.row_t, True)
            t_cached += time.process_time() - t0
            same = same and all(np.array_equal(x, y) for x, y in zip(bufs[0], bufs[1], strict=True))
    E = len(pts)
    return t_plain / E * 1e6, (t_cached / E * 1e6 if cached is not None else None), same


def _eval_share(model, n, step_s, eval_s):
    steps = 2**26 // (32 * n)
    return 32 * eval_s / (32 * eval_s + steps * step_s)


def _per_step_after(cfg: SimConfig, tiny: float | None, ftz: bool) -> float:
    """CPU microseconds per step from 1/16 of the run to its end (the state of a long run)."""
    import contextlib

    from sandbox.fpflags import flush_to_zero

    st = prepare(cfg)
    if tiny is not None:
        st.hp[grpo.HP_TINY] = tiny
    lo = cfg.steps // 16
    st.train_to(lo)
    with flush_to_zero() if ftz else contextlib.nullcontext():
        t0 = time.process_time()
        st.train_to(cfg.steps)
        dt = time.process_time() - t0
    return dt / (cfg.steps - lo) * 1e6


def length(budgets=(2**22, 2**26)) -> dict:
    """Per-step CPU cost against run length, flushed / unflushed / unflushed under FTZ-DAZ."""
    variants = {"flushed": (None, False), "unflushed": (0.0, False), "unflushed_ftz": (0.0, True)}
    prepare(SimConfig(budget=2**12, n=2)).train_to(4)  # compile
    out = {}
    for b in budgets:
        cfg = SimConfig(model="tabular", dataset="easy", bp=32, n=2, seed=0, budget=b)
        out[f"2^{int(np.log2(b))}"] = {k: _per_step_after(cfg, *v) for k, v in variants.items()}
    lo, hi = (f"2^{int(np.log2(b))}" for b in (budgets[0], budgets[-1]))
    ratios = {k: out[hi][k] / out[lo][k] for k in variants}
    return {"config": "tabular easy bp 32 n 2 seed 0", "us_per_step": out, "ratio_long_over_short": ratios,
            "load": os.getloadavg()}


_COMPILE_SNIPPET = """
import time, resource, sandbox
from sandbox import SimConfig
cfgs = [SimConfig(model=m, dataset="easy", bp=32, budget=2**13, d=512, d_val=256, n_evals=24, n=n, seed=0)
        for m in ("tabular", "interference") for n in (2, 256)]
for i in range(2):
    w, c = time.perf_counter(), time.process_time()
    sandbox.run_many(cfgs, threads=2)
    print(time.perf_counter() - w, time.process_time() - c)
"""


def compile_time() -> dict:
    """Cold (empty NUMBA_CACHE_DIR) and warm seconds of the demo's first run_many, in a fresh process."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], env=env, capture_output=True, text=True,
                           check=True)
        total = time.perf_counter() - t0
    (cw, cc), (ww, wc) = (tuple(map(float, ln.split())) for ln in p.stdout.split("\n")[:2])
    return {"cold_wall_s": cw, "cold_cpu_s": cc, "warm_wall_s": ww, "warm_cpu_s": wc,
            "process_wall_s": total, "notice_printed": "compiling simulator kernels" in p.stderr,
            "load": os.getloadavg()}


def _cpu_name() -> str:
    """The CPU model, its widest SIMD and the core count (from /proc/cpuinfo; '' where not readable)."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model}, {simd}, {os.cpu_count()} cores"


def write_docs(rows, length_res, compile_res, root: str = "docs", load=None, cpu: str | None = None) -> None:
    """docs/sim_profile.json (everything measured) and docs/SIM_PROFILE.md (the tables, generated from it;
    `--from-json` rewrites the table from the committed JSON)."""
    data = {"profile": rows, "length": length_res, "compile": compile_res,
            "load": list(load) if load is not None else list(os.getloadavg()),
            "cpu": _cpu_name() if cpu is None else cpu}
    with open(os.path.join(root, "sim_profile.json"), "w") as f:
        json.dump(data, f, indent=1)
    lines = ["# One simulator step, phase by phase", "",
             "Generated by `python benchmarks/sim_profile.py --write` from docs/sim_profile.json (CPU "
             f"microseconds, one thread, bp 32, easy; {data['cpu'] or 'CPU not recorded'}; the machine was "
             f"shared: 1-minute load {data['load'][0]:.1f} at the end). Phases: see the benchmark's "
             "docstring.", ""]
    if rows:
        lines += ["| model | n | us/step | " + " | ".join(STEP_PHASES) + " | us/eval (cached) |",
                  "|---|---:|---:|" + "---:|" * len(STEP_PHASES) + "---:|"]
        for r in rows:
            ev = r["run_evals"]["us_per_eval_cached"] or r["run_evals"]["us_per_eval_plain"]
            lines.append(f"| {r['model']} | {r['n']} | {r['us_per_step']:.2f} | "
                         + " | ".join(f"{r['us_per_step_phases'][p]:.2f}" for p in STEP_PHASES)
                         + f" | {ev:.0f} |")
        lines.append("")
        tops = []
        for r in rows:
            ph = r["us_per_step_phases"]
            top = max(ph, key=ph.get)
            tops.append(f"{r['model']} n {r['n']}: {top} {ph[top] / r['us_per_step']:.0%}")
        lines += ["Largest phase of a step: " + "; ".join(tops) + ".", ""]
    if length_res:
        lr = length_res
        lines += [f"Per-step cost against run length ({lr['config']}; steps from 1/16 of the budget to the "
                  "end; `--length`):", "",
                  "| budget | flushed (grpo.TINY) | unflushed | unflushed, FTZ/DAZ |",
                  "|---|---:|---:|---:|"]
        for b, v in lr["us_per_step"].items():
            lines.append(f"| {b} | {v['flushed']:.2f} | {v['unflushed']:.2f} | {v['unflushed_ftz']:.2f} |")
        q = lr["ratio_long_over_short"]
        lines += [f"| ratio | {q['flushed']:.2f} | {q['unflushed']:.2f} | {q['unflushed_ftz']:.2f} |", ""]
    if compile_res:
        c = compile_res
        lines += [f"First run (`--compile`, the demo's presets through run_many, empty NUMBA_CACHE_DIR): "
                  f"{c['cold_wall_s']:.1f} s wall, {c['cold_cpu_s']:.1f} s CPU cold; "
                  f"{c['warm_wall_s']:.2f} s with the cache filled (load {c['load'][0]:.1f}).", ""]
    (Path(root) / "SIM_PROFILE.md").write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="2,8,256")
    ap.add_argument("--models", default="tabular,interference")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--evals", type=int, default=32)
    ap.add_argument("--length", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--no-profile", action="store_true", help="skip the phase table")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help="docs/sim_profile.json and docs/SIM_PROFILE.md")
    ap.add_argument("--from-json", action="store_true", help="rewrite docs/SIM_PROFILE.md from the JSON")
    args = ap.parse_args()
    if args.from_json:
        with open(os.path.join("docs", "sim_profile.json")) as f:
            d = json.load(f)
        write_docs(d["profile"], d["length"], d["compile"], load=d["load"], cpu=d.get("cpu", ""))
        return
    rows = []
    if not args.no_profile:
        for model in args.models.split(","):
            for n in (int(x) for x in args.n.split(",")):
                profile(model, n, 200, 2)  # compile
                rows.append(profile(model, n, args.steps, args.evals))
    length_res = length() if args.length else None
    compile_res = compile_time() if args.compile else None
    if args.write:
        write_docs(rows, length_res, compile_res)
    if args.json:
        print(json.dumps({"profile": rows, "length": length_res, "compile": compile_res}))
        return
    if length_res:
        print(json.dumps(length_res, indent=1))
    if compile_res:
        print(json.dumps(compile_res, indent=1))
    if not rows:
        return
    print(f"{'model':<13}{'n':>4} {'us/step':>8}  " + " ".join(f"{p:>8}" for p in STEP_PHASES)
          + f"  {'us/eval':>8}  " + " ".join(f"{p:>8}" for p in EVAL_PHASES) + f"  {'cached':>8}"
          + "  eval@2^26  same")
    for r in rows:
        print(f"{r['model']:<13}{r['n']:>4} {r['us_per_step']:8.2f}  "
              + " ".join(f"{r['us_per_step_phases'][p]:8.2f}" for p in STEP_PHASES)
              + f"  {r['run_evals']['us_per_eval_plain']:8.0f}  "
              + " ".join(f"{r['us_per_eval_phases'][p]:8.0f}" for p in EVAL_PHASES)
              + f"  {r['run_evals']['us_per_eval_cached'] or float('nan'):8.0f}"
              + f"  {r['eval_share_at_2^26']:8.1%}  {r['mirror_equals_kernel']}"
              + f" {r['run_evals']['cached_equals_plain']}")


if __name__ == "__main__":
    main()
