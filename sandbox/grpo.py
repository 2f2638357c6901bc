"""The GRPO step of the simulator: the public layer over its kernels (sandbox/kernels/) and the run loop.

One step, for each of the bp problems of the batch (shapes in comments):
1. logits z (K,) -> pi = softmax(z); the n rollouts are ONE multinomial draw of answer counts N (K,),
   sampled as a chain of K-1 binomials, so a step costs O(bp * K * dim) whatever n is; for n <= SMALL_N
   (sampler "auto") as n categorical draws instead, cheaper there (sampler "chain" keeps the
   binomial chain and the random stream of before).
2. Binary reward (answer == correct). Advantages A = (r - mean) / (std + adv_eps) with `scale_rewards`:
   group (std of the group), batch (std of all bp*n rewards of the step) or none (A = r - mean); the std is
   the sample std (n - 1, as TRL's GRPOTrainer and verl's compute_grpo_outcome_advantage) or the population
   std (`adv_std`). Zero whenever the std is zero (all rewards agree). With a decoupled baseline the group's
   mean/std come from its n_est separate rollouts (same convention); the batch std stays that of the bp*n
   gradient rollouts.
3. Surrogate J_g = (1/n) sum_j w_j A_j log pi(a_j); since A_j and the weight w_j depend only on the answer,
   dJ_g/dz = (v - sum(v) pi) / n with v_k = N_k A(k) w_k, where w = 1 (pg), the ratio r_k = pi_k/pi_old_k
   where PPO's clipped min is not active and 0 where it is (ppo), or the stop-gradient weight
   min(r_k, 1 + eps) (cispo). Exact KL(pi || pi_init) and entropy terms are added per problem; the batch loss
   is the mean over the bp groups (over the kept groups under zero-variance filtering).
4. Backward through the policy (sandbox/policies.py) and an optimiser step: sgd, adam or adamw (decoupled
   decay toward the initial parameters). Private per-problem blocks (tabular logits) use lazy Adam: a
   problem's moments and bias correction advance only on steps where it is in the batch, so independent
   problems stay exactly independent; shared parameters use dense Adam. Work whose result is known to be
   zero or the identity is skipped exactly (sandbox/kernels/optimizer.py `step`).
5. `_run_full` is the whole loop of one run (train to each evaluation step, evaluate, fill the row), a Python
   loop over the two kernels; runner.run_many runs many on Python threads (the kernels release the GIL),
   each bit-identical to the run alone.
Compile cost: Numba compiles each njit function once per argument-type signature and links a
callee's machine code into every caller, while an `inline="always"` callee is copied into each call site as
Numba IR and typed there again. The helpers here are therefore plain (separately compiled, once) calls
unless inlining at the Numba level is needed for their arithmetic (`exp_nonpos`, `tanh_fast`: an inlined
copy takes its caller's fastmath flags, a compiled one its own) or for SLP vectorisation (`_adam4`). LLVM
still inlines the small ones (`_flush`, `uniform`) into their callers' loops, which still vectorise (per-step
cost unchanged or lower), and the IEEE operations are the same either way (same bits).
"""

from __future__ import annotations

import numpy as np

from sandbox.allocators import A_FIXED
from sandbox.kernels.evaluate import (
    C_BEST,
    C_H,
    C_KL,
    C_LEN,
    C_P,
    C_WORST,
    C_ZV,
    EVAL_CHUNK,
    N_CACHE,
    _eval_problems,
    _eval_reduce,
    _evaluate,
    _evaluate_cached,
    initial_log_probs,
)
from sandbox.kernels.layout import (
    AC_BREW,
    AC_GNORM,
    AC_GROUPS,
    AC_ROLL,
    AC_TOK,
    AC_TOKENS,
    AC_UPDATES,
    AC_ZV,
    ADAM,
    ADAMW,
    BAD_GRAD,
    BAD_LOGITS,
    CISPO,
    HP_A0,
    HP_ADV_EPS,
    HP_B1,
    HP_B2,
    HP_BUDGET,
    HP_CLIP,
    HP_ENT,
    HP_EPS,
    HP_KL,
    HP_LR,
    HP_TINY,
    HP_WD,
    IP_ALLOC,
    IP_BP,
    IP_EPOCHS,
    IP_LENS,
    IP_MB,
    IP_N,
    IP_NEST,
    IP_OBJ,
    IP_OPT,
    IP_SAMPLE_STD,
    IP_SAMPLER,
    IP_SCALE,
    IP_ZVF,
    N_ACC,
    OK,
    PG,
    PPO,
    REASONS,
    SAMPLER_AUTO,
    SAMPLER_CHAIN,
    SCALE_BATCH,
    SCALE_GROUP,
    SCALE_NONE,
    SGD,
    SMALL_N,
    ST_POS,
    ST_STEP,
    ST_T,
)
from sandbox.kernels.objective import advantages, logit_gradient, reward_std
from sandbox.kernels.optimizer import TINY
from sandbox.kernels.train import train_kernel

