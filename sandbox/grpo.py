"""The GRPO step and evaluation as Numba kernels (docs/PAPER.md "The question", docs/DESIGN.md "Simulator").

One step, for each of the bp problems of the batch (shapes in comments):
1. logits z (K,) -> pi = softmax(z); the n rollouts are ONE multinomial draw of answer counts N (K,),
   sampled as a chain of K-1 binomials, so a step costs O(bp * K * dim) whatever n is; for n <= SMALL_N
   (sampler "auto") as n categorical draws instead, cheaper there (issue 15; sampler "chain" keeps the
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
   zero or the identity is skipped exactly (`_train_kernel`).
5. `_run_full` is the whole loop of one run (train to each evaluation step, evaluate, fill the row), a Python
   loop over the two kernels; runner.run_many runs many on Python threads (the kernels release the GIL),
   each bit-identical to the run alone.
Compile cost (issue 22): Numba compiles each njit function once per argument-type signature and links a
callee's machine code into every caller, while an `inline="always"` callee is copied into each call site as
Numba IR and typed there again. The helpers here are therefore plain (separately compiled, once) calls
unless inlining at the Numba level is needed for their arithmetic (`exp_nonpos`, `tanh_fast`: an inlined
copy takes its caller's fastmath flags, a compiled one its own) or for SLP vectorisation (`_adam4`). LLVM
still inlines the small ones (`_flush`, `uniform`) into their callers' loops, which still vectorise (per-step
cost unchanged or lower, issue 22), and the IEEE operations are the same either way (same bits).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sandbox import allocators as al
from sandbox.config import ZERO_PASS1
from sandbox.policies import batch_backward, batch_logits, exp_nonpos, work_size
from sandbox.rng import binomial, multinomial, shuffle, uniform

SGD, ADAM, ADAMW = 0, 1, 2
SCALE_GROUP, SCALE_BATCH, SCALE_NONE = 0, 1, 2
PG, PPO, CISPO = 0, 1, 2

# float hyperparameters hp[...]
HP_LR, HP_B1, HP_B2, HP_EPS, HP_WD, HP_CLIP, HP_KL, HP_ENT, HP_ADV_EPS, HP_BUDGET = range(10)
HP_A0 = 10  # hp[HP_A0: HP_A0 + allocators.N_PARAMS]: the allocator's parameters (sandbox/allocators.py)
HP_TINY = HP_A0 + al.N_PARAMS  # hp[HP_TINY]: the flush threshold (TINY; 0: the unflushed arithmetic)
TINY = 1e-30
"""Flush threshold of the optimiser state (issue 27). Adam's first moment of a parameter that stops receiving
gradient (a solved problem's row: its groups have no variance) decays as beta1^t, the bias-correction powers
beta1^t, beta2^t likewise, and AdamW's pull toward theta0 = 0 shrinks a displacement geometrically. In IEEE
doubles such a decay enters the subnormal range (beta1 = 0.9: ~6,700 updates) and then never reaches zero
(0.9 x of a few subnormal ulps rounds back to itself), and x86 arithmetic on subnormals takes a slow path
(a microcode assist on Intel): a step got slower the longer a run lasted (2^26-rollout runs 4.6x slower per
step than 2^22 on an Intel Xeon). So the kernels set to exactly 0, after each update: |m1| < TINY,
m2 < TINY^2 (m2 is a squared gradient), the powers below TINY, gradient entries |g| < TINY (before the norm
and the moments, so g * g cannot underflow) and a decayed displacement |theta - theta0| < TINY.
The same explicit arithmetic on every CPU (no FTZ/DAZ mode, which threads need not inherit). Effect: a
power below TINY leaves 1 - power = 1 exactly; a moment below TINY moves theta by at most
lr * TINY / ((1 - beta1) * adam_eps) = 1e-22 lr per update (adam_eps 1e-8), below half an ulp of any
|theta| > 1e-6 lr, and m2 < TINY^2 changes sqrt(m2 / bc2) + eps by less than half an ulp of eps
(adam_eps >= 1e-20). So tables are equal bit for bit to the unflushed arithmetic (hp[HP_TINY] = 0) on the
runs tests/sandbox/test_sim_subnormal.py compares, including runs long enough to reach subnormals."""
# int hyperparameters ip[...]
(IP_N, IP_BP, IP_NEST, IP_OPT, IP_SCALE, IP_OBJ, IP_EPOCHS, IP_MB, IP_ZVF, IP_SAMPLE_STD, IP_SAMPLER,
 IP_LENS, IP_ALLOC) = range(13)
SAMPLER_AUTO, SAMPLER_CHAIN = 0, 1
SMALL_N = 16
"""Group sizes n <= SMALL_N draw rollouts as n categorical draws (`_categorical_counts`) under sampler "auto";
larger n (or sampler "chain") as one multinomial, a chain of K-1 binomials (O(1) in n)."""
# int state st[...]
ST_POS, ST_T, ST_STEP = range(3)
# float accumulators acc[...] (since the last evaluation unless "total"; AC_BREW: the last step's value)
AC_TOKENS, AC_ZV, AC_GROUPS, AC_GNORM, AC_UPDATES, AC_TOK, AC_ROLL, AC_BREW = range(8)
N_ACC = 8

# status codes returned by the kernels
OK, BAD_LOGITS, BAD_GRAD = 0, 1, 2
REASONS = {BAD_LOGITS: "non-finite logits", BAD_GRAD: "non-finite gradient", 3: "non-finite metrics"}


@njit(cache=True, error_model="numpy")
def _softmax_fast(z, logp, pi):
    """Stable log-softmax and softmax of one row z (K,) into logp and pi (as policies.softmax_row).

    The exponentials go through `exp_nonpos` (<= 1 ulp from np.exp, no libm call) so the K of them vectorise;
    arguments below -708 are clamped there (exp(-708) ~ 3e-308 instead of a smaller number: rounding).
    """
    K = z.shape[0]
    mx = z[0]
    for k in range(1, K):
        if z[k] > mx:
            mx = z[k]
    for k in range(K):
        y = z[k] - mx
        pi[k] = exp_nonpos(y if y > -708.0 else -708.0)
    s = 0.0
    for k in range(K):
        s += pi[k]
    lse = mx + np.log(s)
    inv = 1.0 / s
    for k in range(K):
        pi[k] *= inv
        logp[k] = z[k] - lse


@njit(cache=True, error_model="numpy")
def _softmax_pi(z, pi):
    """`_softmax_fast` without the log-probabilities (plain PG without KL / entropy needs only pi): the same
    operations for pi, so bit-identical pi, and no log call."""
    K = z.shape[0]
    mx = z[0]
    for k in range(1, K):
        if z[k] > mx:
            mx = z[k]
    for k in range(K):
        y = z[k] - mx
        pi[k] = exp_nonpos(y if y > -708.0 else -708.0)
    s = 0.0
    for k in range(K):
        s += pi[k]
    inv = 1.0 / s
    for k in range(K):
        pi[k] *= inv


@njit(cache=True, error_model="numpy")
def _softmax_rows(Z, nb, pis, logp, need_logp, mx, mxe):
    """`_softmax_fast` (need_logp) or `_softmax_pi` of rows 0..nb-1 of Z (rows, K) into pis / logp, all rows
    at once: the K = 8 exponentials of one row are too few for LLVM's loop vectoriser (a K-long loop stays
    scalar), so they run as one flat loop over nb * K entries, which vectorises. Per entry and per row the
    same IEEE operations in the same order as the one-row functions (same max, exp_nonpos argument, serial
    row sum, log, 1/s): bit-identical results (tests/sandbox/test_sim_speed.py). mx (rows,) and mxe
    (rows * K,) are scratch."""
    K = Z.shape[1]
    E = nb * K
    zf = Z.reshape(Z.shape[0] * K)
    pf = pis.reshape(pis.shape[0] * K)
    for b in range(nb):
        m = Z[b, 0]
        for k in range(1, K):
            if Z[b, k] > m:
                m = Z[b, k]
        mx[b] = m
        for k in range(K):
            mxe[b * K + k] = m
    for e in range(E):
        y = zf[e] - mxe[e]
        pf[e] = exp_nonpos(y if y > -708.0 else -708.0)
    for b in range(nb):
        s = 0.0
        for k in range(K):
            s += pis[b, k]
        if need_logp:
            lse = mx[b] + np.log(s)
            for k in range(K):
                logp[b, k] = Z[b, k] - lse
        inv = 1.0 / s
        for k in range(K):
            mxe[b * K + k] = inv
    for e in range(E):
        pf[e] *= mxe[e]


@njit(cache=True, error_model="numpy")
def reward_std(mean, count, sample):
    """Std of `count` binary rewards with mean `mean`: sample (Bessel, count - 1; 0 for one reward) or
    population (sample=False). The variance of 0/1 rewards is mean (1 - mean) (population)."""
    var = max(mean * (1.0 - mean), 0.0)
    if sample:
        if count < 2:
            return 0.0
        var *= count / (count - 1.0)
    return np.sqrt(var)


@njit(cache=True, error_model="numpy")
def advantages(c, n, mean, std, scale, batch_std, eps=0.0):
    """(A_correct, A_wrong) = ((1 - mean), (0 - mean)) / (std + eps) of a group with c of n correct and
    baseline mean/std (GRPO, docs/PAPER.md; `scale` picks the group std, the batch std or none). Zero when the
    chosen std is zero: every reward agrees with the baseline, and eps alone would give a 1/eps scale."""
    if scale == SCALE_GROUP:
        den = std
    elif scale == SCALE_BATCH:
        den = batch_std
    else:
        return 1.0 - mean, 0.0 - mean
    if den <= 1e-12:
        return 0.0, 0.0
    den += eps
    return (1.0 - mean) / den, (0.0 - mean) / den


@njit(cache=True, error_model="numpy")
def logit_gradient(counts, n, corr, a_c, a_w, pi, logp, logp_old, logp0, objective, clip, kl, ent, out):
    """Ascent direction dJ/dz (K,) of one group (module docstring, step 3), before the 1/groups average."""
    K = pi.shape[0]
    sv = 0.0
    for k in range(K):
        a = a_c if k == corr else a_w
        v = counts[k] * a
        if objective != PG and v != 0.0:
            r = np.exp(logp[k] - logp_old[k])
            if objective == PPO:
                if (a > 0.0 and r >= 1.0 + clip) or (a < 0.0 and r <= 1.0 - clip):
                    v = 0.0
                else:
                    v *= r
            else:
                v *= min(r, 1.0 + clip)
        out[k] = v
        sv += v
    for k in range(K):
        out[k] = (out[k] - sv * pi[k]) / n
    if kl > 0.0:
        kl_val = 0.0
        for k in range(K):
            kl_val += pi[k] * (logp[k] - logp0[k])
        for k in range(K):
            out[k] -= kl * pi[k] * (logp[k] - logp0[k] - kl_val)
    if ent > 0.0:
        h = 0.0
        for k in range(K):
            h -= pi[k] * logp[k]
        for k in range(K):
            out[k] -= ent * pi[k] * (logp[k] + h)


def _train_chunk(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0,
                 theta, theta0, m1, m2, pw, row_t, stamp, perm, st, acc, hp, ip, rs, m_end):
    """Deprecated argument layout of `_train_kernel` (hp (8,), ip (9,), acc (7,)), kept only until
    studies/interference.py uses sandbox.diagnostics; pads the advantage convention with SimConfig's defaults
    (sample std, eps 1e-4), the auto sampler, and marks every block as moved (no skipping: the caller holds
    no `moved` flags between calls)."""
    hp2 = np.concatenate([hp, [1e-4]]) if hp.size == HP_ADV_EPS else hp
    if ip.size == IP_SAMPLE_STD:
        ip2 = np.concatenate([ip, [1, SAMPLER_AUTO, int(np.any(lens != 0.0))]]).astype(np.int64)
    else:
        ip2 = ip
    acc2 = np.concatenate([acc, np.zeros(N_ACC - acc.size)]) if acc.size < N_ACC else acc
    moved = np.ones(d + 1, dtype=np.bool_)
    code = _train_kernel(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, theta0, m1, m2,
                         pw, row_t, stamp, perm, st, acc2, hp2, ip2, rs, moved, None, m_end)
    acc[:] = acc2[: acc.size]
    return code


@njit(cache=True, error_model="numpy")
def _categorical_counts(s, pi, n, first, need_rest, out):
    """Counts (K,) of n categorical draws from pi, for small n (`SMALL_N`): the number correct c (answer
    `first`) as n Bernoulli(pi[first]) draws, then each of the n - c wrong rollouts by inverse CDF over the
    wrong answers. need_rest=False leaves the wrong counts at 0 when c = 0 (the caller knows they cannot
    matter: zero advantages, no length model), saving those draws. Exact (up to rounding of the CDF)."""
    K = pi.shape[0]
    p = pi[first]
    c = 0
    for _ in range(n):
        if uniform(s) < p:
            c += 1
    for k in range(K):
        out[k] = 0
    out[first] = c
    if c == n or (c == 0 and not need_rest):
        return c
    mass = 0.0
    last = first
    for k in range(K):
        if k != first:
            mass += pi[k]
            last = k
    for _ in range(n - c):
        u = uniform(s) * mass
        pick = last
        cum = 0.0
        for k in range(K):
            if k == first:
                continue
            cum += pi[k]
            if u < cum:
                pick = k
                break
        out[pick] += 1
    return c


@njit(cache=True, nogil=True, error_model="numpy")
def _train_kernel(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0,
                  theta, theta0, m1, m2, pw, row_t, stamp, perm, st, acc, hp, ip, rs, moved, hist, m_end):
    """Run GRPO steps st[ST_STEP] .. m_end-1 in place on theta and the optimiser state. Returns a status code.

    A config with an allocator other than `fixed` (ip[IP_ALLOC]) runs `alloc_step.train_kernel_alloc`
    instead, which trains until m_end * bp * n rollouts are spent; this fixed path is the original one,
    untouched.
    hist (d, allocators.N_HIST): the per-problem history the allocators read, or None for a fixed run: then
    this specialisation has no allocator path (the cold compile of a fixed run is ~40% shorter, issue 22).

    pw: running powers (beta1^t, beta2^t) per private row (d, 2) and for the shared block (row d).
    moved (d + 1,) bool: whether private row g (row d: the shared block) has ever had a nonzero gradient.
    Exact skips (issue 15): a group with zero advantages and no KL / entropy term has a zero logit gradient,
    so it gets no logit-gradient or backward work; a block whose gradient is zero gets no optimiser update
    when that update is the identity (never moved: moments and displacement from theta0 are all zero; or
    plain SGD without decay). Its step counters and bias-correction powers still advance.
    """
    if hist is not None:  # pruned at compile time when hist is None: a fixed run never compiles the allocator
        if ip.shape[0] > IP_ALLOC and ip[IP_ALLOC] != al.A_FIXED:
            return alloc_step.train_kernel_alloc(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0,
                                                 theta, theta0, m1, m2, pw, row_t, stamp, perm, st, acc, hp,
                                                 ip, rs, moved, hist, m_end)
    K = logp0.shape[1]
    n = ip[IP_N]
    bp = ip[IP_BP]
    n_est = ip[IP_NEST]
    opt = ip[IP_OPT]
    scale = ip[IP_SCALE]
    objective = ip[IP_OBJ]
    n_mb = 1 if objective == PG else ip[IP_MB]
    n_updates = 1 if objective == PG else ip[IP_EPOCHS] * n_mb
    zvf = ip[IP_ZVF] != 0
    sample_std = ip[IP_SAMPLE_STD] != 0
    categorical = ip[IP_SAMPLER] == SAMPLER_AUTO and n <= SMALL_N
    has_len = ip[IP_LENS] != 0
    lr = hp[HP_LR]
    b1 = hp[HP_B1]
    b2 = hp[HP_B2]
    eps = hp[HP_EPS]
    wd = hp[HP_WD] if opt != ADAM else 0.0
    clip = hp[HP_CLIP]
    kl = hp[HP_KL]
    ent = hp[HP_ENT]
    adv_eps = hp[HP_ADV_EPS]
    tiny = hp[HP_TINY] if hp.shape[0] > HP_TINY else TINY
    has_priv = s_pr != 0.0
    quiet = kl == 0.0 and ent == 0.0  # then zero advantages give an exactly zero logit gradient
    identity_if_zero = opt == SGD and wd == 0.0  # a zero gradient leaves every parameter as it is
    need_logp = objective != PG or not quiet  # log pi enters only the PPO / CISPO ratio and KL / entropy

    batch = np.empty(bp, dtype=np.int64)
    counts = np.empty((bp, K), dtype=np.int64)
    Z = np.empty((bp, K))
    logp_old = np.empty((bp, K))
    pis = np.empty((bp, K))
    DZ = np.empty((bp, K))
    PG_ = np.empty((bp, K))
    a_c = np.empty(bp)
    a_w = np.empty(bp)
    keep = np.empty(bp, dtype=np.bool_)
    silent = np.empty(bp, dtype=np.bool_)
    work = np.zeros(work_size(kind, data[3], K, bp))
    pi = np.empty(K)
    logp = np.empty(K)
    gshared = np.zeros(S)
    pgrad = np.zeros((d, K)) if has_priv else np.zeros((1, K))
    touched = np.empty(bp, dtype=np.int64)
    smx = np.empty(bp)
    smxe = np.empty(bp * K)

    while st[ST_STEP] < m_end:
        step = st[ST_STEP]
        # --- batch of problems: epochs over a shuffled training set
        for b in range(bp):
            if st[ST_POS] >= d:
                shuffle(rs, perm)
                st[ST_POS] = 0
            batch[b] = perm[st[ST_POS]]
            st[ST_POS] += 1
        # --- rollouts: one multinomial per problem; baselines
        if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, batch, Z, work):
            return BAD_LOGITS
        tot_c = 0.0
        _softmax_rows(Z, bp, pis, logp_old, need_logp, smx, smxe)
        for b in range(bp):
            g = batch[b]
            cg = correct[g]
            if categorical:
                c = _categorical_counts(rs, pis[b], n, cg, n_est > 0 or has_len, counts[b])
            else:
                multinomial(rs, pis[b], n, cg, counts[b])
                c = counts[b, cg]
            tot_c += c
            tok = 0.0
            if has_len:
                for k in range(K):
                    tok += counts[b, k] * lens[g, k]
            pc = pis[b, cg]
            if n_est > 0:
                ce = binomial(rs, n_est, pc)
                mean = ce / n_est
                if has_len:
                    if pc < 1.0:
                        wl = 0.0
                        for k in range(K):
                            if k != cg:
                                wl += pis[b, k] * lens[g, k]
                        tok += ce * lens[g, cg] + (n_est - ce) * wl / (1.0 - pc)
                    else:
                        tok += n_est * lens[g, cg]
            else:
                mean = c / n
            a_c[b] = mean
            zero_var = c == 0 or c == n
            keep[b] = not (zvf and zero_var)
            if zero_var:
                acc[AC_ZV] += 1.0
            acc[AC_GROUPS] += 1.0
            acc[AC_TOKENS] += tok
            acc[AC_TOK] += tok
        acc[AC_ROLL] += bp * (n + n_est)
        bmean = tot_c / (bp * n)
        acc[AC_BREW] = bmean
        batch_std = reward_std(bmean, bp * n, sample_std)
        n_base = n_est if n_est > 0 else n
        for b in range(bp):
            mean = a_c[b]
            c = counts[b, correct[batch[b]]]
            std = reward_std(mean, n_base, sample_std)
            ac, aw = advantages(c, n, mean, std, scale, batch_std, adv_eps)
            if n_est == 0 and (c == 0 or c == n):
                ac, aw = 0.0, 0.0
            a_c[b] = ac
            a_w[b] = aw
            silent[b] = not keep[b] or (quiet and ac == 0.0 and aw == 0.0)
        # --- updates: one for pg (reusing the rollout forward pass); ppo_epochs * minibatches for ppo / cispo
        for u in range(n_updates):
            mb = u % n_mb
            b_lo = (mb * bp) // n_mb
            b_hi = ((mb + 1) * bp) // n_mb
            nb = b_hi - b_lo
            n_keep = 0
            n_loud = 0
            for b in range(b_lo, b_hi):
                if keep[b]:
                    n_keep += 1
                if not silent[b]:
                    n_loud += 1
            if n_keep == 0:
                continue
            inv = 1.0 / n_keep
            idx = batch[b_lo:b_hi]
            if objective != PG and n_loud > 0:
                if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, Z[:nb], work):
                    return BAD_LOGITS
            for i in range(nb):
                b = b_lo + i
                dz = DZ[i]
                if silent[b]:
                    for k in range(K):
                        dz[k] = 0.0
                    continue
                g = batch[b]
                if objective == PG:
                    for k in range(K):
                        pi[k] = pis[b, k]
                        logp[k] = logp_old[b, k]
                else:
                    _softmax_fast(Z[i], logp, pi)
                lg0 = logp0[g] if g < d else logp0[0]
                logit_gradient(counts[b], n, correct[g], a_c[b], a_w[b], pi, logp, logp_old[b], lg0,
                               objective, clip, kl, ent, dz)
                for k in range(K):
                    dz[k] = -dz[k] * inv  # descent gradient of the batch loss
            for j in range(S):
                gshared[j] = 0.0
            if n_loud > 0:
                batch_backward(kind, theta, data, S, s_sh, s_pr, d, idx, DZ[:nb], gshared, PG_[:nb], work)
            n_touched = 0
            if has_priv:
                tag = step * n_updates + u + 1
                for i in range(nb):
                    b = b_lo + i
                    if not keep[b]:
                        continue
                    g = batch[b]
                    if stamp[g] != tag:
                        stamp[g] = tag
                        touched[n_touched] = g
                        n_touched += 1
                        for k in range(K):
                            pgrad[g, k] = 0.0
                    if not silent[b]:
                        for k in range(K):
                            pgrad[g, k] += PG_[i, k]
            # --- gradient entries below TINY are 0 (their squares would underflow); norm, divergence check
            _flush_range(gshared, 0, S, tiny)
            for t in range(n_touched):
                _flush_range(pgrad[touched[t]], 0, K, tiny)
            gn = _sumsq(gshared)
            for t in range(n_touched):
                g = touched[t]
                for k in range(K):
                    gn += pgrad[g, k] * pgrad[g, k]
            if not np.isfinite(gn):
                return BAD_GRAD
            acc[AC_GNORM] += np.sqrt(gn)
            acc[AC_UPDATES] += 1.0
            # --- optimiser: dense on shared parameters
            if S > 0:
                st[ST_T] += 1
                pw[d, 0] = _flush(pw[d, 0] * b1, tiny)  # 1 - power is 1 exactly long before TINY
                pw[d, 1] = _flush(pw[d, 1] * b2, tiny)
                nz = _any_nonzero(gshared, 0, S)
                if nz:
                    moved[d] = True
                if nz or not (identity_if_zero or not moved[d]):
                    _opt_dense(theta, theta0, m1, m2, gshared, S, opt, lr, b1, b2, eps, wd,
                               1.0 - pw[d, 0], 1.0 - pw[d, 1], tiny)
            # --- lazy (per-row) optimiser on the private blocks of the problems in this update
            for t_i in range(n_touched):
                g = touched[t_i]
                row_t[g] += 1
                pw[g, 0] = _flush(pw[g, 0] * b1, tiny)
                pw[g, 1] = _flush(pw[g, 1] * b2, tiny)
                nz = _any_nonzero(pgrad[g], 0, K)
                if nz:
                    moved[g] = True
                if nz or not (identity_if_zero or not moved[g]):
                    _opt_row(theta, theta0, m1, m2, pgrad[g], S + g * K, K, opt, lr, b1, b2, eps, wd,
                             1.0 - pw[g, 0], 1.0 - pw[g, 1], tiny)
        st[ST_STEP] += 1
    return OK


@njit(cache=True, error_model="numpy")
def _any_nonzero(x, lo, hi):
    for j in range(lo, hi):
        if x[j] != 0.0:
            return True
    return False


@njit(cache=True, error_model="numpy")
def _flush(x, tiny):
    """x, or exactly 0 where |x| < tiny (`TINY`); NaN stays NaN (the comparison is false), so divergence
    checks still see it. A select, so the loops it is in still vectorise."""
    return 0.0 if abs(x) < tiny else x


@njit(cache=True, error_model="numpy")
def _decay(t, t0, lr, wd, tiny):
    """Decoupled decay t - lr wd (t - t0) toward t0; a displacement |t - t0| < tiny is set to 0 (t0), since
    its geometric shrinking toward t0 = 0 would enter the subnormal range (`TINY`)."""
    dlt = t - t0
    return t0 if abs(dlt) < tiny else t - lr * wd * dlt


@njit(cache=True, error_model="numpy")
def _flush_range(x, lo, hi, tiny):
    """`_flush` of x[lo:hi] in place (gradient entries, before the norm and the optimiser)."""
    for j in range(lo, hi):
        x[j] = _flush(x[j], tiny)


@intrinsic
def _llvm_sqrt(typingctx, x):
    """sqrt(x) as the llvm.sqrt.f64 intrinsic: one (v)sqrtsd instruction, vectorisable by LLVM. Numba lowers
    np.sqrt of a scalar to a call of libm's sqrt through a pointer (no SIMD across such calls); both are the
    correctly rounded IEEE square root, so the results are the same bit for bit (NaN for x < 0)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.sqrt.f64")
        return builder.call(fn, args)
    return types.float64(types.float64), codegen


