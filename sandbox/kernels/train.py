"""The simulator's one train kernel (docs/PAPER.md "The question", docs/DESIGN.md "Simulator"; the step is
described in sandbox/grpo.py's docstring): GRPO steps in place on theta and the optimiser state, for fixed n
(the allocator `A_FIXED`) and under every rollout allocator (sandbox/allocators.py).

`train_kernel` is one loop over small kernels: the candidates of a step and their group sizes
(sandbox/kernels/allocate.py), the rollouts of a round (`_rollouts`), a group's advantages
(`_advantages`), the gradient of an update (`_logit_grads`, the policy's backward pass, `_private_grads`)
and the optimiser's tail (sandbox/kernels/optimizer.py). A fixed run passes hist=None: every allocator
branch is then pruned at compile time, so its kernel has no allocator code and compiles none of it, and its
step is the original fixed path's arithmetic in the same order (tests/sandbox/test_sim_refactor_bits.py).

Helpers take a 2-D array and a row index, never a row view: a compiled function that passes a view to a
compiled call keeps an atomic NRT incref / decref pair per array argument per call (~40 a step, ~10% of one,
before). Those only kernels call are compiled with no_cpython_wrapper=True: no Python entry point to
generate for them (a ~35-argument unboxing wrapper each; ~2 s of a cold compile).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sandbox.allocators import (
    A_ADA,
    A_DYNAMIC,
    A_FIXED,
    A_GVM,
    A_KNAPSACK,
    A_PILOT,
    A_SCHED_ZV,
    A_VARIANCE,
    H_OUT,
    N_PARAMS,
)
from sandbox.kernels.allocate import (
    ada_continue,
    candidates,
    group_sizes,
    has_signal,
    pilot_evict,
    pilot_keep,
    step_group_size,
    update_history,
    zv_schedule_update,
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
    BAD_GRAD,
    BAD_LOGITS,
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
    OK,
    PG,
    SAMPLER_AUTO,
    SMALL_N,
    ST_STEP,
)
from sandbox.kernels.objective import advantages, logit_gradient_row, reward_std
from sandbox.kernels.optimizer import TINY, grad_norm, step
from sandbox.kernels.rollouts import _categorical_row
from sandbox.kernels.softmax import _softmax_row, _softmax_rows
from sandbox.policies import batch_backward, batch_logits, work_size
from sandbox.rng import binomial, multinomial_row


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _ada_rounds(rs, pis, b, c, k, cg, need_rest, sampler, out, rounds, chunk, room, tmp):
    """Reinforce-Ada's further rounds of group b (policy pis[b]) whose first k rollouts (counts out[b], c
    correct) are drawn: `chunk` more (into tmp[b]) while `ada_continue` and k <= room. Returns (c, k)."""
    done = 1
    while done < rounds and ada_continue(c, k, done, rounds) and k <= room:
        if sampler == SAMPLER_AUTO and chunk <= SMALL_N:
            c += _categorical_row(rs, pis, b, chunk, cg, need_rest, tmp)
        else:
            multinomial_row(rs, pis, b, chunk, cg, tmp)
            c += tmp[b, cg]
        for kk in range(out.shape[1]):
            out[b, kk] += tmp[b, kk]
        k += chunk
        done += 1
    return c, k


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _commit(rs, pis, b, g, c, k, cg, sampler, out, hist, t, par, n, n_slots, tmp):
    """Pilot-Commit on candidate b (policy pis[b]) whose pilot group of k rollouts (counts out[b], c correct)
    is drawn: record the pilot, evict the problem if `pilot_evict`, and when `pilot_keep` holds and a slot is
    free commit n - k more rollouts from the same policy (into tmp[b], added to out[b]), recorded as a group
    of their own. Returns (c, k, kept) of the whole group."""
    update_history(hist, g, c, k, t, 1.0)
    if pilot_evict(c, k, par[4]):
        hist[g, H_OUT] = 1.0
    if not pilot_keep(c, k, par[2], par[3]) or n_slots >= out.shape[0]:
        return c, k, False
    m = n - k
    if sampler == SAMPLER_AUTO and m <= SMALL_N:
        c2 = _categorical_row(rs, pis, b, m, cg, True, tmp)
    else:
        multinomial_row(rs, pis, b, m, cg, tmp)
        c2 = tmp[b, cg]
    for kk in range(out.shape[1]):
        out[b, kk] += tmp[b, kk]
    update_history(hist, g, c2, m, t, 1.0)
    return c + c2, k + m, True


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _baseline(rs, pis, out, b, lens, g, cg, c, k, n_est, has_len):
    """(baseline mean, tokens) of drawn group b (policy pis[b], counts out[b], c correct of k): the mean is
    c / k, or that of n_est separate rollouts (a decoupled baseline), whose tokens count too, as the length's
    expectation given their number correct. lens (d, K): the answers' lengths (has_len)."""
    K = pis.shape[1]
    tok = 0.0
    if has_len:
        for kk in range(K):
            tok += out[b, kk] * lens[g, kk]
    if n_est == 0:
        return c / k, tok
    pc = pis[b, cg]
    ce = binomial(rs, n_est, pc)
    if has_len:
        if pc < 1.0:
            wl = 0.0
            for kk in range(K):
                if kk != cg:
                    wl += pis[b, kk] * lens[g, kk]
            tok += ce * lens[g, cg] + (n_est - ce) * wl / (1.0 - pc)
        else:
            tok += n_est * lens[g, cg]
    return ce / n_est, tok


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _rollouts(rs, cand, cn, cpis, ccounts, clogp, correct, lens, hist, t, ema, acc, budget, n_step, n_est,
              need_rest, has_len, sampler, rounds, zvf, dyn, pc, par, n, tmp, batch, counts, pis, logp_old,
              nis, cs, a_c, keep, n_slots, drawn, tot_c, tot_n, zv):
    """The rollouts of a round's candidates cand (bp,) with group sizes cn, policies cpis / clogp (bp, K): a
    group's answer counts into ccounts (categorical for n_i <= SMALL_N under sampler auto, else the binomial
    chain; ada's further rounds `_ada_rounds`; pilot-commit's commit `_commit`, pc), its baseline and tokens
    (`_baseline`), the history (hist, not None: an allocator) and counters (acc); the kept groups become slots
    n_slots.. (batch, counts, pis, logp_old copied only under dynamic sampling and pilot-commit, where
    candidates are not the slots). One call per round:
    a call per group (~50 scalar arguments) cost ~15% of a step. Returns the updated (n_slots, drawn, tot_c,
    tot_n, zv): the slots, rollouts drawn, correct / rewards in the slots, zero-variance groups."""
    bp = cand.shape[0]
    for b in range(bp):
        g, k = cand[b], cn[b]
        cg = correct[g]
        if sampler == SAMPLER_AUTO and k <= SMALL_N:  # `_sample_group`, spelled out: no call per group
            c = _categorical_row(rs, cpis, b, k, cg, need_rest, ccounts)
        else:
            multinomial_row(rs, cpis, b, k, cg, ccounts)
            c = ccounts[b, cg]
        if hist is not None and rounds > 1:  # ada is an allocator: a fixed run compiles no `_ada_rounds`
            room = budget - acc[AC_ROLL] - drawn - n_step * (bp - b)
            c, k = _ada_rounds(rs, cpis, b, c, k, cg, need_rest, sampler, ccounts, rounds, n_step, room, tmp)
        committed = False
        if hist is not None and pc:
            c, k, committed = _commit(rs, cpis, b, g, c, k, cg, sampler, ccounts, hist, t, par, n, n_slots,
                                      tmp)
        mean, tok = c / k, 0.0
        if n_est > 0 or has_len:
            mean, tok = _baseline(rs, cpis, ccounts, b, lens, g, cg, c, k, n_est, has_len)
        drawn += k + n_est
        if hist is not None and not pc:
            update_history(hist, g, c, k, t, ema)
        zero_var = c == 0 or c == k
        if zero_var:
            acc[AC_ZV] += 1.0
            zv += 1
        acc[AC_GROUPS] += 1.0
        acc[AC_TOKENS] += tok
        acc[AC_TOK] += tok
        if dyn and (not (committed if pc else has_signal(c, k)) or n_slots >= bp):
            continue
        s = n_slots
        n_slots += 1
        if dyn:
            batch[s] = g
            for kk in range(cpis.shape[1]):  # loops, not row views (see rng.multinomial_row)
                counts[s, kk], pis[s, kk], logp_old[s, kk] = ccounts[b, kk], cpis[b, kk], clogp[b, kk]
        nis[s], cs[s], a_c[s], keep[s] = k, c, mean, not (zvf and zero_var)
        tot_c += c
        tot_n += k
    return n_slots, drawn, tot_c, tot_n, zv


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _advantages(nis, cs, a_c, a_w, keep, silent, n_slots, tot_c, tot_n, n_est, scale, sample_std, adv_eps,
                quiet):
    """(A_correct, A_wrong) of each slot s < n_slots into a_c / a_w (a_c holds the baseline means on entry):
    group (n_i rewards, or the n_est baseline rollouts), batch (all tot_n rewards) or no std; zero for a group
    whose rewards all agree (without a decoupled baseline). silent[s]: no logit gradient at all (dropped by
    zero-variance filtering, or zero advantages and no KL / entropy term, which leave it exactly zero)."""
    batch_std = reward_std(tot_c / tot_n, tot_n, sample_std)
    for s in range(n_slots):
        k = nis[s]
        c = cs[s]
        mean = a_c[s]
        std = reward_std(mean, n_est if n_est > 0 else k, sample_std)
        ac, aw = advantages(c, k, mean, std, scale, batch_std, adv_eps)
        if n_est == 0 and (c == 0 or c == k):
            ac, aw = 0.0, 0.0
        a_c[s] = ac
        a_w[s] = aw
        silent[s] = not keep[s] or (quiet and ac == 0.0 and aw == 0.0)


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _minibatch(keep, silent, lo, hi):
    """(kept groups, groups with a logit gradient) among slots lo..hi-1."""
    n_keep = 0
    n_loud = 0
    for b in range(lo, hi):
        if keep[b]:
            n_keep += 1
        if not silent[b]:
            n_loud += 1
    return n_keep, n_loud


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _logit_grads(batch, counts, nis, Z, pis, logp_old, a_c, a_w, silent, lo, hi, correct, logp0, objective,
                 clip, kl, ent, inv, pi, logp, DZ):
    """Descent gradient of the batch loss w.r.t. the logits of slots lo..hi-1 into DZ[:hi - lo] (K,): minus
    the group's dJ/dz (`logit_gradient`) times inv = 1 / (kept groups), 0 for a silent group. Under PG the
    policy is the rollouts' (pis, logp_old); under PPO / CISPO that of the fresh logits Z[:hi - lo]."""
    K = pis.shape[1]
    d = logp0.shape[0]
    for i in range(hi - lo):
        b = lo + i
        if silent[b]:
            for k in range(K):
                DZ[i, k] = 0.0
            continue
        g = batch[b]
        if objective == PG:
            for k in range(K):
                pi[k] = pis[b, k]
                logp[k] = logp_old[b, k]
        else:
            _softmax_row(Z, i, logp, pi)
        logit_gradient_row(counts, b, nis[b], correct[g], a_c[b], a_w[b], pi, logp, logp_old, logp0,
                           g if g < d else 0, objective, clip, kl, ent, DZ, i)
        for k in range(K):
            DZ[i, k] = -DZ[i, k] * inv  # descent gradient of the batch loss


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _private_grads(batch, keep, silent, lo, hi, tag, stamp, PG_, pgrad, touched):
    """Sum the private-row gradients PG_[:hi - lo] (K,) of the kept slots lo..hi-1 into pgrad (d, K) by
    problem; a problem's row is zeroed and listed in touched at its first slot of this update (stamp[g] ==
    tag after). Returns the number of touched rows."""
    K = pgrad.shape[1]
    n_touched = 0
    for i in range(hi - lo):
        b = lo + i
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
    return n_touched


