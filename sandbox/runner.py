"""`run(config) -> SimResult`: one simulated GRPO run to a rollout budget (docs/CONTRACTS.md, docs/DESIGN.md).

The run trains for m = config.steps steps and evaluates at log-spaced steps (the first row at m = 0), so
learning curves are resolved at small budgets without paying for evaluation at every step. Divergence
(non-finite logits, gradients or metrics) stops the run with status "diverged", the step and the reason; the
rows evaluated so far are kept. The same config gives the same table bit for bit.

Column meanings beyond docs/DESIGN.md's vocabulary:
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

import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from isocompute.contract import schedule
from isocompute.contract.columns import CURVE_COLUMNS
from isocompute.contract.progress import Progress
from isocompute.contract.status import DIVERGED, DONE
from sandbox import _cache, allocators, grpo
from sandbox.blas import one_blas_thread
from sandbox.config import SimConfig
from sandbox.policies import Policy, build_policy
from sandbox.problems import ProblemSet, make_problems
from sandbox.rng import new_state

_OPT = {"sgd": grpo.SGD, "adam": grpo.ADAM, "adamw": grpo.ADAMW}
_SCALE = {"group": grpo.SCALE_GROUP, "batch": grpo.SCALE_BATCH, "none": grpo.SCALE_NONE}
_OBJ = {"pg": grpo.PG, "ppo": grpo.PPO, "cispo": grpo.CISPO}
_SAMPLER = {"auto": grpo.SAMPLER_AUTO, "chain": grpo.SAMPLER_CHAIN}


@dataclass
class SimResult:
    """Learning-curve table (columns isocompute.contract.columns.CURVE_COLUMNS, E rows), per-problem pass@1
    snapshots and the run status."""

    config: SimConfig
    table: dict[str, np.ndarray]
    pass1: dict[str, np.ndarray]
    status: str = DONE
    diverged_step: int | None = None
    reason: str | None = None
    info: dict = field(default_factory=dict)


def eval_steps(steps: int, n_evals: int) -> np.ndarray:
    """The evaluation steps of a run (isocompute.contract.schedule.eval_steps) as the kernel's int64 array."""
    return np.array(schedule.eval_steps(steps, n_evals), dtype=np.int64)


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
    moved: np.ndarray
    st: np.ndarray
    acc: np.ndarray
    hp: np.ndarray
    ip: np.ndarray
    rs: np.ndarray
    rs_eval: np.ndarray
    hist: np.ndarray | None

    @property
    def step(self) -> int:
        return int(self.st[grpo.ST_STEP])

    def train_to(self, m_end: int) -> int:
        """Advance to step m_end (no-op if already there); a grpo status code (grpo.OK unless diverged)."""
        if m_end <= self.step:
            return grpo.OK
        return grpo.train_kernel(*self.policy.args(), self.problems.lens, self.logp0, self.theta,
                                  self.theta0, self.m1, self.m2, self.pw, self.row_t, self.stamp, self.perm,
                                  self.st, self.acc, self.hp, self.ip, self.rs, self.moved, self.hist,
                                  int(m_end))

    def evaluate(self, theta: np.ndarray, p_train: np.ndarray, p_val: np.ndarray, out: np.ndarray) -> bool:
        """pass@1 of every problem under theta into p_train (d,), p_val (d_val,) and the metric aggregates
        (grpo._evaluate) into out (12,); False if non-finite. Sampled metrics draw from `rs_eval`."""
        c = self.config
        return grpo._evaluate(*self.policy.args(), self.problems.lens, self.logp0, theta, c.n, c.k,
                              c.metric_mode == "sampled", self.rs_eval, p_train, p_val, out)