ROW8 = 8
_U1 = np.uint64(1)
"""Rows of this length (the default K) under Adam take two `_adam4` blocks (SIMD)."""


@njit(cache=True, inline="always", error_model="numpy")
def _adam4(theta, m1, m2, grad, j, i, lr, b1, b2, eps, bc1, bc2, tiny):
    """Adam (no decay) on theta[j:j+4] with gradient grad[i:i+4]: one basic block, every load before any
    store, unsigned indices, so that LLVM's SLP vectoriser packs the four lanes into one AVX2 vector (a loop
    over 8 stays scalar). The IEEE operations per element are those of `_opt_update`, the moments stored
    flushed (`_flush`) as there (bit-identical)."""
    i0, j0 = np.uint64(i), np.uint64(j)  # unsigned indices: no negative-index wraparound selects, so the
    i1, j1 = i0 + _U1, j0 + _U1  # four addresses are provably adjacent
    i2, j2 = i1 + _U1, j1 + _U1
    i3, j3 = i2 + _U1, j2 + _U1
    g0, g1, g2, g3 = grad[i0], grad[i1], grad[i2], grad[i3]
    a0, a1, a2, a3 = m1[j0], m1[j1], m1[j2], m1[j3]
    v0, v1, v2, v3 = m2[j0], m2[j1], m2[j2], m2[j3]
    t0, t1, t2, t3 = theta[j0], theta[j1], theta[j2], theta[j3]
    a0 = b1 * a0 + (1.0 - b1) * g0
    a1 = b1 * a1 + (1.0 - b1) * g1
    a2 = b1 * a2 + (1.0 - b1) * g2
    a3 = b1 * a3 + (1.0 - b1) * g3
    v0 = b2 * v0 + (1.0 - b2) * g0 * g0
    v1 = b2 * v1 + (1.0 - b2) * g1 * g1
    v2 = b2 * v2 + (1.0 - b2) * g2 * g2
    v3 = b2 * v3 + (1.0 - b2) * g3 * g3
    t0 = t0 - lr * (a0 / bc1) / (_llvm_sqrt(v0 / bc2) + eps)
    t1 = t1 - lr * (a1 / bc1) / (_llvm_sqrt(v1 / bc2) + eps)
    t2 = t2 - lr * (a2 / bc1) / (_llvm_sqrt(v2 / bc2) + eps)
    t3 = t3 - lr * (a3 / bc1) / (_llvm_sqrt(v3 / bc2) + eps)
    tiny2 = tiny * tiny
    a0, a1, a2, a3 = _flush(a0, tiny), _flush(a1, tiny), _flush(a2, tiny), _flush(a3, tiny)
    v0, v1, v2, v3 = _flush(v0, tiny2), _flush(v1, tiny2), _flush(v2, tiny2), _flush(v3, tiny2)
    m1[j0], m1[j1], m1[j2], m1[j3] = a0, a1, a2, a3
    m2[j0], m2[j1], m2[j2], m2[j3] = v0, v1, v2, v3
    theta[j0], theta[j1], theta[j2], theta[j3] = t0, t1, t2, t3


