"""`run(config) -> SimResult`: one simulated GRPO run to a rollout budget (docs/CONTRACTS.md, DESIGN.md).

The run trains for m = config.steps steps and evaluates at log-spaced steps (the first row at m = 0), so
learning curves are resolved at small budgets without paying for evaluation at every step. Divergence
(non-finite logits, gradients or metrics) stops the run with status "diverged", the step and the reason; the
rows evaluated so far are kept. The same config gives the same table bit for bit.

Column meanings beyond DESIGN.md's vocabulary:
- `compute` = m * bp * (n + n_est) rollouts; `epoch` = m * bp / d, passes over the training set (equal to
  compute / (d * n) without a decoupled baseline); `lr` = SimConfig.effective_lr().
- `*_mean / *_best_k / *_worst_k / *_zero_frac`: exact from pass@1 p (mean p, 1-(1-p)^k, p^k, share with
  p < config.ZERO_PASS1) or sampled with k draws per problem (metric_mode; zero_frac = share with 0 of k
  correct).
  Under `tabular` the validation problems never move (they have no parameters of their own and share none).
- `entropy`, `kl` (KL(pi || pi_init)): means over the training problems at the evaluation point.
- `grad_norm`: mean L2 norm of the batch gradient over the updates since the previous row (NaN at m = 0).
- `zero_var_frac`: share of groups whose n rewards all agreed since the previous row; at m = 0 its
  expectation under the initial policy, mean of p^n + (1-p)^n.
- `batch_reward`: mean reward of the bp * n (gradient) rollouts of the last training step before the row
  (NaN at m = 0); `train_mean` stays the exact pass@1 over the whole training set.
- `response_len`: tokens per rollout since the previous row (at m = 0 the expectation under the initial
  policy); `tokens` cumulative; both 0 unless config.response_len > 0.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from sandbox import grpo
from sandbox.config import SimConfig
from sandbox.policies import Policy, build_policy
from sandbox.problems import ProblemSet, make_problems
from sandbox.rng import new_state

STRING_COLUMNS = ("backend", "model", "dataset")
COLUMNS = (
    "backend", "model", "dataset", "seed", "n", "bp", "batch", "m", "compute", "tokens", "epoch", "lr", "k",
    "train_mean", "train_best_k", "train_worst_k", "train_zero_frac",
    "val_mean", "val_best_k", "val_worst_k", "val_zero_frac",
    "entropy", "kl", "grad_norm", "response_len", "zero_var_frac", "batch_reward",
)
_OPT = {"sgd": grpo.SGD, "adam": grpo.ADAM, "adamw": grpo.ADAMW}
_SCALE = {"group": grpo.SCALE_GROUP, "batch": grpo.SCALE_BATCH, "none": grpo.SCALE_NONE}
_OBJ = {"pg": grpo.PG, "ppo": grpo.PPO, "cispo": grpo.CISPO}


@dataclass
class SimResult:
    """Learning-curve table (columns COLUMNS, E rows), per-problem pass@1 snapshots and the run status."""

    config: SimConfig
    table: dict[str, np.ndarray]
    pass1: dict[str, np.ndarray]
    status: str = "ok"
    diverged_step: int | None = None
    reason: str | None = None
    info: dict = field(default_factory=dict)


def eval_steps(steps: int, n_evals: int) -> np.ndarray:
    """0 followed by ~n_evals unique log-spaced steps in [1, steps], always including the last step."""
    pts = np.unique(np.round(np.geomspace(1, steps, num=n_evals)).astype(np.int64))
    return np.concatenate([[0], pts[(pts >= 1) & (pts <= steps)]]).astype(np.int64)


@dataclass
class RunState:
    """Everything one run mutates or reads, built by `prepare` (runner.run and sandbox.diagnostics share it).

    Kernel inputs: `policy.args()`, `problems.lens`, `logp0` (d, K) the KL reference, the flat parameters
    `theta` (P,) and optimiser state, the epoch permutation and counters `st`, accumulators `acc` (N_ACC,),
    hyperparameters `hp` / `ip` (grpo.HP_* / IP_*), and the two random streams.
    """

    config: SimConfig
    problems: ProblemSet
    policy: Policy
    theta: np.ndarray
    theta0: np.ndarray
    logp0: np.ndarray
    m1: np.ndarray
    m2: np.ndarray
    pw: np.ndarray
    row_t: np.ndarray
    stamp: np.ndarray
    perm: np.ndarray
    st: np.ndarray
    acc: np.ndarray
    hp: np.ndarray
    ip: np.ndarray
    rs: np.ndarray
    rs_eval: np.ndarray

    @property
    def step(self) -> int:
        return int(self.st[grpo.ST_STEP])

    def train_to(self, m_end: int) -> int:
        """Advance to step m_end (no-op if already there); a grpo status code (grpo.OK unless diverged)."""
        if m_end <= self.step:
            return grpo.OK
        return grpo._train_kernel(*self.policy.args(), self.problems.lens, self.logp0, self.theta,
                                  self.theta0, self.m1, self.m2, self.pw, self.row_t, self.stamp, self.perm,
                                  self.st, self.acc, self.hp, self.ip, self.rs, int(m_end))

    def evaluate(self, theta: np.ndarray, p_train: np.ndarray, p_val: np.ndarray, out: np.ndarray) -> bool:
        """pass@1 of every problem under theta into p_train (d,), p_val (d_val,) and the metric aggregates
        (grpo._evaluate) into out (12,); False if non-finite. Sampled metrics draw from `rs_eval`."""
        c = self.config
        return grpo._evaluate(*self.policy.args(), self.problems.lens, self.logp0, theta, c.n, c.k,
                              c.metric_mode == "sampled", self.rs_eval, p_train, p_val, out)


def hyperparameters(config: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's float (grpo.HP_*) and int (grpo.IP_*) hyperparameter vectors of a config."""
    c = config
    hp = np.array([c.effective_lr(), c.beta1, c.beta2, c.adam_eps, c.weight_decay, c.clip_eps, c.kl_coef,
                   c.entropy_coef, c.adv_eps], dtype=np.float64)
    ip = np.array([c.n, c.bp, c.n_est, _OPT[c.optimizer], _SCALE[c.scale_rewards], _OBJ[c.objective],
                   c.ppo_epochs, c.minibatches, int(c.zero_variance_filter), int(c.adv_std == "sample")],
                  dtype=np.int64)
    return hp, ip