__all__ = [
    "AC_BREW", "AC_GNORM", "AC_GROUPS", "AC_ROLL", "AC_TOK", "AC_TOKENS", "AC_UPDATES", "AC_ZV", "ADAM",
    "ADAMW", "BAD_GRAD", "BAD_LOGITS", "CISPO", "C_BEST", "C_H", "C_KL", "C_LEN", "C_P", "C_WORST",
    "C_ZV", "EVAL_CHUNK", "HP_A0", "HP_ADV_EPS", "HP_B1", "HP_B2", "HP_BUDGET", "HP_CLIP", "HP_ENT",
    "HP_EPS", "HP_KL", "HP_LR", "HP_TINY", "HP_WD", "IP_ALLOC", "IP_BP", "IP_EPOCHS", "IP_LENS", "IP_MB",
    "IP_N", "IP_NEST", "IP_OBJ", "IP_OPT", "IP_SAMPLER", "IP_SAMPLE_STD", "IP_SCALE", "IP_ZVF", "N_ACC",
    "N_CACHE", "N_STATS", "OK", "PG", "PPO", "REASONS", "SAMPLER_AUTO", "SAMPLER_CHAIN", "SCALE_BATCH",
    "SCALE_GROUP", "SCALE_NONE", "SGD", "SMALL_N", "ST_POS", "ST_STEP", "ST_T", "S_BREW", "S_ROLL",
    "S_STEP", "S_TOKENS", "TINY", "_eval_problems", "_eval_reduce", "_evaluate", "_evaluate_cached",
    "advantages", "initial_log_probs", "logit_gradient", "reward_std", "train_kernel",
]


N_STATS = 17
S_TOKENS, S_BREW, S_ROLL, S_STEP = 13, 14, 15, 16  # S_ROLL: rollouts drawn so far; S_STEP: steps taken