@njit(cache=True, error_model="numpy")
def _opt_row(theta, theta0, m1, m2, grad, off, size, opt, lr, b1, b2, eps, wd, bc1, bc2, tiny=TINY):
    """`_opt_update` on theta[off:off+size] with gradient grad[:size], one branch-free loop per case so the
    K-long row vectorises; the same arithmetic per element (bit-identical). Adam rows of 8 use `_adam4`."""
    if size == ROW8 and opt != SGD and wd == 0.0:  # Adam on a row of 8: two SIMD blocks, same IEEE ops
        _adam4(theta, m1, m2, grad, off, 0, lr, b1, b2, eps, bc1, bc2, tiny)
        _adam4(theta, m1, m2, grad, off + 4, 4, lr, b1, b2, eps, bc1, bc2, tiny)
        return
    tiny2 = tiny * tiny
    if opt == SGD:
        for i in range(size):
            j = off + i
            if wd > 0.0:
                theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            theta[j] -= lr * grad[i]
    elif wd > 0.0:
        for i in range(size):
            j = off + i
            theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            gj = grad[i]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)
    else:
        for i in range(size):
            j = off + i
            gj = grad[i]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)


@njit(cache=True, inline="always", error_model="numpy")
def _opt_update(theta, theta0, m1, m2, grad, off, goff, size, opt, lr, b1, b2, eps, wd, bc1, bc2, tiny=TINY):
    """SGD / Adam(W) on theta[off:off+size] with gradient grad[goff:goff+size]; decay pulls toward theta0.

    The straightforward update, with the flushes of `TINY` (tiny = 0: none): the moments are stored as 0
    below tiny (m1) and tiny^2 (m2) after theta's update, a decayed displacement below tiny becomes 0."""
    for i in range(size):
        j = off + i
        if wd > 0.0:
            theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
        gj = grad[goff + i]
        if opt == SGD:
            theta[j] -= lr * gj
        else:
            m1[j] = b1 * m1[j] + (1.0 - b1) * gj
            m2[j] = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (m1[j] / bc1) / (np.sqrt(m2[j] / bc2) + eps)
            m1[j] = _flush(m1[j], tiny)
            m2[j] = _flush(m2[j], tiny * tiny)