def prepare(config: SimConfig) -> RunState:
    """Problems, initial policy, optimiser state and random streams of a run at step 0."""
    if not isinstance(config, SimConfig):
        raise TypeError(f"expected a SimConfig, got {type(config).__name__}")
    problems = make_problems(config)
    policy = build_policy(config, problems)
    d = config.d
    theta = policy.theta0.copy()
    st = np.zeros(3, dtype=np.int64)
    st[grpo.ST_POS] = d  # shuffle before the first batch
    hp, ip = hyperparameters(config)
    return RunState(
        config=config, problems=problems, policy=policy, theta=theta, theta0=policy.theta0.copy(),
        logp0=grpo.initial_log_probs(*policy.args(), theta, config.K),
        m1=np.zeros_like(theta), m2=np.zeros_like(theta),
        pw=np.ones((d + 1, 2)),  # running beta1^t, beta2^t per private row; row d for the shared block
        row_t=np.zeros(d, dtype=np.int64), stamp=np.zeros(d, dtype=np.int64),
        perm=np.arange(d, dtype=np.int64), st=st, acc=np.zeros(grpo.N_ACC), hp=hp, ip=ip,
        rs=new_state(config.seed, 0),  # training stream: problem order and rollouts
        rs_eval=new_state(config.seed, 1),  # sampled metrics, so metric_mode never changes training
    )