def _run_full(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, theta0, m1, m2, pw, row_t,
              stamp, perm, st, acc, hp, ip, rs, moved, hist, rs_eval, k_metric, sampled, snapshots, ev, e_lo,
              e_hi, prev_acc, p_train, p_val, stats, res, eval_threads=0):
    """Evaluation points e_lo .. e_hi-1 of one run: train to step ev[e], evaluate, fill row e of stats (E, 17)
    and (with snapshots) of p_train (E, d) / p_val (E, d_val) float32. res (3,) int64: rows filled so far,
    status code (OK; BAD_LOGITS / BAD_GRAD from training, 3 for non-finite metrics), step of divergence.
    prev_acc (N_ACC,) keeps the accumulators at the previous row between calls. The one loop of a run, used
    by runner.run (one run) and runner.run_many (Python threads over runs: the kernels release the GIL, so
    they run in parallel), so both give the same numbers bit for bit.

    A Python loop over separately compiled kernels (`train_kernel`, `_eval_problems`, `_eval_reduce`):
    as one Numba function it was a further compile that re-optimised and re-generated the machine code
    of all of them (Numba links a callee's code into each caller and compiles the whole again), ~2 s of a
    19 s cold compile on an Intel Xeon; the loop costs a few kernel calls per evaluation point (tens of
    microseconds). The row's bookkeeping is the same IEEE arithmetic on float64 scalars.

    eval_threads >= 1 (one run on several cores): the evaluations run on that many threads of their
    own while this one goes on training, by a fixed partition of the work: training here; evaluation chunk c
    (EVAL_CHUNK problems, `_eval_problems`) on evaluation thread c % eval_threads; the sums (`_eval_reduce`,
    which also draws the sampled metrics from rs_eval) on evaluation thread 0, point after point. At each
    evaluation point this thread copies what an evaluation reads (theta, the rows' update counters row_t,
    the accumulators and the step) and queues it. A chunk's result depends only on that copy and on its own
    problems' cache rows, which one thread updates in the points' order (after the previous point's sums
    have read them), and the sums run in the serial order; so every row is the same bit for bit whatever
    eval_threads is, 0 (all on this thread, in order) included (tests/sandbox/test_sim_threads.py; a chunk
    racing ahead of the sums was caught there). The first failure in the serial order (a training failure
    before point e, or a non-finite evaluation at e) decides `res` as in the serial loop; later rows stay
    unfilled.
    """
    n = int(ip[IP_N])
    G = offset.shape[0]
    row_p_train = np.empty(d)
    row_p_val = np.empty(G - d)
    out = np.empty(12)
    cache = np.zeros((G, N_CACHE))
    cstamp = np.full(G, -1, dtype=np.int64)
    fixed = ip.shape[0] <= IP_ALLOC or ip[IP_ALLOC] == A_FIXED  # the allocator kernel is not relied on

    def problems(th, rt, c_first, c_step) -> bool:
        return _eval_problems(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, th, n, k_metric,
                              cache, cstamp, rt, fixed, c_first, c_step)

    def finish(e, acc_e, acc_p, step_e) -> bool:
        """The sums of point e and its row (acc_e, acc_p: accumulators at this and the previous row)."""
        if not _eval_reduce(d, sampled, k_metric, rs_eval, row_p_train, row_p_val, out, cache):
            return False
        if snapshots:
            p_train[e, :d] = row_p_train
            p_val[e, : G - d] = row_p_val
        stats[e, :12] = out
        with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 -> inf / nan as in a kernel
            if ev[e] > 0:
                d_roll = acc_e[AC_ROLL] - acc_p[AC_ROLL]
                d_upd = acc_e[AC_UPDATES] - acc_p[AC_UPDATES]
                stats[e, 10] = (acc_e[AC_TOK] - acc_p[AC_TOK]) / d_roll if d_roll > 0 else 0.0
                stats[e, 11] = (acc_e[AC_ZV] - acc_p[AC_ZV]) / (acc_e[AC_GROUPS] - acc_p[AC_GROUPS])
                stats[e, 12] = (acc_e[AC_GNORM] - acc_p[AC_GNORM]) / d_upd if d_upd != 0.0 else 0.0
                stats[e, S_BREW] = acc_e[AC_BREW]
        stats[e, S_TOKENS] = acc_e[AC_TOKENS]
        stats[e, S_ROLL] = acc_e[AC_ROLL]
        stats[e, S_STEP] = step_e
        return True

    def train(e):
        return train_kernel(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, theta0, m1,
                            m2, pw, row_t, stamp, perm, st, acc, hp, ip, rs, moved, hist, ev[e])

    if eval_threads < 1:
        for e in range(e_lo, e_hi):
            if ev[e] > 0:
                code = train(e)
                if code != OK:
                    res[1] = code
                    res[2] = st[ST_STEP]
                    return
            if not (problems(theta, row_t, 0, 1) and finish(e, acc, prev_acc, st[ST_STEP])):
                res[1] = 3
                res[2] = st[ST_STEP]
                return
            prev_acc[:] = acc
            res[0] = e + 1
        return

    import threading
    from concurrent.futures import ThreadPoolExecutor

    lanes = max(1, min(int(eval_threads), -(-G // EVAL_CHUNK)))
    failed = threading.Event()  # set at the first failed evaluation: the later ones are skipped

    def chunk_job(th, rt, lane, before) -> bool:
        if before is not None:  # the previous point's sums must have read the cache rows this job rewrites
            before.result()
        return not failed.is_set() and problems(th, rt, lane, lanes)

    def finish_job(e, chunk_futs, acc_e, acc_p, step_e) -> bool:
        ok = all([f.result() for f in chunk_futs]) and not failed.is_set() and finish(e, acc_e, acc_p, step_e)
        if not ok:
            failed.set()
        return ok

    pools = [ThreadPoolExecutor(max_workers=1) for _ in range(lanes)]  # one thread per lane: points in order
    jobs = []
    train_fail = None
    acc_p = prev_acc.copy()
    try:
        for e in range(e_lo, e_hi):
            if failed.is_set():  # the run ends at that evaluation: training further is wasted
                break
            if ev[e] > 0:
                code = train(e)
                if code != OK:
                    train_fail = (code, int(st[ST_STEP]))
                    break
            th, rt, acc_e, step_e = theta.copy(), row_t.copy(), acc.copy(), int(st[ST_STEP])
            before = jobs[-1][1] if jobs else None
            chunk_futs = [pool.submit(chunk_job, th, rt, lane, before) for lane, pool in enumerate(pools)]
            jobs.append((e, pools[0].submit(finish_job, e, chunk_futs, acc_e, acc_p, step_e), acc_e, step_e))
            acc_p = acc_e
    finally:
        for pool in pools:
            pool.shutdown(wait=True)
    for e, fut, acc_e, step_e in jobs:  # the serial loop's order: the first failure decides
        if not fut.result():
            res[1] = 3
            res[2] = step_e
            return
        prev_acc[:] = acc_e
        res[0] = e + 1
    if train_fail is not None:
        res[1], res[2] = train_fail