@njit(cache=True, error_model="numpy")
def _opt_dense(theta, theta0, m1, m2, grad, size, opt, lr, b1, b2, eps, wd, bc1, bc2, tiny=TINY):
    """`_opt_update` on theta[:size] (the shared block), compiled so that the loop vectorises.

    Same arithmetic per element as `_opt_update` (bit-identical results); error_model="numpy" only drops
    Numba's zero-division checks, whose branches kept LLVM from vectorising (the dense Adam step over the
    2,344 mlp parameters at dim 64 was the largest single cost of a step).
    """
    tiny2 = tiny * tiny
    if opt == SGD:
        for j in range(size):
            if wd > 0.0:
                theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            theta[j] -= lr * grad[j]
    elif wd > 0.0:
        for j in range(size):
            theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            gj = grad[j]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)
    else:
        for j in range(size):
            gj = grad[j]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)


@njit(cache=True, fastmath={"reassoc", "contract"})
def _sumsq(x):
    """Sum of squares with a reassociated (SIMD) reduction: rounding differs from a serial sum, NaN/inf
    handling does not (no nnan/ninf flags), so the divergence check on the gradient norm still sees them."""
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j] * x[j]
    return s


EVAL_CHUNK = 256


@njit(cache=True, error_model="numpy")
def _evaluate(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric, sampled, rs,
              pass1_train, pass1_val, out):
    """pass@1 of every problem and the metric aggregates (see runner.py). Returns False if non-finite.

    out: [train_mean, train_best_k, train_worst_k, train_zero_frac, val_mean, val_best_k, val_worst_k,
    val_zero_frac, entropy, kl, expected response length, expected zero-variance share at group size n]
    (entropy, kl, lengths and zero-variance share over the training problems).
    """
    K = logp0.shape[1]
    G = offset.shape[0]
    Z = np.empty((EVAL_CHUNK, K))
    logp = np.empty(K)
    pi = np.empty(K)
    idx = np.empty(EVAL_CHUNK, dtype=np.int64)
    work = np.zeros(work_size(kind, data[3], K, EVAL_CHUNK))
    for j in range(out.shape[0]):
        out[j] = 0.0
    for lo in range(0, G, EVAL_CHUNK):
        nb = min(EVAL_CHUNK, G - lo)
        for i in range(nb):
            idx[i] = lo + i
        if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work):
            return False
        for i in range(nb):
            g = lo + i
            _softmax_fast(Z[i], logp, pi)
            p = pi[correct[g]]
            if sampled:
                c = binomial(rs, k_metric, p)
                mean = c / k_metric
                best = 1.0 if c > 0 else 0.0
                worst = 1.0 if c == k_metric else 0.0
                zero = 1.0 if c == 0 else 0.0
            else:
                mean = p
                best = 1.0 - (1.0 - p) ** k_metric
                worst = p**k_metric
                zero = 1.0 if p < ZERO_PASS1 else 0.0  # sandbox.config.ZERO_PASS1
            o = 0 if g < d else 4
            out[o] += mean
            out[o + 1] += best
            out[o + 2] += worst
            out[o + 3] += zero
            if g < d:
                pass1_train[g] = p
                h = 0.0
                klv = 0.0
                ln = 0.0
                for k in range(K):
                    h -= pi[k] * logp[k]
                    klv += pi[k] * (logp[k] - logp0[g, k])
                    ln += pi[k] * lens[g, k]
                out[8] += h
                out[9] += klv
                out[10] += ln
                out[11] += p**n + (1.0 - p) ** n
            else:
                pass1_val[g - d] = p
    for j in range(4):
        out[j] /= d
        out[4 + j] /= G - d
    for j in range(8, 12):
        out[j] /= d
    for j in range(out.shape[0]):
        if not np.isfinite(out[j]):
            return False
    return True