@njit(cache=True, nogil=True, error_model="numpy")
def train_kernel(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, theta0, m1, m2, pw, row_t,
                 stamp, perm, st, acc, hp, ip, rs, moved, hist, m_end):
    """GRPO steps from st[ST_STEP] in place on theta and the optimiser state; returns a status code.

    Fixed n (hist None, or the allocator A_FIXED): steps up to m_end. An allocator (ip[IP_ALLOC], plain PG
    without n_est, SimConfig checks it): steps until acc[AC_ROLL] reaches m_end * bp * n rollouts (the fixed
    path's compute at step m_end) or the budget hp[HP_BUDGET] leaves no room for a step; every drawn rollout
    counts. A step draws rounds of bp candidate problems (several only under dynamic sampling, which keeps the
    groups with signal) with n_i rollouts each; the slots (kept groups) then get ppo_epochs * minibatches
    updates (one for pg, which reuses the rollouts' forward pass) with each group's own n_i.
    hist (d + 1, allocators.N_HIST): the per-problem history the allocators read, None for a fixed run.
    pw: running powers (beta1^t, beta2^t) per private row (d, 2) and for the shared block (row d).
    moved (d + 1,) bool: whether private row g (row d: the shared block) has ever had a nonzero gradient.
    """
    K = logp0.shape[1]
    n, bp, n_est, opt, objective = ip[IP_N], ip[IP_BP], ip[IP_NEST], ip[IP_OPT], ip[IP_OBJ]
    n_mb = 1 if objective == PG else ip[IP_MB]
    n_updates = 1 if objective == PG else ip[IP_EPOCHS] * n_mb
    zvf, sample_std, has_len = ip[IP_ZVF] != 0, ip[IP_SAMPLE_STD] != 0, ip[IP_LENS] != 0
    lr, b1, b2, eps, clip = hp[HP_LR], hp[HP_B1], hp[HP_B2], hp[HP_EPS], hp[HP_CLIP]
    kl, ent = hp[HP_KL], hp[HP_ENT]
    wd = hp[HP_WD] if opt != ADAM else 0.0
    budget = hp[HP_BUDGET]
    tiny = hp[HP_TINY] if hp.shape[0] > HP_TINY else TINY
    par = hp[HP_A0: HP_A0 + N_PARAMS]
    alloc = A_FIXED if hist is None else ip[IP_ALLOC]
    pc = alloc == A_PILOT
    dyn = alloc == A_DYNAMIC or pc  # candidates are not the slots: rounds fill them
    ema = par[4] if alloc == A_KNAPSACK or alloc == A_VARIANCE or alloc == A_GVM else 1.0
    ada_rounds = int(par[0]) if alloc == A_ADA else 1
    quiet = kl == 0.0 and ent == 0.0  # then zero advantages give an exactly zero logit gradient
    need_logp = objective != PG or not quiet  # log pi enters only the PPO / CISPO ratio and KL / entropy
    need_rest = n_est > 0 or has_len or alloc == A_ADA or pc  # the wrong answers' counts matter
    forward = objective != PG or dyn  # an update's own forward pass (else the rollouts')
    B0 = bp * n
    target = float(m_end) * B0
    # slots (bp,): the groups an update trains on; candidates: the problems of a round, the slots themselves
    # unless dynamic sampling gathers the slots over rounds
    batch, nis, cs = np.empty(bp, dtype=np.int64), np.empty(bp, dtype=np.int64), np.empty(bp, dtype=np.int64)
    counts = np.empty((bp, K), dtype=np.int64)
    Z, pis, logp_old = np.empty((bp, K)), np.empty((bp, K)), np.empty((bp, K))
    DZ, PG_ = np.empty((bp, K)), np.empty((bp, K))
    a_c, a_w = np.empty(bp), np.empty(bp)
    keep, silent = np.empty(bp, dtype=np.bool_), np.empty(bp, dtype=np.bool_)
    if dyn:
        cand, ccounts = np.empty(bp, dtype=np.int64), np.empty((bp, K), dtype=np.int64)
        cZ, cpis, clogp = np.empty((bp, K)), np.empty((bp, K)), np.empty((bp, K))
    else:
        cand, cZ, cpis, clogp, ccounts = batch, Z, pis, logp_old, counts
    cn, phat, wbuf = np.empty(bp, dtype=np.int64), np.empty(bp), np.empty(bp)
    work = np.zeros(work_size(kind, data[3], K, bp))
    pi, logp, tmp = np.empty(K), np.empty(K), np.empty((bp, K), dtype=np.int64)
    gshared = np.zeros(S)
    pflat = np.zeros(d * K if s_pr != 0.0 else K)  # private rows' gradients, flat for `step`
    pgrad = pflat.reshape((pflat.shape[0] // K, K))
    touched = np.empty(bp, dtype=np.int64)
    smx, smxe = np.empty(bp), np.empty(bp * K)

    while st[ST_STEP] < m_end if alloc == A_FIXED else acc[AC_ROLL] < target:
        t = st[ST_STEP]
        n_step = n
        if hist is not None and alloc != A_FIXED:
            n_step = step_group_size(alloc, n, bp, acc[AC_ROLL], budget, par, hist, d)
            if n_step == 0:
                break
        n_slots = drawn = rounds = tot_c = tot_n = zv_step = np.int64(0)  # not literals: one callee type
        while True:  # --- rounds of bp candidates: logits, group sizes n_i, rollouts, history, slots
            candidates(rs, perm, st, d, hist, alloc, par, cand)
            if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, cand, cZ, work):
                return BAD_LOGITS
            _softmax_rows(cZ, bp, cpis, clogp, need_logp, smx, smxe)
            group_sizes(alloc, par, hist, cand, cpis, correct, n_step, B0, phat, wbuf, cn)
            n_slots, drawn, tot_c, tot_n, zv_step = _rollouts(
                rs, cand, cn, cpis, ccounts, clogp, correct, lens, hist, t, ema, acc, budget, n_step, n_est,
                need_rest, has_len, ip[IP_SAMPLER], ada_rounds, zvf, dyn, pc, par, n, tmp, batch, counts, pis,
                logp_old, nis, cs, a_c, keep, n_slots, drawn, tot_c, tot_n, zv_step)
            rounds += 1
            if not dyn or n_slots >= bp or rounds >= int(par[0]) or acc[AC_ROLL] + drawn + B0 > budget:
                break
        acc[AC_ROLL] += drawn
        acc[AC_BREW] = tot_c / tot_n if tot_n > 0 else np.nan
        if hist is not None and alloc == A_SCHED_ZV:
            zv_schedule_update(hist[d], float(zv_step), float(rounds * bp), par[0], par[1], par[2], float(n))
        if n_slots > 0:
            _advantages(nis, cs, a_c, a_w, keep, silent, n_slots, tot_c, tot_n, n_est, ip[IP_SCALE],
                        sample_std, hp[HP_ADV_EPS], quiet)
        for u in range(n_updates if n_slots > 0 else 0):  # --- updates: minibatches of the slots, in epochs
            mb = u % n_mb
            lo, hi = (mb * n_slots) // n_mb, ((mb + 1) * n_slots) // n_mb
            nb = hi - lo
            n_keep, n_loud = _minibatch(keep, silent, lo, hi)
            if n_keep == 0:
                continue
            idx = batch[lo:hi]
            if forward and n_loud > 0:  # PPO / CISPO: theta moved since the rollouts; slots from rounds
                if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, Z[:nb], work):
                    return BAD_LOGITS
            _logit_grads(batch, counts, nis, Z, pis, logp_old, a_c, a_w, silent, lo, hi, correct, logp0,
                         objective, clip, kl, ent, 1.0 / n_keep, pi, logp, DZ)
            for j in range(S):
                gshared[j] = 0.0
            if n_loud > 0:  # else `work` holds the rollouts' forward pass
                batch_backward(kind, theta, data, S, s_sh, s_pr, d, idx, DZ[:nb], gshared, PG_[:nb], work)
            n_touched = 0
            if s_pr != 0.0:
                tag = t * n_updates + u + 1  # this update's stamp of a touched row
                n_touched = _private_grads(batch, keep, silent, lo, hi, tag, stamp, PG_, pgrad, touched)
            gn = grad_norm(gshared, pgrad, touched, n_touched, tiny)
            if not np.isfinite(gn):
                return BAD_GRAD
            acc[AC_GNORM] += np.sqrt(gn)
            acc[AC_UPDATES] += 1.0
            step(theta, theta0, m1, m2, pw, row_t, moved, st, gshared, pflat, K, touched, n_touched, opt, lr,
                 b1, b2, eps, wd, tiny)
        st[ST_STEP] += 1
    return OK
