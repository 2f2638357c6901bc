"""Interference experiments and mechanism measurements (issue 4; PAPER.md Section 5.1, Fig 11 / 27).

The paper explains why large n wins in LLMs by interference across problems: a tabular learner (independent
logits per problem) should spend compute on sequential steps (claim 1), a shared-parameter learner may favour
parallel rollouts (claim 2: n*(C) grows with C and saturates). This module runs paired n-sweeps of the
simulator directly (`sandbox.run`, one run per (config, seed) gives the whole learning curve because the lr is
constant after the batch rule), caches them on disk, and measures:

- n*(C) on a log grid of budgets (per-seed curves interpolated in log compute, seed means);
- the headline contrast at the top budget: best large-n minus best small-n, paired over seeds (same problems);
- pass@1 distribution at matched compute (zero fraction, polarisation; Fig 11 / 27);
- the gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018) from per-problem GRPO
  gradient pieces at parameters reached during training;
- the zero-variance-group share (`zero_var_frac` of the table).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_CACHE = Path("results/science/cache")
TABLE_COLS = (
    "n",
    "bp",
    "seed",
    "m",
    "compute",
    "lr",
    "train_mean",
    "val_mean",
    "val_best_k",
    "val_worst_k",
    "train_best_k",
    "train_worst_k",
    "train_zero_frac",
    "val_zero_frac",
    "zero_var_frac",
    "kl",
    "grad_norm",
    "tokens",
)


def _sandbox_source_hash() -> str:
    """Hash of the simulator's source files: a cached run is reused only for the code that produced it."""
    import sandbox

    h = hashlib.sha1()
    for f in sorted(Path(sandbox.__file__).parent.glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


_SOURCE: list[str] = []


def config_key(cfg) -> str:
    """Stable short hash of a SimConfig and the simulator's source (the cache file name)."""
    if not _SOURCE:
        _SOURCE.append(_sandbox_source_hash())
    blob = json.dumps(asdict(cfg), sort_keys=True, default=str).encode() + _SOURCE[0].encode()
    return hashlib.sha1(blob).hexdigest()[:16]


def _run_one(args):
    cfg, cache_dir, keep_pass1 = args
    path = Path(cache_dir) / f"{config_key(cfg)}.npz"
    if path.exists():
        return _load_cached(path)
    import sandbox

    res = sandbox.run(cfg)
    out = {
        "config": asdict(cfg),
        "status": res.status,
        "table": {c: np.asarray(res.table[c]) for c in TABLE_COLS},
        "pass1": ({k: np.asarray(v) for k, v in res.pass1.items()} if keep_pass1 else None),
        "seconds": res.info.get("seconds"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        _save_cached(fh, out)
    os.replace(tmp, path)
    return out


def _save_cached(fh, out: dict) -> None:
    """One cached run as a plain .npz (no pickle: arrays plus a JSON header), read by `_load_cached`."""
    meta = {k: out[k] for k in ("config", "status", "seconds")} | {"has_pass1": out["pass1"] is not None}
    arrays = {f"table__{c}": np.asarray(v) for c, v in out["table"].items()}
    arrays.update({f"pass1__{k}": np.asarray(v) for k, v in (out["pass1"] or {}).items()})
    np.savez(fh, __meta__=np.array(json.dumps(meta, default=str)), **arrays)


def _load_cached(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["__meta__"]))
        table = {k[len("table__"):]: z[k] for k in z.files if k.startswith("table__")}
        pass1 = {k[len("pass1__"):]: z[k] for k in z.files if k.startswith("pass1__")}
    return {
        "config": meta["config"],
        "status": meta["status"],
        "table": table,
        "pass1": pass1 if meta["has_pass1"] else None,
        "seconds": meta["seconds"],
    }


_WARM = []


def _warm_up() -> None:
    """Run one tiny simulation per policy family in this process (numba loads its cached kernels lazily)."""
    if _WARM:
        return
    import sandbox
    from sandbox.config import SimConfig

    for model in ("tabular", "interference"):
        sandbox.run(SimConfig(model=model, d=8, d_val=8, bp=4, n=2, budget=64, n_evals=2))
    _WARM.append(True)


def run_many(
    configs: Sequence, cache_dir: Path | str = DEFAULT_CACHE, jobs: int = 2, keep_pass1: bool = False
) -> list[dict]:
    """Run (or load from the cache) every SimConfig; longest runs first over `jobs` processes."""
    cache_dir = Path(cache_dir)
    order = sorted(range(len(configs)), key=lambda i: -configs[i].steps)
    args = [(configs[i], str(cache_dir), keep_pass1) for i in order]
    todo = [a for a in args if not (cache_dir / f"{config_key(a[0])}.npz").exists()]
    if jobs > 1 and len(todo) > 1:
        _warm_up()  # load the compiled kernels once here, so forked workers do not each load them again
        with get_context("fork").Pool(jobs) as pool:
            pool.map(_run_one, todo, chunksize=1)
    out = [None] * len(configs)
    for i, a in zip(order, args, strict=True):
        out[i] = _run_one(a)
    return out


def n_sweep_configs(base, ns: Sequence[int], seeds: Sequence[int], **over) -> list:
    """Paired n-sweep: one config per (n, seed), problem_seed = seed so every n sees the same problems."""
    return [replace(base, n=int(n), seed=int(s), problem_seed=int(s), **over) for s in seeds for n in ns]


def curve_at(
    table: dict,
    budgets: Sequence[float],
    metric: str = "val_mean",
    best_so_far: bool = False,
    x: str = "compute",
) -> np.ndarray:
    """metric at each budget by linear interpolation in log compute; NaN beyond the run's last point.

    The first evaluation is at compute 0 (the initial policy); budgets below the first step get that value.
    best_so_far: use the running maximum of the curve, i.e. the record-breaking envelope that the paper's
    analysis fits (Section 4 step 1), instead of the reward the run ends with at that budget.
    x: the compute column (`compute` in rollouts or `tokens`, PAPER.md finding 10).
    """
    c = np.asarray(table[x], dtype=float)
    y = np.asarray(table[metric], dtype=float)
    if best_so_far:
        y = np.fmax.accumulate(y)
    budgets = np.asarray(budgets, dtype=float)
    out = np.full(budgets.size, np.nan)
    pos = c > 0
    lc, ly = np.log(c[pos]), y[pos]
    for i, b in enumerate(budgets):
        if b > c[-1] * (1 + 1e-9):
            continue
        if lc.size == 0 or b < c[pos][0]:
            out[i] = y[0]
        else:
            out[i] = np.interp(np.log(b), lc, ly)
    return out


def grid_frame(
    results: Sequence[dict],
    budgets: Sequence[float],
    metric: str = "val_mean",
    by: tuple[str, ...] = ("n",),
    best_so_far: bool = False,
    x: str = "compute",
) -> pd.DataFrame:
    """Tidy frame: one row per (run, budget) with columns `by`, seed, budget, value (see `curve_at`)."""
    rows = []
    for r in results:
        if r["status"] != "ok":
            continue
        cfg = r["config"]
        vals = curve_at(r["table"], budgets, metric, best_so_far=best_so_far, x=x)
        for b, v in zip(budgets, vals, strict=True):
            rows.append({**{k: cfg[k] for k in by}, "seed": cfg["seed"], "budget": float(b), "value": v})
    return pd.DataFrame(rows)


def n_star(frame: pd.DataFrame, key: str = "n") -> pd.DataFrame:
    """Per budget: the n with the best seed-mean value, that value and its SE, and the n-values compared."""
    g = frame.dropna(subset=["value"]).groupby(["budget", key])["value"]
    stats = g.agg(["mean", "std", "count"]).reset_index()
    stats["se"] = stats["std"] / np.sqrt(stats["count"])
    best = stats.loc[stats.groupby("budget")["mean"].idxmax()].reset_index(drop=True)
    return best.rename(columns={key: f"{key}_star", "mean": "best_mean", "se": "best_se"})


def paired_contrast(
    frame: pd.DataFrame, budget: float, small: Sequence[int], large: Sequence[int], key: str = "n"
) -> dict:
    """Best large-n minus best small-n at `budget`, paired over seeds (each seed = one problem set).

    The best member of each group is chosen by seed mean; the SE is that of the per-seed differences.
    """
    f = frame[np.isclose(frame["budget"], budget)].dropna(subset=["value"])
    piv = f.pivot_table(index="seed", columns=key, values="value")
    small = [v for v in small if v in piv.columns]
    large = [v for v in large if v in piv.columns]
    if not small or not large:
        return {"diff": float("nan"), "se": float("nan"), "z": float("nan"), "wins": 0, "seeds": 0}
    means = piv.mean()
    ns_, nl_ = max(small, key=lambda v: means[v]), max(large, key=lambda v: means[v])
    diff = (piv[nl_] - piv[ns_]).dropna().to_numpy()
    se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
    mean = float(diff.mean())
    return {
        "n_small": int(ns_),
        "n_large": int(nl_),
        "small_mean": float(means[ns_]),
        "large_mean": float(means[nl_]),
        "diff": mean,
        "se": se,
        "z": mean / se if se and se > 0 else float("nan"),
        "wins": int((diff > 0).sum()),
        "seeds": int(diff.size),
    }


def robust_claim2(
    ns_star: Sequence[int], contrast: dict, tab_ns_star: Sequence[int] | None, ns: Sequence[int]
) -> dict:
    """Issue 4's robust criteria: n* grows >= 8x over the budgets, top-budget contrast >= 0.02 and >= 3 SE
    over
    >= 8 seeds, and the tabular control keeps n* among the two smallest n."""
    ns_star = [int(v) for v in ns_star]
    growth = max(ns_star) / min(ns_star) if ns_star else float("nan")
    two_smallest = sorted(ns)[:2]
    tab_ok = None if tab_ns_star is None else all(int(v) in two_smallest for v in tab_ns_star)
    ok = (
        growth >= 8
        and contrast["diff"] >= 0.02
        and contrast["z"] >= 3
        and contrast["seeds"] >= 8
        and tab_ok is not False
    )
    return {"growth": growth, "tabular_keeps_small": tab_ok, "robust": bool(ok)}


def polarisation(p: np.ndarray, zero: float = 1e-3, one: float = 0.99) -> dict:
    """Summary of one pass@1 vector (Fig 11 / 27): zero share, solved share, polarised share, mean, std."""
    p = np.asarray(p, dtype=float)
    p = p[np.isfinite(p)]
    z, o = float((p < zero).mean()), float((p >= one).mean())
    return {
        "mean": float(p.mean()),
        "zero_frac": z,
        "one_frac": o,
        "polar_frac": z + o,
        "std": float(p.std()),
    }


def pass1_at(result: dict, split: str, compute: float) -> np.ndarray:
    """pass@1 snapshot of a run at the evaluation point closest to `compute` in log space."""
    c = np.asarray(result["pass1"]["compute"], dtype=float)
    i = int(np.argmin(np.abs(np.log(np.maximum(c, 1.0)) - np.log(compute))))
    return np.asarray(result["pass1"][split][i], dtype=float)


# ------------------------------------------------------------------------------------- gradient noise scale
def train_snapshots(cfg, stops: Sequence[int]) -> list[np.ndarray]:
    """Flat parameters after each number of steps in `stops` (ascending) of the run `sandbox.run(cfg)` makes.

    The runner does not return parameters, so this mirrors its set-up (sandbox/runner.py) and calls the same
    GRPO kernel; `tests/science` checks that the final parameters reproduce the runner's val_mean exactly.
    """
    from sandbox import grpo
    from sandbox.policies import build_policy
    from sandbox.problems import make_problems
    from sandbox.rng import new_state
    from sandbox.runner import _OBJ, _OPT, _SCALE

    problems = make_problems(cfg)
    policy = build_policy(cfg, problems)
    pargs = policy.args()
    d, K = cfg.d, cfg.K
    theta = policy.theta0.copy()
    theta0 = policy.theta0.copy()
    logp0 = grpo.initial_log_probs(*pargs, theta, K)
    m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
    row_t = np.zeros(d, dtype=np.int64)
    pw = np.ones((d + 1, 2))
    stamp = np.zeros(d, dtype=np.int64)
    perm = np.arange(d, dtype=np.int64)
    st = np.zeros(3, dtype=np.int64)
    st[grpo.ST_POS] = d
    acc = np.zeros(7)
    hp = np.array(
        [
            cfg.effective_lr(),
            cfg.beta1,
            cfg.beta2,
            cfg.adam_eps,
            cfg.weight_decay,
            cfg.clip_eps,
            cfg.kl_coef,
            cfg.entropy_coef,
        ],
        dtype=np.float64,
    )
    ip = np.array(
        [
            cfg.n,
            cfg.bp,
            cfg.n_est,
            _OPT[cfg.optimizer],
            _SCALE[cfg.scale_rewards],
            _OBJ[cfg.objective],
            cfg.ppo_epochs,
            cfg.minibatches,
            int(cfg.zero_variance_filter),
        ],
        dtype=np.int64,
    )
    rs = new_state(cfg.seed, 0)
    out = []
    for m in stops:
        if m > st[grpo.ST_STEP]:
            code = grpo._train_chunk(
                *pargs,
                problems.lens,
                logp0,
                theta,
                theta0,
                m1,
                m2,
                pw,
                row_t,
                stamp,
                perm,
                st,
                acc,
                hp,
                ip,
                rs,
                int(m),
            )
            if code != grpo.OK:
                raise RuntimeError(f"run diverged before step {m}: {grpo.REASONS[code]}")
        out.append(theta.copy())
    return out


def gradient_noise_scale(
    cfg, theta: np.ndarray, n: int | None = None, problems_sampled: int = 512, seed: int = 0
) -> dict:
    """B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training").

    One sample is one training problem with its group of n rollouts: g_i = d(GRPO surrogate of problem i)/d
    theta, from the simulator's own advantage and logit-gradient kernels and the policy's backward pass.
    G = mean g_i and Sigma their covariance, |G|^2 corrected for its sampling bias (|mean|^2 - tr Sigma / N).
    B_simple is in groups (problems); times n it is in rollouts, comparable with the chosen batch bp * n.
    """
    from sandbox.grpo import SCALE_GROUP, advantages, logit_gradient
    from sandbox.policies import build_policy
    from sandbox.problems import make_problems

    n = cfg.n if n is None else int(n)
    problems = make_problems(cfg)
    policy = build_policy(cfg, problems)
    rng = np.random.default_rng(seed)
    idx = rng.choice(cfg.d, size=min(problems_sampled, cfg.d), replace=False)
    Z = policy.forward(theta, idx)
    K = cfg.K
    pieces = np.empty((idx.size, policy.n_params))
    dz = np.empty(K)
    zeros = np.zeros(K)
    zero_var = 0
    for b, g in enumerate(idx):
        z = Z[b] - Z[b].max()
        pi = np.exp(z) / np.exp(z).sum()
        logp = np.log(np.maximum(pi, 1e-300))
        counts = rng.multinomial(n, pi).astype(np.int64)
        corr = int(problems.correct[g])
        c = counts[corr]
        mean = c / n
        a_c, a_w = advantages(c, n, mean, np.sqrt(mean * (1 - mean)), SCALE_GROUP, 0.0)
        zero_var += int(c == 0 or c == n)
        logit_gradient(counts, n, corr, a_c, a_w, pi, logp, logp, logp, 0, 0.2, 0.0, 0.0, dz)
        pieces[b] = policy.backward(theta, idx[b : b + 1], (dz if c not in (0, n) else zeros)[None, :])
    out = noise_scale_from_pieces(pieces)
    out.update({"zero_var_frac": zero_var / idx.size, "n": n})
    return out


def noise_scale_from_pieces(pieces: np.ndarray) -> dict:
    """B_simple from N per-sample gradients (N, P): unbiased tr(Sigma), |G|^2 = |mean|^2 - tr(Sigma) / N."""
    N = pieces.shape[0]
    G = pieces.mean(axis=0)
    tr_sigma = float(((pieces - G) ** 2).sum(axis=1).sum() / (N - 1))
    g2 = float(G @ G - tr_sigma / N)
    return {"b_simple": tr_sigma / g2 if g2 > 0 else float("inf"), "tr_sigma": tr_sigma, "g2": g2}
