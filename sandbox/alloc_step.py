"""The GRPO step under a rollout allocator (issue 13): sandbox/allocators.py chooses the problems and n_i,
this kernel draws the rollouts, counts every one as compute and applies the fixed path's update
(sandbox/grpo.py `_train_kernel`, whose helpers it reuses) with each group's own n_i.

grpo._train_kernel dispatches here when ip[IP_ALLOC] names an allocator other than `fixed`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sandbox import allocators as al
from sandbox.grpo import (
    AC_BREW,
    AC_GNORM,
    AC_GROUPS,
    AC_ROLL,
    AC_TOK,
    AC_TOKENS,
    AC_UPDATES,
    AC_ZV,
    ADAM,
    BAD_GRAD,
    BAD_LOGITS,
    HP_A0,
    HP_ADV_EPS,
    HP_B1,
    HP_B2,
    HP_BUDGET,
    HP_ENT,
    HP_EPS,
    HP_KL,
    HP_LR,
    HP_TINY,
    HP_WD,
    IP_ALLOC,
    IP_BP,
    IP_LENS,
    IP_N,
    IP_OPT,
    IP_SAMPLE_STD,
    IP_SAMPLER,
    IP_SCALE,
    OK,
    PG,
    SAMPLER_AUTO,
    SGD,
    SMALL_N,
    ST_POS,
    ST_STEP,
    ST_T,
    TINY,
    _any_nonzero,
    _categorical_counts,
    _flush,
    _flush_range,
    _opt_dense,
    _opt_row,
    _softmax_fast,
    _softmax_pi,
    _sumsq,
    advantages,
    logit_gradient,
    reward_std,
)
from sandbox.policies import batch_backward, batch_logits, work_size
from sandbox.rng import multinomial, shuffle, uniform


@njit(cache=True, error_model="numpy")
def _sample_group(rs, pi, k, cg, need_rest, sampler, out):
    """Counts (K,) of k rollouts from pi (as the fixed path: categorical for small k under sampler auto, else
    the binomial chain); returns the number correct."""
    if sampler == SAMPLER_AUTO and k <= SMALL_N:
        return _categorical_counts(rs, pi, k, cg, need_rest, out)
    multinomial(rs, pi, k, cg, out)
    return out[cg]


@njit(cache=True, error_model="numpy")
def _next_problem(rs, perm, st, d):
    if st[ST_POS] >= d:
        shuffle(rs, perm)
        st[ST_POS] = 0
    g = perm[st[ST_POS]]
    st[ST_POS] += 1
    return g


@njit(cache=True, error_model="numpy")
def train_kernel_alloc(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, theta0, m1, m2, pw,
                        row_t, stamp, perm, st, acc, hp, ip, rs, moved, hist, m_end):
    """GRPO steps under a rollout allocator (sandbox/allocators.py) until acc[AC_ROLL] reaches
    m_end * bp * n rollouts (the fixed path's compute at step m_end) or the budget hp[HP_BUDGET] leaves no
    room for a step. Plain PG only, no decoupled baseline (SimConfig checks it). Each step: the allocator
    picks the trained slots (problem, n_i) from candidate batches of bp problems; every drawn rollout is added
    to acc[AC_ROLL]; the update is the fixed path's, with each group's own n_i in its 1/n_i and baseline.
    """
    K = logp0.shape[1]
    n = ip[IP_N]
    bp = ip[IP_BP]
    opt = ip[IP_OPT]
    scale = ip[IP_SCALE]
    sample_std = ip[IP_SAMPLE_STD] != 0
    sampler = ip[IP_SAMPLER]
    has_len = ip[IP_LENS] != 0
    alloc = ip[IP_ALLOC]
    lr = hp[HP_LR]
    b1 = hp[HP_B1]
    b2 = hp[HP_B2]
    eps = hp[HP_EPS]
    wd = hp[HP_WD] if opt != ADAM else 0.0
    kl = hp[HP_KL]
    ent = hp[HP_ENT]
    adv_eps = hp[HP_ADV_EPS]
    budget = hp[HP_BUDGET]
    tiny = hp[HP_TINY] if hp.shape[0] > HP_TINY else TINY
    par = hp[HP_A0: HP_A0 + al.N_PARAMS]
    has_priv = s_pr != 0.0
    quiet = kl == 0.0 and ent == 0.0
    identity_if_zero = opt == SGD and wd == 0.0
    need_logp = not quiet
    B0 = bp * n
    target = float(m_end) * B0

    batch = np.empty(bp, dtype=np.int64)
    nis = np.empty(bp, dtype=np.int64)
    cs = np.empty(bp, dtype=np.int64)
    counts = np.empty((bp, K), dtype=np.int64)
    logp_old = np.empty((bp, K))
    pis = np.empty((bp, K))
    cand = np.empty(bp, dtype=np.int64)
    cn = np.empty(bp, dtype=np.int64)
    cZ = np.empty((bp, K))
    cpis = np.empty((bp, K))
    clogp = np.empty((bp, K))
    ccounts = np.empty((bp, K), dtype=np.int64)
    phat = np.empty(bp)
    DZ = np.empty((bp, K))
    PG_ = np.empty((bp, K))
    a_c = np.empty(bp)
    a_w = np.empty(bp)
    silent = np.empty(bp, dtype=np.bool_)
    work = np.zeros(work_size(kind, data[3], K, bp))
    gshared = np.zeros(S)
    pgrad = np.zeros((d, K)) if has_priv else np.zeros((1, K))
    touched = np.empty(bp, dtype=np.int64)
    wbuf = np.empty(bp)
    tmp_counts = np.empty(K, dtype=np.int64)
    per_problem = alloc == al.A_KNAPSACK or alloc == al.A_VARIANCE or alloc == al.A_GVM
    ada_rounds = int(par[0]) if alloc == al.A_ADA else 1

    while acc[AC_ROLL] < target:
        step = st[ST_STEP]
        # --- the step's group size (schedules) and its room in the budget
        n_step = n
        if alloc == al.A_ADA:
            n_step = int(par[1])
        if alloc == al.A_SCHEDULE or alloc == al.A_SCHED_ZV:
            if alloc == al.A_SCHEDULE:
                n_step = al.schedule_n(n, acc[AC_ROLL] / budget, par)
            else:
                n_step = n * int(hist[d, al.Z_MULT])
            room = int((budget - acc[AC_ROLL]) // bp)
            if room < n_step:
                n_step = room
        if n_step < 2 or acc[AC_ROLL] + bp * n_step > budget:
            break
        n_slots = 0
        drawn = 0
        rounds = 0
        tot_c = 0
        tot_n = 0
        zv_step = 0
        while True:
            # --- candidate problems (GRESO skips predicted zero-variance ones before any rollout)
            tries = 0
            nc = 0
            while nc < bp:
                g = _next_problem(rs, perm, st, d)
                if alloc == al.A_SKIPZV and tries < d:
                    q = al.skip_probability(hist[g, al.H_STREAK], par[1], par[0])
                    if q > 0.0 and uniform(rs) < q:
                        tries += 1
                        continue
                cand[nc] = g
                nc += 1
            if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, cand, cZ, work):
                return BAD_LOGITS
            for b in range(bp):
                if need_logp:
                    _softmax_fast(cZ[b], clogp[b], cpis[b])
                else:
                    _softmax_pi(cZ[b], cpis[b])
            # --- group sizes n_i
            if per_problem:
                for b in range(bp):
                    g = cand[b]
                    if par[3] != 0.0:
                        phat[b] = cpis[b, correct[g]]
                    else:
                        phat[b] = hist[g, al.H_P] if hist[g, al.H_P] >= 0.0 else par[2]
                if alloc == al.A_KNAPSACK:
                    al.knapsack_alloc(phat, B0, int(par[0]), int(par[1]), cn)
                elif alloc == al.A_VARIANCE:
                    al.variance_alloc(phat, B0, int(par[0]), int(par[1]), cn)
                else:
                    for b in range(bp):
                        if par[3] != 0.0:  # oracle: the exact ||e_c - pi||
                            G = 0.0
                            for kk in range(K):
                                e = (1.0 if kk == correct[cand[b]] else 0.0) - cpis[b, kk]
                                G += e * e
                            G = np.sqrt(G)
                        else:
                            G = al.gvm_gradient_norm(phat[b], K)
                        wbuf[b] = al.gvm_weight(phat[b], G, par[5], par[6])
                    al.proportional_alloc(wbuf, B0, int(par[0]), int(par[1]), cn)
            else:
                for b in range(bp):
                    cn[b] = n_step
            # --- rollouts, history, slots
            for b in range(bp):
                g = cand[b]
                k = cn[b]
                cg = correct[g]
                if alloc == al.A_ADA:  # rounds of k until the pool has a correct and a wrong answer
                    c = _sample_group(rs, cpis[b], k, cg, True, sampler, ccounts[b])
                    drawn += k
                    r_done = 1
                    while al.ada_continue(c, k, r_done, ada_rounds) and \
                            acc[AC_ROLL] + drawn + n_step * (bp - b) <= budget:  # later problems' 1st round
                        c += _sample_group(rs, cpis[b], n_step, cg, True, sampler, tmp_counts)
                        for kk in range(K):
                            ccounts[b, kk] += tmp_counts[kk]
                        k += n_step
                        drawn += n_step
                        r_done += 1
                else:
                    c = _sample_group(rs, cpis[b], k, cg, has_len, sampler, ccounts[b])
                    drawn += k
                al.update_history(hist, g, c, k, step, par[4] if per_problem else 1.0)
                tok = 0.0
                if has_len:
                    for kk in range(K):
                        tok += ccounts[b, kk] * lens[g, kk]
                if c == 0 or c == k:
                    acc[AC_ZV] += 1.0
                    zv_step += 1
                acc[AC_GROUPS] += 1.0
                acc[AC_TOKENS] += tok
                acc[AC_TOK] += tok
                if alloc == al.A_DYNAMIC and (not al.has_signal(c, k) or n_slots >= bp):
                    continue
                s = n_slots
                batch[s] = g
                nis[s] = k
                cs[s] = c
                for kk in range(K):
                    counts[s, kk] = ccounts[b, kk]
                    pis[s, kk] = cpis[b, kk]
                    logp_old[s, kk] = clogp[b, kk]
                tot_c += c
                tot_n += k
                n_slots += 1
            rounds += 1
            if alloc != al.A_DYNAMIC or n_slots >= bp or rounds >= int(par[0]):
                break
            if acc[AC_ROLL] + drawn + B0 > budget:
                break
        acc[AC_ROLL] += drawn
        acc[AC_BREW] = tot_c / tot_n if tot_n > 0 else np.nan
        if alloc == al.A_SCHED_ZV:
            al.zv_schedule_update(hist[d], float(zv_step), float(rounds * bp), par[0], par[1], par[2],
                                  float(n))
        if n_slots == 0:
            st[ST_STEP] += 1
            continue
        bmean = tot_c / tot_n
        batch_std = reward_std(bmean, tot_n, sample_std)
        n_loud = 0
        for s in range(n_slots):
            k = nis[s]
            c = cs[s]
            mean = c / k
            std = reward_std(mean, k, sample_std)
            ac, aw = advantages(c, k, mean, std, scale, batch_std, adv_eps)
            if c == 0 or c == k:
                ac, aw = 0.0, 0.0
            a_c[s] = ac
            a_w[s] = aw
            silent[s] = quiet and ac == 0.0 and aw == 0.0
            if not silent[s]:
                n_loud += 1
        # --- one PG update over the slots (the fixed path's arithmetic with n -> n_i)
        inv = 1.0 / n_slots
        pi = np.empty(K)
        logp = np.empty(K)
        for s in range(n_slots):
            dz = DZ[s]
            if silent[s]:
                for kk in range(K):
                    dz[kk] = 0.0
                continue
            g = batch[s]
            for kk in range(K):
                pi[kk] = pis[s, kk]
                logp[kk] = logp_old[s, kk]
            lg0 = logp0[g] if g < d else logp0[0]
            logit_gradient(counts[s], nis[s], correct[g], a_c[s], a_w[s], pi, logp, logp_old[s], lg0,
                           PG, 0.0, kl, ent, dz)
            for kk in range(K):
                dz[kk] = -dz[kk] * inv
        for j in range(S):
            gshared[j] = 0.0
        idx = batch[:n_slots]
        if n_loud > 0:
            if alloc == al.A_DYNAMIC:  # slots gathered over rounds: batch_backward needs their own forward
                if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, cZ[:n_slots],
                                    work):
                    return BAD_LOGITS
            batch_backward(kind, theta, data, S, s_sh, s_pr, d, idx, DZ[:n_slots], gshared, PG_[:n_slots],
                           work)
        n_touched = 0
        if has_priv:
            tag = step + 1
            for s in range(n_slots):
                g = batch[s]
                if stamp[g] != tag:
                    stamp[g] = tag
                    touched[n_touched] = g
                    n_touched += 1
                    for kk in range(K):
                        pgrad[g, kk] = 0.0
                if not silent[s]:
                    for kk in range(K):
                        pgrad[g, kk] += PG_[s, kk]
        _flush_range(gshared, 0, S, tiny)  # as the fixed path (grpo.TINY)
        for t in range(n_touched):
            _flush_range(pgrad[touched[t]], 0, K, tiny)
        gn = _sumsq(gshared)
        for t in range(n_touched):
            g = touched[t]
            for kk in range(K):
                gn += pgrad[g, kk] * pgrad[g, kk]
        if not np.isfinite(gn):
            return BAD_GRAD
        acc[AC_GNORM] += np.sqrt(gn)
        acc[AC_UPDATES] += 1.0
        if S > 0:
            st[ST_T] += 1
            pw[d, 0] = _flush(pw[d, 0] * b1, tiny)
            pw[d, 1] = _flush(pw[d, 1] * b2, tiny)
            nz = _any_nonzero(gshared, 0, S)
            if nz:
                moved[d] = True
            if nz or not (identity_if_zero or not moved[d]):
                _opt_dense(theta, theta0, m1, m2, gshared, S, opt, lr, b1, b2, eps, wd,
                           1.0 - pw[d, 0], 1.0 - pw[d, 1], tiny)
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