# per-problem values kept by `_evaluate_cached` (cache[g, :]): pass@1, exact best@k, worst@k, entropy, KL,
# expected length, expected zero-variance share
C_P, C_BEST, C_WORST, C_H, C_KL, C_LEN, C_ZV = range(7)
N_CACHE = 7


def _evaluate_cached(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric, sampled,
                     rs, pass1_train, pass1_val, out, cache, cstamp, row_t, use_cache):
    """`_evaluate` that recomputes only the problems whose logits may have changed (issue 15), bit-identical.

    With use_cache and no shared part in the logits (S == 0 or s_sh == 0: tabular, or share = 0), problem
    g's logits are b_g + s_pr w_g, and w_g changes only on an optimiser update of row g, which advances
    row_t[g]; so a training problem with row_t[g] == cstamp[g] has the pass@1, metrics, entropy, KL and
    length it had at the last evaluation, and a validation problem (no private row) never changes. Those are
    read from cache (G, N_CACHE); the others are computed as `_evaluate` computes them (same chunking of
    batch_logits, same operations) and stored. The sums run over g in the same order as `_evaluate`, and
    sampled metrics draw from rs for every problem as there, so `out` and the pass@1 vectors are equal bit
    for bit (tests/sandbox/test_sim_speed.py). use_cache=False (or a shared part) recomputes every problem.

    Two kernels (issue 27): `_eval_problems` fills the cache chunk by chunk (chunks of EVAL_CHUNK problems,
    independent of each other, so `_run_full` may split them over threads) and `_eval_reduce` sums it.
    """
    if not _eval_problems(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric,
                          cache, cstamp, row_t, use_cache, 0, 1):
        return False
    return _eval_reduce(d, sampled, k_metric, rs, pass1_train, pass1_val, out, cache)


