"""A training draw of the kv sampler as one compiled call: prefill and every decoding step in Numba.

Why: a training draw at bp 16 is 64 to 1,024 rows of a 0.2M-parameter model, so eager torch spends most of
it in the fixed cost of ~130 ops per decoding step (dispatch, allocation, Python), not in arithmetic. Here the
whole draw (embedding, RMSNorm, rotary, attention over the cache, SiLU-gated MLP, the head and the Gumbel-max
draw of each step) is one `decode` call compiled by Numba, and every matmul is MKL's `sgemm_`, the routine
torch's `mm`/`addmm` call on the CPU, reached through ctypes in the library torch already loaded (so the
matmuls are torch's floats, and their threads torch's setting). What differs from the torch path
(llm_backend/tiny/sampler.py) is the order of a few float32 sums: RMSNorm's mean of squares, the attention's
softmax and weighted sum (SDPA's or batched matmuls' order there), the log-softmax; and exp (SiLU, softmax)
is the C library's, not torch's vectorised one. A row's log-probs so move by round-off (~1e-7 relative) and a
near-tied draw can flip: tests/llm_backend/test_tiny_kernel.py bounds both against the torch path and a
whole run against the torch path's run.

No fast-math: with Numba's fastmath flags (reassociation, fused multiply-adds) the floats of `decode`
differed between the process that compiled it and one that loaded it from Numba's cache (the same seed, other
bits: the vectoriser's choices are not fixed by the source), so every loop here keeps IEEE order and the
kernel is the same bits in every process on a machine (tests/llm_backend/test_tiny_kernel.py). The loops that
vectorise without reordering (exp, SiLU, rotary, the attention's weighted sum) still do, and the sums that
cannot vectorise run side by side (ROWS rows' RMSNorm, SLOTS slots' attention scores), each in its own
order. Every function compiles with NumPy's error model: a float division by zero gives inf rather than
Python's ZeroDivisionError, whose check kept the divisions scalar (no divisor here can be zero: 1 + exp(-x),
a softmax's total >= 1, a root of eps > 0 plus squares).

Layouts: every matrix is C-contiguous float32 with torch's Linear shape (out, in); `_linear` computes
out = beta * out + x @ w^T as torch's `mm(x, w.t())` does (one sgemm, w transposed), beta = 1 adding an
output projection into the residual in place, as `addmm`. Values are cached per layer as (B, KVH, S, hd),
keys transposed as (B, KVH, hd, S rounded up to SLOTS) so that a block of slots' scores reads contiguous keys;
a prompt's slots are written once, in its first row, and read from there by all its n rows (no copies), and
only positions already written are used.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from llvmlite import binding as llvm
from numba import njit, types

from isocompute.contract.cache import invalidate_stale_numba

# train_kernel.py inlines this module's jitted helpers: a cache keyed on one file goes stale on an edit here
invalidate_stale_numba(Path(__file__).resolve().parent, "tiny-sources.sha1")

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals `held_interrupts` holds back: Ctrl-C and a polite kill."""


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM back while a compiled call runs; raise them again right after it.

    Why: Python runs a signal's handler at its next chance in the main thread, and a compiled call's return
    (boxing its arrays) is such a chance. A handler that raises there (KeyboardInterrupt, the command line's
    SIGTERM) leaves an exception set while Numba's dispatcher returns a result, and Python reports
    "SystemError: CPUDispatcher(...) returned a result with an exception set" in a long traceback. Here the
    handler only notes the signal; when the call is done the previous handlers come back and the first
    signal noted is raised again (signal.raise_signal), so it acts exactly as if it had arrived then: a
    call's length later (a decoding chunk or a microbatch: well under a second at the tiny sizes). Outside
    the main thread (where Python runs no handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in HELD_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if held:
            signal.raise_signal(held[0])


def call_compiled(dispatcher, *args):
    """`dispatcher(*args)` (a Numba function) with Ctrl-C and SIGTERM held back while its compiled code runs
    (`held_interrupts`). Compiling it for these argument types (a first call: seconds, or Numba's on-disk
    cache) happens before, outside the hold, so an interrupt never waits for the compiler."""
    dispatcher.compile(tuple(dispatcher.typeof_pyval(a) for a in args))
    with held_interrupts():
        return dispatcher(*args)


def _register_sgemm() -> None:
    """Make MKL's Fortran `sgemm_` in libtorch_cpu (the BLAS torch's CPU matmuls call) the symbol `_sgemm`
    links to: by name, so the compiled kernels can be cached on disk and linked again in the next process."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    llvm.add_symbol("sgemm_", ctypes.cast(lib.sgemm_, ctypes.c_void_p).value)


_register_sgemm()
_sgemm = types.ExternalFunction("sgemm_", types.void(*[types.voidptr] * 13))
"""sgemm_(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), every argument by reference (LP64:
32-bit integers)."""

@njit(cache=True, error_model="numpy")
def _linear(x, w, out, beta, work):
    """out = beta * out + x @ w^T for x (M, K), w (N, K), out (M, N), all C-contiguous float32; `work` an
    int32 (6,) and a float32 (2,) scratch pair holding sgemm's by-reference scalars."""
    ints, flts = work
    M, K = x.shape
    N = w.shape[0]
    ints[0], ints[1], ints[2], ints[3], ints[4], ints[5] = 84, 78, N, M, K, N  # 'T', 'N', N, M, K, ldc
    flts[0], flts[1] = 1.0, beta
    _sgemm(ints[0:].ctypes, ints[1:].ctypes, ints[2:].ctypes, ints[3:].ctypes, ints[4:].ctypes,
           flts[0:].ctypes, w.ctypes, ints[4:].ctypes, x.ctypes, ints[4:].ctypes, flts[1:].ctypes, out.ctypes,
           ints[5:].ctypes)


@njit(cache=True, error_model="numpy")
def _gemm(a, b, out, ta, tb, beta, work):
    """out = beta * out + op(a) @ op(b), op(m) = m^T where its flag (ta, tb) is set, for C-contiguous float32
    matrices: one sgemm on the column-major views (out^T = op(b)^T op(a)^T). `_linear` is the case ta False,
    tb True (the same call)."""
    ints, flts = work
    M = a.shape[1] if ta else a.shape[0]
    K = a.shape[0] if ta else a.shape[1]
    N = b.shape[0] if tb else b.shape[1]
    ints[0], ints[1] = 84 if tb else 78, 84 if ta else 78  # 'T' / 'N'
    ints[2], ints[3], ints[4], ints[5] = N, M, K, N
    ints[6], ints[7] = b.shape[1], a.shape[1]  # leading dimensions of the row-major operands
    flts[0], flts[1] = 1.0, beta
    _sgemm(ints[0:].ctypes, ints[1:].ctypes, ints[2:].ctypes, ints[3:].ctypes, ints[4:].ctypes,
           flts[0:].ctypes, b.ctypes, ints[6:].ctypes, a.ctypes, ints[7:].ctypes, flts[1:].ctypes, out.ctypes,
           ints[5:].ctypes)


ALIGN = 64
"""Byte alignment of every matrix the kernel hands to sgemm (torch's allocator's): MKL's results can depend
on the alignment of its operands, and Numba aligns new arrays to 32 bytes only, so a buffer that happened to
be 64-byte aligned in one process and not in the next would round otherwise (same seed, different bits)."""


@njit(cache=True, error_model="numpy")
def _matrix(rows, cols):
    """An uninitialised (rows, cols) float32 matrix whose first element is ALIGN-byte aligned."""
    pad = ALIGN // 4
    buf = np.empty(rows * cols + pad, np.float32)
    off = ((ALIGN - buf.ctypes.data % ALIGN) % ALIGN) // 4
    return buf[off:off + rows * cols].reshape((rows, cols))


@njit(cache=True, error_model="numpy")
def _exp(a, bits):
    """a <- exp(a) in place over a 1-D float32 array (bits: an int32 scratch at least as long). Cephes' expf
    (range reduction by ln 2, a degree-6 polynomial, 2^k built in the exponent bits), written so that the
    loops vectorise (elementwise, in IEEE order): within 1.2e-7 relative of exp for arguments in [-87, 88]
    (the C library's expf is scalar, ~10x slower here, and torch's exp is within 6e-8); arguments are clamped
    to that range."""
    n = a.shape[0]
    for j in range(n):
        x = min(max(a[j], np.float32(-87.0)), np.float32(88.0))
        k = np.floor(x * np.float32(1.44269504088896341) + np.float32(0.5))
        r = x - k * np.float32(0.693359375) + k * np.float32(2.12194440e-4)
        y = np.float32(1.9875691500e-4)
        y = y * r + np.float32(1.3981999507e-3)
        y = y * r + np.float32(8.3334519073e-3)
        y = y * r + np.float32(4.1665795894e-2)
        y = y * r + np.float32(1.6666665459e-1)
        y = y * r + np.float32(5.0000001201e-1)
        a[j] = y * r * r + r + np.float32(1.0)
        bits[j] = (np.int32(k) + np.int32(127)) << 23
    scale = bits[:n].view(np.float32)
    for j in range(n):
        a[j] *= scale[j]


ROWS = 8
"""Rows whose sums `_rms_norm` carries side by side: each row's sum keeps its sequential order (the same
floats as one row at a time) while the ROWS independent chains fill the adder that one chain leaves waiting
on its latency (a reduction cannot vectorise in IEEE order)."""


@njit(cache=True, error_model="numpy")
def _rms_norm(x, w, eps, out):
    """RMSNorm of each row of x (float32 throughout, as F.rms_norm on float32)."""
    R, D = x.shape
    inv_d = np.float32(1.0) / np.float32(D)
    s = np.empty(ROWS, np.float32)
    for r0 in range(0, R, ROWS):
        nr = min(ROWS, R - r0)
        s[:] = 0.0
        for j in range(D):
            for i in range(nr):
                s[i] += x[r0 + i, j] * x[r0 + i, j]
        for i in range(nr):
            k = np.float32(1.0) / np.sqrt(s[i] * inv_d + eps)
            for j in range(D):
                out[r0 + i, j] = (x[r0 + i, j] * k) * w[j]


@njit(cache=True, error_model="numpy")
def _rotate(qkv, pos, nrot, hd, cos, sin):
    """The first nrot heads of each row r of qkv (query and key heads) <- v * cos + roll(v, hd / 2) * sin at
    position pos[r], in place (model.rotate; sin signed)."""
    half = hd // 2
    for r in range(qkv.shape[0]):
        c, s = cos[pos[r]], sin[pos[r]]
        for hh in range(nrot):
            lo, hi = qkv[r, hh * hd:hh * hd + half], qkv[r, hh * hd + half:(hh + 1) * hd]
            for j in range(half):  # 1-D row views: the loop vectorises (2-D indexing kept it scalar)
                a, b = lo[j], hi[j]
                lo[j] = a * c[j] + b * s[j]
                hi[j] = b * c[half + j] + a * s[half + j]


SLOTS = 8
"""Key slots whose scores `_scores` computes side by side; the transposed key cache's slot axis is padded to
a multiple of it so that a block never reads past a row."""


@njit(cache=True, error_model="numpy")
def _scores(q, kt, s0, lo, hi, scale, out):
    """out[s] = scale * (q . k_s) for the slots s of s0..s0 + SLOTS - 1 within lo..hi - 1, kt: (hd, S) one
    cache row's keys transposed. Each dot product is summed in order j = 0, 1, ... (the floats of a loop over
    j alone); the SLOTS sums side by side are independent, so they fill the adder where one sum waits on its
    latency (they stay scalar: LLVM finds no store in the loop to vectorise from). The eight accumulators are
    written out: SLOTS must stay 8. Slots of the block outside lo..hi are computed from whatever the cache
    holds there and not written."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for j in range(q.shape[0]):
        k = kt[j, s0:s0 + SLOTS]
        qj = q[j]
        a0 += qj * k[0]
        a1 += qj * k[1]
        a2 += qj * k[2]
        a3 += qj * k[3]
        a4 += qj * k[4]
        a5 += qj * k[5]
        a6 += qj * k[6]
        a7 += qj * k[7]
    acc = (a0, a1, a2, a3, a4, a5, a6, a7)
    for i in range(SLOTS):
        s = s0 + i
        if lo <= s < hi:
            out[s] = acc[i] * scale


@njit(cache=True, error_model="numpy")
def _attention(qkv, kc, vc, crow, prow, split, lo, hi, heads, kv_heads, hd, scale, out, sc, bits):
    """Each query row r of qkv, head hh: out[r, hh * hd:(hh + 1) * hd] = the softmax(scale * q . k_s)-weighted
    sum of v_s over the key slots lo[r]..hi[r] - 1, read from cache row prow[r] below slot `split` (the
    prompt's, written once by the prefill for all its rows) and from crow[r] from it on (kc: (rows, KVH, hd,
    S'), vc: (rows, KVH, S, hd), the query head's kv head). The scores of all rows and heads are laid out side
    by side in sc (width max(hi)) so that one `_exp` call covers them; slots outside a row's range are never
    used."""
    R = qkv.shape[0]
    rep = heads // kv_heads
    W = 0
    for r in range(R):
        W = max(W, hi[r])
    for r in range(R):
        a, b = lo[r], hi[r]
        for hh in range(heads):
            g = hh // rep
            base = (r * heads + hh) * W
            q = qkv[r, hh * hd:(hh + 1) * hd]
            row = sc[base:base + W]
            for s0 in range(a - a % SLOTS, min(b, split), SLOTS):
                _scores(q, kc[prow[r], g], s0, a, min(b, split), scale, row)
            for s0 in range(max(a, split) - max(a, split) % SLOTS, b, SLOTS):
                _scores(q, kc[crow[r], g], s0, max(a, split), b, scale, row)
            m = np.float32(-np.inf)
            for s in range(a, b):
                m = max(m, row[s])
            for s in range(a, b):
                row[s] -= m
    _exp(sc[:R * heads * W], bits)
    for r in range(R):
        for hh in range(heads):
            g = hh // rep
            row = sc[(r * heads + hh) * W:(r * heads + hh + 1) * W]
            tot = np.float32(0.0)
            for s in range(lo[r], hi[r]):
                tot += row[s]
            o = out[r, hh * hd:(hh + 1) * hd]
            o[:] = 0.0
            for s in range(lo[r], hi[r]):
                p = row[s] / tot
                v = vc[prow[r] if s < split else crow[r], g, s]
                for j in range(hd):
                    o[j] += p * v[j]


@njit(cache=True, error_model="numpy")
def _mlp(x, h, gu, act, ln2, wgu, wd, eps, work, bits):
    """x += down(silu(gate(norm(x))) * up(norm(x))) in place (the layer's second half)."""
    _rms_norm(x, ln2, eps, h)
    _linear(h, wgu, gu, np.float32(0.0), work)
    rows, inter = act.shape
    for r in range(rows):
        a, g = act[r], gu[r]
        for j in range(inter):
            a[j] = -g[j]
    _exp(act.reshape(-1), bits)
    for r in range(rows):  # row views: 1-D contiguous loops vectorise (2-D indexing kept these scalar)
        a, g, u = act[r], gu[r, :inter], gu[r, inter:]
        for j in range(inter):
            a[j] = (g[j] / (np.float32(1.0) + a[j])) * u[j]
    _linear(act, wd, x, np.float32(1.0), work)


@njit(cache=True, error_model="numpy")
def _layer(x, h, qkv, o, gu, act, pos, crow, prow, split, lo, hi, slot, kc, vc, ln1, wqkv, wo, ln2, wgu, wd,
           heads, kv_heads, eps, cos, sin, scale, work, sc, bits):
    """One decoder layer over the rows of x in place: attention (rows' keys and values written first into
    cache slot slot[r] of cache row crow[r], -1: not written) then the MLP."""
    hd = cos.shape[1]
    qd, kd = heads * hd, kv_heads * hd
    _rms_norm(x, ln1, eps, h)
    _linear(h, wqkv, qkv, np.float32(0.0), work)
    _rotate(qkv, pos, heads + kv_heads, hd, cos, sin)
    for r in range(x.shape[0]):
        t = slot[r]
        if t >= 0:
            c = crow[r]
            for g in range(kv_heads):
                for j in range(hd):
                    kc[c, g, j, t] = qkv[r, qd + g * hd + j]
                    vc[c, g, t, j] = qkv[r, qd + kd + g * hd + j]
    _attention(qkv, kc, vc, crow, prow, split, lo, hi, heads, kv_heads, hd, scale, o, sc, bits)
    _linear(o, wo, x, np.float32(1.0), work)
    _mlp(x, h, gu, act, ln2, wgu, wd, eps, work, bits)


@njit(cache=True, error_model="numpy")
def decode(emb, ln1, wqkv, wo, ln2, wgu, wd, norm_w, ids, pad, n, T, G, g0, temperature, eos, heads, kv_heads,
           eps, cos, sin, toks, lps, compact):
    """Prefill the c prompts `ids` (c, P) (left padding `pad` (c,)) once, then draw n completions of each, T
    tokens at most, all c * n rows in one batch; row b's draw at step t reads the Gumbel noise G[t, g0 + b]
    (temperature <= 0: greedy, G unread). temperature and eps are float32 scalars (the torch path's float32
    arithmetic). Writes token ids and log-probs into toks / lps (c * n, T) and returns the steps taken (all
    rows stop once every row has drawn `eos`). compact: from each step on, decode only the rows that have not
    drawn `eos` (their tokens after it are `eos`, log-prob 0): a row's floats then differ from the full
    batch's only by the round-off of matmuls over fewer rows (MKL picks kernels by the row count), as the
    torch path's compaction; without it every row is computed to the end, as the torch path's training draws.
    Weights: emb (V, D) (the tied head), per layer stacked ln1 /
    ln2 (layers, D), wqkv (layers, (H + 2 KVH) hd, D), wo (layers, D, H hd), wgu (layers, 2 I, D), wd
    (layers, D, I); cos / sin (positions, hd) the signed rotary tables."""
    c, P = ids.shape
    B = c * n
    layers, D = ln1.shape
    V = emb.shape[0]
    hd = cos.shape[1]
    qd = heads * hd
    nqkv = qd + 2 * kv_heads * hd
    S = P + T
    R = max(c * P, B)
    scale = np.float32(1.0) / np.float32(np.sqrt(np.float32(hd)))
    work = (np.empty(6, np.int32), np.empty(2, np.float32))
    kcache = np.empty((layers, B, kv_heads, hd, S + (-S) % SLOTS), np.float32)  # keys transposed (_scores)
    vcache = np.empty((layers, B, kv_heads, S, hd), np.float32)
    sc = np.empty(R * heads * S, np.float32)
    bits = np.empty(R * max(wd.shape[2], heads * S, V), np.int32)
    xb = _matrix(R, D)
    hb = _matrix(R, D)
    qkvb = _matrix(R, nqkv)
    ob = _matrix(R, qd)
    gub = _matrix(R, wgu.shape[1])
    actb = _matrix(R, wd.shape[2])
    pos = np.empty(R, np.int64)
    crow = np.empty(R, np.int64)
    prow = np.empty(R, np.int64)
    lo = np.empty(R, np.int64)
    hi = np.empty(R, np.int64)
    slot = np.empty(R, np.int64)

    # prefill: the c * P prompt rows once, as cache row i * n (prompt i's first row), whose slots below P
    # all n rows of prompt i read (prow); a padding query attends to itself only
    Rp = c * P
    x = xb[:Rp]
    for i in range(c):
        for p in range(P):
            r = i * P + p
            x[r] = emb[ids[i, p]]
            pos[r] = max(p - pad[i], 0)
            crow[r], prow[r], slot[r], hi[r] = i * n, i * n, p, p + 1
            lo[r] = p if p < pad[i] else pad[i]
    for layer in range(layers):
        _layer(x, hb[:Rp], qkvb[:Rp], ob[:Rp], gub[:Rp], actb[:Rp], pos, crow, prow, P, lo, hi, slot,
               kcache[layer], vcache[layer], ln1[layer], wqkv[layer], wo[layer], ln2[layer], wgu[layer],
               wd[layer], heads, kv_heads, eps, cos, sin, scale, work, sc, bits)
    last = _matrix(c, D)
    for i in range(c):
        last[i] = x[i * P + P - 1]
    _rms_norm(last, norm_w, eps, hb[:c])
    lc = _matrix(c, V)
    _linear(hb[:c], emb, lc, np.float32(0.0), work)
    logits = _matrix(B, V)
    for b in range(B):
        logits[b] = lc[b // n]

    rows = np.arange(B)  # the rows still decoding (compact) or all rows, in batch order
    na = B
    done = np.zeros(B, np.bool_)
    scaled = temperature > 0 and temperature != 1
    z = np.empty((B, V), np.float32)
    e = np.empty((B, V), np.float32)
    for t in range(T):
        # log_softmax(logits / temperature) of every row, then each row's Gumbel-max draw
        for k in range(na):
            m = np.float32(-np.inf)
            for v in range(V):
                zv = logits[k, v]
                if scaled:  # x / 1 is x: no division at the default temperature (as the torch path)
                    zv = zv / temperature
                z[k, v] = zv
                m = max(m, zv)
            for v in range(V):
                z[k, v] -= m
                e[k, v] = z[k, v]
        _exp(e[:na].reshape(-1), bits)
        for b in range(B):  # rows no longer decoding: EOS, log-prob 0
            toks[b, t], lps[b, t] = eos, 0.0
        for k in range(na):
            b = rows[k]
            tot = np.float32(0.0)
            for v in range(V):
                tot += e[k, v]
            lse = np.log(tot)
            best, arg = np.float32(-np.inf), 0
            for v in range(V):
                lp = z[k, v] - lse
                z[k, v] = lp
                key = lp if temperature <= 0 else lp - G[t, g0 + b, v]
                if key > best:
                    best, arg = key, v
            toks[b, t] = arg
            lps[b, t] = z[k, arg]
            if arg == eos:
                done[b] = True
        live = 0
        for b in range(B):
            if not done[b]:
                live += 1
        if t == T - 1 or live == 0:
            return t + 1
        if compact:
            na = 0
            for b in range(B):
                if not done[b]:
                    rows[na] = b
                    na += 1
        for k in range(na):
            b = rows[k]
            xb[k] = emb[toks[b, t]]
            pos[k], crow[k], prow[k], lo[k] = P - pad[b // n] + t, b, b - b % n, pad[b // n]
            slot[k], hi[k] = P + t, P + t + 1
        x, h = xb[:na], hb[:na]
        for layer in range(layers):
            _layer(x, h, qkvb[:na], ob[:na], gub[:na], actb[:na], pos, crow, prow, P, lo, hi, slot,
                   kcache[layer], vcache[layer], ln1[layer], wqkv[layer], wo[layer], ln2[layer], wgu[layer],
                   wd[layer], heads, kv_heads, eps, cos, sin, scale, work, sc, bits)
        _rms_norm(x, norm_w, eps, h)
        _linear(h, emb, logits[:na], np.float32(0.0), work)
    return T