def run(config: SimConfig, progress: bool = False) -> SimResult:
    """Train one simulated GRPO run (sandbox/grpo.py) and return its learning-curve table."""
    if not isinstance(config, SimConfig):
        raise TypeError(f"run() expects a SimConfig, got {type(config).__name__}")
    t0 = time.perf_counter()
    rstate = prepare(config)
    problems, policy, acc, st = rstate.problems, rstate.policy, rstate.acc, rstate.st
    d = config.d
    lr = config.effective_lr()
    steps_total = config.steps
    ev = eval_steps(steps_total, config.n_evals)
    E = ev.size
    p_train = np.full((E, d), np.nan, dtype=np.float32)
    p_val = np.full((E, config.d_val), np.nan, dtype=np.float32)
    row_p_train = np.empty(d)
    row_p_val = np.empty(config.d_val)
    stats = np.full((E, 16), np.nan)
    out = np.empty(12)

    status, div_step, reason = "ok", None, None
    filled = 0
    prev_acc = acc.copy()
    for e in range(E):
        if ev[e] > 0:
            code = rstate.train_to(ev[e])
            if code != grpo.OK:
                status, div_step, reason = "diverged", int(st[grpo.ST_STEP]), grpo.REASONS[code]
                break
        ok = rstate.evaluate(rstate.theta, row_p_train, row_p_val, out)
        if not ok:
            status, div_step, reason = "diverged", int(st[grpo.ST_STEP]), grpo.REASONS[3]
            break
        if config.snapshots:
            p_train[e] = row_p_train
            p_val[e] = row_p_val
        delta = acc - prev_acc
        prev_acc = acc.copy()
        stats[e, :12] = out
        if ev[e] > 0:
            stats[e, 10] = delta[grpo.AC_TOK] / delta[grpo.AC_ROLL] if delta[grpo.AC_ROLL] > 0 else 0.0
            stats[e, 11] = delta[grpo.AC_ZV] / delta[grpo.AC_GROUPS]
            stats[e, 12] = delta[grpo.AC_GNORM] / delta[grpo.AC_UPDATES] if delta[grpo.AC_UPDATES] else 0.0
            stats[e, 14] = acc[grpo.AC_BREW]
        stats[e, 13] = acc[grpo.AC_TOKENS]
        filled = e + 1
        if progress:
            print(f"\rsim {config.model}/{config.dataset} n={config.n} step {ev[e]}/{steps_total} "
                  f"val_mean={out[4]:.4f}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)

    ev = ev[:filled]
    stats = stats[:filled]
    m = ev.astype(np.int64)
    rollouts = config.bp * (config.n + config.n_est)
    table: dict[str, np.ndarray] = {
        "backend": np.full(filled, "sim"),
        "model": np.full(filled, config.model),
        "dataset": np.full(filled, config.dataset),
        "seed": np.full(filled, config.seed, dtype=np.int64),
        "n": np.full(filled, config.n, dtype=np.int64),
        "bp": np.full(filled, config.bp, dtype=np.int64),
        "batch": np.full(filled, config.batch, dtype=np.int64),
        "m": m,
        "compute": m * rollouts,
        "tokens": stats[:, 13].copy(),
        "epoch": m * config.bp / d,
        "lr": np.full(filled, lr),
        "k": np.full(filled, config.k, dtype=np.int64),
        "train_mean": stats[:, 0], "train_best_k": stats[:, 1], "train_worst_k": stats[:, 2],
        "train_zero_frac": stats[:, 3],
        "val_mean": stats[:, 4], "val_best_k": stats[:, 5], "val_worst_k": stats[:, 6],
        "val_zero_frac": stats[:, 7],
        "entropy": stats[:, 8], "kl": stats[:, 9], "grad_norm": stats[:, 12],
        "response_len": stats[:, 10], "zero_var_frac": stats[:, 11], "batch_reward": stats[:, 14],
    }
    table = {c: np.ascontiguousarray(table[c]) for c in COLUMNS}
    pass1 = {"compute": table["compute"].copy(), "train": p_train[:filled], "val": p_val[:filled]}
    if not config.snapshots:
        pass1 = {"compute": table["compute"].copy(), "train": np.zeros((filled, 0), np.float32),
                 "val": np.zeros((filled, 0), np.float32)}
    info = {"seconds": time.perf_counter() - t0, "steps": steps_total, "n_params": policy.n_params,
            "p0_train_mean": float(problems.p0[:d].mean()), "p0_val_mean": float(problems.p0[d:].mean())}
    return SimResult(config=config, table=table, pass1=pass1, status=status, diverged_step=div_step,
                     reason=reason, info=info)