@njit(cache=True, nogil=True, error_model="numpy")
def _eval_problems(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric, cache,
                   cstamp, row_t, use_cache, c_first, c_step):
    """The per-problem part of `_evaluate_cached`: chunks c_first, c_first + c_step, ... of EVAL_CHUNK
    problems (chunk c: problems c * EVAL_CHUNK ...) into cache / cstamp. A chunk reads and writes only its
    own problems' rows, so the chunks can run in any order or on any thread with the same result. False if
    some logits are non-finite."""
    K = logp0.shape[1]
    G = offset.shape[0]
    reuse = use_cache and (S == 0 or s_sh == 0.0)
    idx = np.empty(EVAL_CHUNK, dtype=np.int64)
    Z = np.empty((EVAL_CHUNK, K))
    PI = np.empty((EVAL_CHUNK, K))
    LP = np.empty((EVAL_CHUNK, K))
    smx = np.empty(EVAL_CHUNK)
    smxe = np.empty(EVAL_CHUNK * K)
    # int64 / bool values, not the literals 256, 0, True: Numba compiles a callee once per argument type, and
    # a literal is a type of its own (with `nb = 0` it compiled `_softmax_rows` for nb = Literal[int](0) on
    # top of int64, issue 22: each extra specialisation of a kernel costs its compile)
    work = np.zeros(work_size(kind, data[3], K, np.int64(EVAL_CHUNK)))
    need_logp = K > 0
    for lo in range(c_first * EVAL_CHUNK, G, c_step * EVAL_CHUNK):
        hi = min(EVAL_CHUNK, G - lo) + lo
        nb = np.int64(0)
        for g in range(lo, hi):
            stamp = row_t[g] if g < d else 0
            if reuse and cstamp[g] == stamp:
                continue
            idx[nb] = g
            nb += 1
            cstamp[g] = stamp
        if nb == 0:
            continue
        if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work):
            return False
        _softmax_rows(Z, nb, PI, LP, need_logp, smx, smxe)
        for i in range(nb):
            g = idx[i]
            pi = PI[i]
            logp = LP[i]
            p = pi[correct[g]]
            c = cache[g]
            c[C_P] = p
            c[C_BEST] = 1.0 - (1.0 - p) ** k_metric
            c[C_WORST] = p**k_metric
            if g < d:
                h = 0.0
                klv = 0.0
                ln = 0.0
                for k in range(K):
                    h -= pi[k] * logp[k]
                    klv += pi[k] * (logp[k] - logp0[g, k])
                    ln += pi[k] * lens[g, k]
                c[C_H] = h
                c[C_KL] = klv
                c[C_LEN] = ln
                c[C_ZV] = p**n + (1.0 - p) ** n
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def _eval_reduce(d, sampled, k_metric, rs, pass1_train, pass1_val, out, cache):
    """The sums of `_evaluate_cached` over the cache (G, N_CACHE), in the order of g (sampled metrics draw
    from rs problem by problem). False if a metric is non-finite."""
    G = cache.shape[0]
    for j in range(out.shape[0]):
        out[j] = 0.0
    for g in range(G):
        c = cache[g]
        p = c[C_P]
        if sampled:
            cnt = binomial(rs, k_metric, p)
            mean = cnt / k_metric
            best = 1.0 if cnt > 0 else 0.0
            worst = 1.0 if cnt == k_metric else 0.0
            zero = 1.0 if cnt == 0 else 0.0
        else:
            mean = p
            best = c[C_BEST]
            worst = c[C_WORST]
            zero = 1.0 if p < ZERO_PASS1 else 0.0
        o = 0 if g < d else 4
        out[o] += mean
        out[o + 1] += best
        out[o + 2] += worst
        out[o + 3] += zero
        if g < d:
            pass1_train[g] = p
            out[8] += c[C_H]
            out[9] += c[C_KL]
            out[10] += c[C_LEN]
            out[11] += c[C_ZV]
        else:
            pass1_val[g - d] = p
    for j in range(4):
        out[j] /= d
        out[4 + j] /= G - d
    for j in range(8, 12):
        out[j] /= d
    for j in range(out.shape[0]):
        if not np.isfinite(out[j]):
            return False
    return True