def hyperparameters(config: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's float (grpo.HP_*) and int (grpo.IP_*) hyperparameter vectors of a config."""
    c = config
    code, params = allocators.encode(c.allocator, c.n)
    hp = np.array([c.effective_lr(), c.beta1, c.beta2, c.adam_eps, c.weight_decay, c.clip_eps, c.kl_coef,
                   c.entropy_coef, c.adv_eps, float(c.budget), *params, grpo.TINY], dtype=np.float64)
    ip = np.array([c.n, c.bp, c.n_est, _OPT[c.optimizer], _SCALE[c.scale_rewards], _OBJ[c.objective],
                   c.ppo_epochs, c.minibatches, int(c.zero_variance_filter), int(c.adv_std == "sample"),
                   _SAMPLER[c.sampler], int(c.response_len > 0), code], dtype=np.int64)
    return hp, ip


def prepare(config: SimConfig) -> RunState:
    """Problems, initial policy, optimiser state and random streams of a run at step 0."""
    rstate = _initial_state(config)
    rstate.logp0 = grpo.initial_log_probs(*rstate.policy.args(), rstate.theta, config.K)
    return rstate


def _initial_state(config: SimConfig) -> RunState:
    """`prepare` without the KL reference logp0 (left uninitialised): no kernel call, so no compile."""
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
        logp0=np.empty((d, config.K)),
        m1=np.zeros_like(theta), m2=np.zeros_like(theta),
        pw=np.ones((d + 1, 2)),  # running beta1^t, beta2^t per private row; row d for the shared block
        row_t=np.zeros(d, dtype=np.int64), stamp=np.zeros(d, dtype=np.int64),
        perm=np.arange(d, dtype=np.int64), moved=np.zeros(d + 1, dtype=np.bool_), st=st,
        acc=np.zeros(grpo.N_ACC), hp=hp, ip=ip,
        rs=new_state(config.seed, 0),  # training stream: problem order and rollouts
        rs_eval=new_state(config.seed, 1),  # sampled metrics, so metric_mode never changes training
        # per-problem history the allocators read; None for a fixed run (its kernels have no allocator path)
        hist=None if config.allocator == "fixed" else allocators.new_history(d),
    )


def notice_if_cold(config: SimConfig) -> bool:
    """Say on stderr, before anything compiles, that the kernels of this kind of run are being compiled when
    Numba's cache does not have them (sandbox/_cache.py: once per process and kind of run; True if said)."""
    key = config.allocator == "fixed"
    if key in _cache._checked:
        return False
    return _cache.notice_if_cold(key, kernel_calls(_initial_state(config)))


def kernel_calls(rs: RunState) -> list[tuple]:
    """(dispatcher, args) of every kernel a run of rs.config calls (what `notice_if_cold` checks): the KL
    reference, the training kernel and the two of the cached evaluation, with arguments of the types
    `grpo._run_full` passes."""
    c = rs.config
    G = c.d + c.d_val
    pol = (*rs.policy.args(), rs.problems.lens, rs.logp0, rs.theta)
    train = (*pol, rs.theta0, rs.m1, rs.m2, rs.pw, rs.row_t, rs.stamp, rs.perm, rs.st, rs.acc, rs.hp, rs.ip,
             rs.rs, rs.moved, rs.hist, np.int64(1))
    cache = np.zeros((G, grpo.N_CACHE))
    problems = (*pol, c.n, c.k, cache, np.zeros(G, dtype=np.int64), rs.row_t, True, 0, 1)
    reduce = (c.d, c.metric_mode == "sampled", c.k, rs.rs_eval, np.empty(c.d), np.empty(c.d_val),
              np.empty(12), cache)
    return [(grpo.initial_log_probs, (*rs.policy.args(), rs.theta, c.K)), (grpo.train_kernel, train),
            (grpo._eval_problems, problems), (grpo._eval_reduce, reduce)]


def _buffers(config: SimConfig, snapshots_shape: bool = True):
    """Evaluation steps and the output arrays `grpo._run_full` fills for one run."""
    ev = eval_steps(config.steps, config.n_evals)
    E = ev.size
    shape_t = (E, config.d) if snapshots_shape else (E, 0)
    shape_v = (E, config.d_val) if snapshots_shape else (E, 0)
    return (ev, np.full(shape_t, np.nan, dtype=np.float32), np.full(shape_v, np.nan, dtype=np.float32),
            np.full((E, grpo.N_STATS), np.nan))


def _kernel_args(rs: RunState) -> tuple:
    """Per-run arguments of `grpo._run_full` before `ev` (see its signature)."""
    c = rs.config
    return (rs.problems.lens, rs.logp0, rs.theta, rs.theta0, rs.m1, rs.m2, rs.pw, rs.row_t, rs.stamp, rs.perm,
            rs.st, rs.acc, rs.hp, rs.ip, rs.rs, rs.moved, rs.hist, rs.rs_eval, c.k,
            c.metric_mode == "sampled")


def _threads(threads: int | None) -> int:
    """A thread count: numba's (NUMBA_NUM_THREADS, by default the number of cores) when None, at most that."""
    import numba

    threads = numba.get_num_threads() if threads is None else int(threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return min(threads, numba.config.NUMBA_NUM_THREADS)


def _idle_core() -> bool:
    """Whether the 1-minute load average leaves a core idle besides the calling thread. When it does not,
    evaluation threads compete with their own run's training thread for the cores, and a thread preempted
    while it holds the GIL stalls the others: one interference run (n = 256, budget 2^27) took 0.83x the
    speed on 2 threads at load 7 on the 2-core Intel machine (benchmarks/sim_throughput.py --single)."""
    try:
        return os.getloadavg()[0] + 1.0 <= (os.cpu_count() or 1)
    except OSError:
        return False


def _eval_threads(config: SimConfig, threads: int) -> int:
    """Evaluation threads of one run given `threads` for it (grpo._run_full `eval_threads`): all of them when
    there are 2 or more and its problems fill more than one evaluation chunk, else 0 (evaluate on the
    training thread). With one chunk (d + d_val <= grpo.EVAL_CHUNK, the tests' small runs) the hand-off costs
    about what it saves. The table does not depend on this choice."""
    return threads if threads > 1 and config.d + config.d_val > grpo.EVAL_CHUNK else 0


@one_blas_thread
def run(config: SimConfig, progress: bool = False, threads: int | None = None) -> SimResult:
    """Train one simulated GRPO run (sandbox/grpo.py) and return its learning-curve table.

    threads: with 2 or more the evaluations run on that many threads of their own while training goes on
    (`_eval_threads`; grpo._run_full, a fixed partition of the work); the table is the same bit for bit
    whatever the count. Default: numba's thread count (NUMBA_NUM_THREADS) when the load leaves a core idle
    (`_idle_core`), else 1. progress=True: its progress on stderr (isocompute.contract.progress, read from
    the step counter and the rows the kernels fill in place, so the run itself is unchanged). The kernels
    run on a thread of their own while this one waits (`_awaited`: Ctrl-C is taken at once)."""
    if not isinstance(config, SimConfig):
        raise TypeError(f"run() expects a SimConfig, got {type(config).__name__}")
    threads = _threads(threads) if threads is not None or _idle_core() else 1
    t0 = time.perf_counter()
    notice_if_cold(config)
    rstate = prepare(config)
    ev, p_train, p_val, stats = _buffers(config)
    res = np.zeros(3, dtype=np.int64)
    prev_acc = rstate.acc.copy()
    args = (*rstate.policy.args(), *_kernel_args(rstate), config.snapshots, ev)
    with Progress(f"sim {config.model}/{config.dataset} n={config.n}", config.steps, "step", "rollouts",
                  enabled=progress, poll=lambda: _polled(rstate, ev, stats, res)):
        _awaited(lambda: grpo._run_full(*args, 0, ev.size, prev_acc, p_train, p_val, stats, res,
                                        eval_threads=_eval_threads(config, threads)))
    return _result(config, rstate, ev, p_train, p_val, stats, res, time.perf_counter() - t0)


WAIT_S = 0.1
"""How often a thread that waits for a run wakes (`_take`): Ctrl-C is taken within this."""


def _take(results: queue.SimpleQueue):
    """The next item of `results`, waited for in slices of WAIT_S so that a signal's handler runs in this
    thread meanwhile (a plain blocking get would hold Ctrl-C until the run ends)."""
    while True:
        try:
            return results.get(timeout=WAIT_S)
        except queue.Empty:
            continue


def _awaited(fn: Callable[[], object]) -> object:
    """fn() on a daemon thread while this thread waits (`_take`): the compiled calls of a run (minutes
    between two evaluation points at large budgets) never delay Ctrl-C, which this thread takes at once; a
    process that exits on it leaves the call. Its exception is raised here."""
    out: queue.SimpleQueue = queue.SimpleQueue()

    def call() -> None:
        try:
            out.put((fn(), None))
        except BaseException as e:  # noqa: BLE001 - raised in the waiting thread
            out.put((None, e))

    threading.Thread(target=call, name="sim run", daemon=True).start()
    value, error = _take(out)
    if error is not None:
        raise error
    return value


def _polled(rstate: RunState, ev: np.ndarray, stats: np.ndarray, res: np.ndarray) -> dict:
    """Where a run is, read while its kernels run (`Progress`'s poll): the step, the rollouts spent and the
    last evaluation filled (a racy read of counters the kernel writes in place: good enough for a line)."""
    rows = int(res[0])
    last = f"val_mean {stats[rows - 1, 4]:.4f} at step {ev[rows - 1]}" if rows else None
    return {"done": int(rstate.st[grpo.ST_STEP]), "amount": int(rstate.acc[grpo.AC_ROLL]), "evaluation": last}


def _result(config: SimConfig, rstate: RunState, ev, p_train, p_val, stats, res, seconds: float) -> SimResult:
    """The SimResult of one run from the arrays `grpo._run_full` filled."""
    filled, code = int(res[0]), int(res[1])
    status, div_step, reason = DONE, None, None
    if code != grpo.OK:
        status, div_step, reason = DIVERGED, int(res[2]), grpo.REASONS[code]
    d = config.d
    lr = config.effective_lr()
    ev = ev[:filled]
    stats = stats[:filled]
    m = ev.astype(np.int64)
    compute = m * config.rollouts_per_step
    if config.allocator != "fixed":  # steps cost what the allocator drew: the kernel's counts
        m = np.nan_to_num(stats[:, grpo.S_STEP]).astype(np.int64)
        compute = np.nan_to_num(stats[:, grpo.S_ROLL]).astype(np.int64)
        m[0] = compute[0] = 0
        keep = np.concatenate([[True], np.diff(compute) > 0])  # a step can pass two evaluation targets
        ev, stats, m, compute = ev[keep], stats[keep], m[keep], compute[keep]
        p_train, p_val = p_train[:filled][keep], p_val[:filled][keep]
        filled = int(keep.sum())
    table: dict[str, np.ndarray] = {
        "backend": np.full(filled, "sim"),
        "model": np.full(filled, config.model),
        "dataset": np.full(filled, config.dataset),
        "seed": np.full(filled, config.seed, dtype=np.int64),
        "n": np.full(filled, config.n, dtype=np.int64),
        "bp": np.full(filled, config.bp, dtype=np.int64),
        "batch": np.full(filled, config.batch, dtype=np.int64),
        "m": m,
        "compute": compute,
        "tokens": stats[:, grpo.S_TOKENS].copy(),
        "epoch": m * config.bp / d,
        "lr": np.full(filled, lr),
        "k": np.full(filled, config.k, dtype=np.int64),
        "train_mean": stats[:, 0], "train_best_k": stats[:, 1], "train_worst_k": stats[:, 2],
        "train_zero_frac": stats[:, 3],
        "val_mean": stats[:, 4], "val_best_k": stats[:, 5], "val_worst_k": stats[:, 6],
        "val_zero_frac": stats[:, 7],
        "entropy": stats[:, 8], "kl": stats[:, 9], "grad_norm": stats[:, 12],
        "response_len": stats[:, 10], "zero_var_frac": stats[:, 11], "batch_reward": stats[:, grpo.S_BREW],
    }
    table = {c: np.ascontiguousarray(table[c]) for c in CURVE_COLUMNS}
    if config.snapshots:
        pass1 = {"compute": table["compute"].copy(), "train": np.ascontiguousarray(p_train[:filled]),
                 "val": np.ascontiguousarray(p_val[:filled])}
    else:
        pass1 = {"compute": table["compute"].copy(), "train": np.zeros((filled, 0), np.float32),
                 "val": np.zeros((filled, 0), np.float32)}
    problems = rstate.problems
    info = {"seconds": seconds, "steps": config.steps, "n_params": rstate.policy.n_params,
            "p0_train_mean": float(problems.p0[:d].mean()), "p0_val_mean": float(problems.p0[d:].mean())}
    return SimResult(config=config, table=table, pass1=pass1, status=status, diverged_step=div_step,
                     reason=reason, info=info)


def _cost(config: SimConfig) -> float:
    """Relative cost of a run for balancing threads: steps x problems per step, plus its evaluations."""
    c = config
    return c.steps * c.bp * (1.0 + 0.1 * np.log2(c.n + c.n_est)) * (1 + c.ppo_epochs) + \
        4.0 * c.n_evals * (c.d + c.d_val)


@one_blas_thread
def run_many(configs: list[SimConfig], threads: int | None = None,
             on_result: Callable[[int, SimResult], None] | None = None) -> list[SimResult]:
    """Run many configs in this process on `threads` threads (default: numba's thread count,
    NUMBA_NUM_THREADS; at most the number of runs).

    The runs are handed out one at a time, the most expensive first (`_cost`), to daemon threads; each is
    `grpo._run_full` on its own state (its kernels release the GIL, so the threads run on separate cores),
    and the runs share nothing, so every result equals `run(config)` bit for bit whatever the thread count
    (tests/sandbox/test_sim_batch.py). The calling thread only waits (`_take`) and hands each
    result to `on_result(index into configs, result)` as it finishes (a sweep stores it then), so Ctrl-C is
    taken at once and whatever finished before is had; the threads are not waited for after an exception
    (a process that exits on it leaves them). A run that raises raises here, the others stop taking runs.
    Results come back in the order of `configs`; `info["seconds"]` is each run's own wall time. Python
    threads rather than a numba prange: a `parallel=True` kernel cost ~60% of the first run's compile and
    bought nothing here. With more threads than runs, each run also evaluates on threads of its own beside
    its training (as `run` with threads > 1, and with the default only when the load leaves a core idle;
    the same tables). OpenBLAS's thread count is process-wide: this call's `one_blas_thread` holds it at one
    for every run, set and restored by the calling thread.
    """
    configs = list(configs)
    for c in configs:
        if not isinstance(c, SimConfig):
            raise TypeError(f"run_many() expects SimConfigs, got {type(c).__name__}")
    if not configs:
        return []
    auto = threads is None
    threads = _threads(threads)
    spare = threads // len(configs) if not auto or _idle_core() else 1  # per run; beyond 1: evaluation
    threads = min(threads, len(configs))
    for c in {c.allocator == "fixed": c for c in configs}.values():
        notice_if_cold(c)
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for r in sorted(range(len(configs)), key=lambda i: (-_cost(configs[i]), i)):
        todo.put(r)
    done: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def one(r: int) -> SimResult:
        c = configs[r]
        t0 = time.perf_counter()
        rstate = prepare(c)
        ev, p_train, p_val, stats = _buffers(c)
        res = np.zeros(3, dtype=np.int64)
        grpo._run_full(*rstate.policy.args(), *_kernel_args(rstate), c.snapshots, ev, 0, ev.size,
                       rstate.acc.copy(), p_train, p_val, stats, res, eval_threads=_eval_threads(c, spare))
        return _result(c, rstate, ev, p_train, p_val, stats, res, time.perf_counter() - t0)

    def worker() -> None:
        while not stop.is_set():
            try:
                r = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((r, one(r), None))
            except BaseException as e:  # noqa: BLE001 - raised in the calling thread
                done.put((r, None, e))

    for i in range(threads):
        threading.Thread(target=worker, name=f"run_many {i}", daemon=True).start()
    out: list[SimResult | None] = [None] * len(configs)
    try:
        for _ in configs:
            r, result, error = _take(done)
            if error is not None:
                raise error
            out[r] = result
            if on_result is not None:
                on_result(r, result)
    finally:
        stop.set()  # after an exception (a failed run, Ctrl-C) no thread takes another run
    return out