@njit(cache=True, error_model="numpy")
def initial_log_probs(kind, data, S, s_sh, s_pr, d, offset, correct, theta, K):
    """Log-softmax (d, K) of the training problems under theta (the KL reference pi_init)."""
    out = np.empty((d, K))
    Z = np.empty((EVAL_CHUNK, K))
    pi = np.empty(K)
    idx = np.empty(EVAL_CHUNK, dtype=np.int64)
    work = np.zeros(work_size(kind, data[3], K, np.int64(EVAL_CHUNK)))  # int64, as `_evaluate_cached`
    for lo in range(0, d, EVAL_CHUNK):
        nb = min(EVAL_CHUNK, d - lo)
        for i in range(nb):
            idx[i] = lo + i
        batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work)
        for i in range(nb):
            _softmax_fast(Z[i], out[lo + i], pi)
    return out


# stats[e, :] columns filled by `_run_full` (runner.py maps them to the table)
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

    A Python loop over separately compiled kernels (`_train_kernel`, `_eval_problems`, `_eval_reduce`; issue
    22): as one Numba function it was a further compile that re-optimised and re-generated the machine code
    of all of them (Numba links a callee's code into each caller and compiles the whole again), ~2 s of a
    19 s cold compile on an Intel Xeon; the loop costs a few kernel calls per evaluation point (tens of
    microseconds). The row's bookkeeping is the same IEEE arithmetic on float64 scalars.

    eval_threads >= 1 (issue 27, one run on several cores): the evaluations run on that many threads of their
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
    fixed = ip.shape[0] <= IP_ALLOC or ip[IP_ALLOC] == al.A_FIXED  # the allocator kernel is not relied on

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
        return _train_kernel(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, theta0, m1,
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


# The allocator path's step lives in its own module (it imports the kernels above; resolved at compile time).
from sandbox import alloc_step  # noqa: E402
