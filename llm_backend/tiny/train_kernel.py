"""The packed training layout's forward and backward on a tiny LM as two compiled calls (Numba).

Why: at bp 16 and n = 4 a training step is one microbatch of ~250 tokens, and the eager torch forward and its
autograd backward issue ~1,000 torch ops a step (tests/llm_backend/test_tiny_speed.py counts them), whose
fixed cost is most of the step: their matmuls are a few milliseconds of it. Here the whole body (embedding,
RMSNorm, rotary, the tree attention of llm_backend/packed.py, the SiLU-gated MLP, the final norm, the tied
head, the float32 log-softmax and entropy at the positions that predict completion tokens) is `forward`, which
keeps what the backward needs, and `backward` takes the gradients of those log-probs and entropies (from the
GRPO loss, llm_backend/loss.py, which stays torch) back to every parameter. `PackedForward` is the autograd
function around the two, so `trainer.backward` runs unchanged: `loss.backward()` calls `backward` once per
microbatch and autograd accumulates its gradients into the parameters' `.grad`.

What differs from the torch path (`packed.micro_logprobs` on `TinyLM`) is the order of some float32 sums, as
in the compiled decoder (llm_backend/tiny/kernel.py, whose sgemm binding, exp and aligned matrices this
reuses): the projections of q, k and v run as one matmul (the decoder's fused W_qkv), and gate and up as one;
RMSNorm's, the softmax's and the log-softmax's sums and their backward sums run in row order; exp is the
kernel's. Log-probs so move by round-off (up to ~1e-5 at unlikely tokens) and each parameter's gradient by
~1e-5 of its largest entry: tests/llm_backend/test_tiny_train_kernel.py bounds both against the torch path and
checks the gradient against finite differences. No fast-math (the same bits in every process: kernel.py says
why).

Only the real tokens of the packed rows are computed (no padding), and each query attends to its keys as at
most two runs of the flattened tokens (its group's prompt, then its own completion's tokens): `plan` reads
them from the microbatch's tree mask, and a mask of any other shape falls back to the torch path.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

from llm_backend.tiny import weights
from llm_backend.tiny.kernel import ALIGN, _exp, _gemm, _matrix, _rotate, call_compiled


@njit(cache=True, error_model="numpy")
def _stack(n, rows, cols):
    """n uninitialised (rows, cols) float32 matrices, each ALIGN-byte aligned when cols * 4 is a multiple of
    ALIGN (`plan` checks every width)."""
    return _matrix(n * rows, cols).reshape((n, rows, cols))


@njit(cache=True, error_model="numpy")
def _norm_fwd(x, w, eps, out, k):
    """out = RMSNorm(x) * w per row (kernel._rms_norm's floats), k[r] = its 1 / sqrt(mean(x_r^2) + eps)."""
    R, D = x.shape
    inv_d = np.float32(1.0) / np.float32(D)
    for r in range(R):
        xr, o = x[r], out[r]
        s = np.float32(0.0)
        for j in range(D):
            s += xr[j] * xr[j]
        kr = np.float32(1.0) / np.sqrt(s * inv_d + eps)
        k[r] = kr
        for j in range(D):
            o[j] = (xr[j] * kr) * w[j]


@njit(cache=True, error_model="numpy")
def _norm_bwd(x, w, k, dy, dx, dw):
    """dx += the input gradient of y = (x * k) * w for output gradient dy, dw += its weight gradient:
    dx_i = k w_i dy_i - x_i k^3 / D * sum_j dy_j w_j x_j, dw_j = sum_r dy_rj x_rj k_r."""
    R, D = x.shape
    inv_d = np.float32(1.0) / np.float32(D)
    for r in range(R):
        xr, g, d = x[r], dy[r], dx[r]
        kr = k[r]
        c = np.float32(0.0)
        for j in range(D):
            c += (g[j] * w[j]) * xr[j]
        for j in range(D):
            dw[j] += g[j] * (xr[j] * kr)
        c = c * (kr * kr * kr) * inv_d
        for j in range(D):
            d[j] += kr * (g[j] * w[j]) - xr[j] * c


@njit(cache=True, error_model="numpy")
def _unrotate(d, pos, nrot, hd, cos, sin):
    """The first nrot heads of each row of d <- the gradient of kernel._rotate's input from its output's,
    in place: dx_j = dy_j cos_j + dy_(j+h) sin_(j+h), dx_(j+h) = dy_(j+h) cos_(j+h) + dy_j sin_j."""
    half = hd // 2
    for r in range(d.shape[0]):
        c, s = cos[pos[r]], sin[pos[r]]
        for hh in range(nrot):
            lo, hi = d[r, hh * hd:hh * hd + half], d[r, hh * hd + half:(hh + 1) * hd]
            for j in range(half):  # 1-D row views: the loop vectorises
                a, b = lo[j], hi[j]
                lo[j] = a * c[j] + b * s[half + j]
                hi[j] = b * c[half + j] + a * s[j]


@njit(cache=True, error_model="numpy")
def _dot(x, y):
    """x . y over two 1-D float32 arrays of one length, summed in order (the dot products of a query's keys
    are independent: the processor overlaps their chains)."""
    s = np.float32(0.0)
    for e in range(x.shape[0]):
        s += x[e] * y[e]
    return s


@njit(cache=True, error_model="numpy")
def _keys(spans, i, n):
    """Token i's n-th key (flat index) over its runs spans[i] = (lo1, hi1, lo2, hi2)."""
    first = spans[i, 1] - spans[i, 0]
    return spans[i, 0] + n if n < first else spans[i, 2] + n - first


@njit(cache=True, error_model="numpy")
def _attn_fwd(qkv, spans, off, heads, kv_heads, hd, scale, out, p, bits):
    """out[i, head] = softmax(scale * q_i . k_j) over token i's keys j, times v_j; p (off[-1] * heads) keeps
    each (token, head)'s probabilities at (off[i] * heads + head * keys_i ..)."""
    N = qkv.shape[0]
    rep = heads // kv_heads
    qd, kd = heads * hd, kv_heads * hd
    for i in range(N):
        nk = off[i + 1] - off[i]
        for hh in range(heads):
            kb = qd + (hh // rep) * hd
            base = off[i] * heads + hh * nk
            q = qkv[i, hh * hd:(hh + 1) * hd]
            m = np.float32(-np.inf)
            for n in range(nk):
                j = _keys(spans, i, n)
                s = _dot(q, qkv[j, kb:kb + hd]) * scale
                p[base + n] = s
                m = max(m, s)
            for n in range(nk):
                p[base + n] -= m
    _exp(p, bits)
    for i in range(N):
        nk = off[i + 1] - off[i]
        for hh in range(heads):
            vb = qd + kd + (hh // rep) * hd
            base = off[i] * heads + hh * nk
            tot = np.float32(0.0)
            for n in range(nk):
                tot += p[base + n]
            o = out[i, hh * hd:(hh + 1) * hd]
            o[:] = 0.0
            for n in range(nk):
                pn = p[base + n] / tot
                p[base + n] = pn
                j = _keys(spans, i, n)
                v = qkv[j, vb:vb + hd]
                for e in range(hd):
                    o[e] += pn * v[e]


@njit(cache=True, error_model="numpy")
def _attn_bwd(qkv, spans, off, heads, kv_heads, hd, scale, p, do, dqkv, dp):
    """dqkv += the gradient of `_attn_fwd`'s q, k and v (rotated) from its output's, do: with dp_j = do . v_j
    and ds_j = p_j (dp_j - sum_l p_l dp_l), dq_i = scale sum_j ds_j k_j, dk_j += scale ds_j q_i,
    dv_j += p_j do_i."""
    N = qkv.shape[0]
    rep = heads // kv_heads
    qd, kd = heads * hd, kv_heads * hd
    for i in range(N):
        nk = off[i + 1] - off[i]
        for hh in range(heads):
            g = hh // rep
            kb, vb = qd + g * hd, qd + kd + g * hd
            base = off[i] * heads + hh * nk
            lo, hi = hh * hd, (hh + 1) * hd
            q, dq, doi = qkv[i, lo:hi], dqkv[i, lo:hi], do[i, lo:hi]
            c = np.float32(0.0)
            for n in range(nk):
                j = _keys(spans, i, n)
                s = _dot(doi, qkv[j, vb:vb + hd])
                dp[n] = s
                c += p[base + n] * s
            for n in range(nk):
                j = _keys(spans, i, n)
                pn = p[base + n]
                ds = (pn * (dp[n] - c)) * scale
                k, dk, dv = qkv[j, kb:kb + hd], dqkv[j, kb:kb + hd], dqkv[j, vb:vb + hd]
                for e in range(hd):  # 1-D row views, one loop each: they vectorise (2-D indexing did not)
                    dq[e] += ds * k[e]
                for e in range(hd):
                    dk[e] += ds * q[e]
                for e in range(hd):
                    dv[e] += pn * doi[e]


@njit(cache=True, error_model="numpy")
def forward(emb, ln1, wqkv, wo, ln2, wgu, wd, norm_w, ids, pos, spans, src, tgt, temperature, heads,
            kv_heads, eps, cos, sin):
    """The log-probs lp (N_t,) of targets tgt under logits / temperature at the hidden states of flat tokens
    src, and the entropies ent (N_t,) there, for the N flat tokens ids / pos whose keys are spans (N, 4)
    (`plan`); weights as kernel.decode reads them. Returns (lp, ent, saved), saved what `backward` reads."""
    N = ids.shape[0]
    layers, D = ln1.shape
    V = emb.shape[0]
    hd = cos.shape[1]
    qd, kd = heads * hd, kv_heads * hd
    nqkv = qd + 2 * kd
    inter = wd.shape[2]
    Nt = src.shape[0]
    scale = np.float32(1.0) / np.float32(np.sqrt(np.float32(hd)))
    work = (np.empty(8, np.int32), np.empty(2, np.float32))
    off = np.empty(N + 1, np.int64)
    off[0] = 0
    for i in range(N):
        off[i + 1] = off[i] + (spans[i, 1] - spans[i, 0]) + (spans[i, 3] - spans[i, 2])
    bits = np.empty(max(off[N] * heads, N * inter, Nt * V), np.int32)
    X = _stack(layers + 1, N, D)  # each layer's input; X[layers] the last layer's output
    H1, XM, H2 = _stack(layers, N, D), _stack(layers, N, D), _stack(layers, N, D)
    K1, K2 = np.empty((layers, N), np.float32), np.empty((layers, N), np.float32)
    QKV = _stack(layers, N, nqkv)
    O = _stack(layers, N, qd)
    PR = np.empty((layers, off[N] * heads), np.float32)
    GU = _stack(layers, N, 2 * inter)
    SG, SL, ACT = _stack(layers, N, inter), _stack(layers, N, inter), _stack(layers, N, inter)
    for i in range(N):
        X[0, i] = emb[ids[i]]
    for layer in range(layers):
        x, xm, h1, h2 = X[layer], XM[layer], H1[layer], H2[layer]
        qkv, gu, sg, sl, act = QKV[layer], GU[layer], SG[layer], SL[layer], ACT[layer]
        _norm_fwd(x, ln1[layer], eps, h1, K1[layer])
        _gemm(h1, wqkv[layer], qkv, False, True, np.float32(0.0), work)
        _rotate(qkv, pos, heads + kv_heads, hd, cos, sin)
        _attn_fwd(qkv, spans, off, heads, kv_heads, hd, scale, O[layer], PR[layer], bits)
        xm[:] = x
        _gemm(O[layer], wo[layer], xm, False, True, np.float32(1.0), work)
        _norm_fwd(xm, ln2[layer], eps, h2, K2[layer])
        _gemm(h2, wgu[layer], gu, False, True, np.float32(0.0), work)
        for r in range(N):
            a, g = sg[r], gu[r, :inter]
            for j in range(inter):
                a[j] = -g[j]
        _exp(sg.reshape(-1), bits)
        for r in range(N):  # sl <- silu(g), sg <- sigmoid(g), act <- silu(g) * up: 1-D row loops, each over
            a, b, c, g, u = sg[r], sl[r], act[r], gu[r, :inter], gu[r, inter:]  # few arrays, vectorise
            for j in range(inter):
                b[j] = g[j] / (np.float32(1.0) + a[j])
            for j in range(inter):
                a[j] = np.float32(1.0) / (np.float32(1.0) + a[j])
            for j in range(inter):
                c[j] = b[j] * u[j]
        y = X[layer + 1]
        y[:] = xm
        _gemm(act, wd[layer], y, False, True, np.float32(1.0), work)
    hn = _matrix(N, D)
    kf = np.empty(N, np.float32)
    _norm_fwd(X[layers], norm_w, eps, hn, kf)
    ht = _matrix(Nt, D)
    for t in range(Nt):
        ht[t] = hn[src[t]]
    lpa = _matrix(Nt, V)
    _gemm(ht, emb, lpa, False, True, np.float32(0.0), work)
    pa = _matrix(Nt, V)
    for t in range(Nt):  # lpa <- log_softmax(logits / temperature), pa <- its exp
        m = np.float32(-np.inf)
        for v in range(V):
            z = lpa[t, v]
            if temperature != 1:  # x / 1 is x: no division at the default temperature (as the torch path)
                z = z / temperature
            lpa[t, v] = z
            m = max(m, z)
        for v in range(V):
            lpa[t, v] -= m
            pa[t, v] = lpa[t, v]
    _exp(pa.reshape(-1), bits)
    lp = np.empty(Nt, np.float32)
    ent = np.empty(Nt, np.float32)
    for t in range(Nt):
        tot = np.float32(0.0)
        for v in range(V):
            tot += pa[t, v]
        lse = np.log(tot)
        for v in range(V):
            lpa[t, v] -= lse
            pa[t, v] = lpa[t, v]
    _exp(pa.reshape(-1), bits)
    for t in range(Nt):
        s = np.float32(0.0)
        for v in range(V):
            s += pa[t, v] * lpa[t, v]
        ent[t] = -s
        lp[t] = lpa[t, tgt[t]]
    saved = (X, H1, K1, QKV, O, PR, XM, H2, K2, GU, SG, SL, ACT, hn, kf, ht, lpa, pa, off)
    return lp, ent, saved


@njit(cache=True, error_model="numpy")
def backward(emb, ln1, wqkv, wo, ln2, wgu, wd, norm_w, ids, pos, spans, src, tgt, temperature, heads,
             kv_heads, cos, sin, saved, dlp, dent):
    """The gradients of sum(dlp * lp + dent * ent) (`forward`'s outputs) with respect to every weight:
    (emb (the embedding and the tied head), norm_w, ln1, wqkv, wo, ln2, wgu, wd), shaped as the weights."""
    X, H1, K1, QKV, O, PR, XM, H2, K2, GU, SG, SL, ACT, hn, kf, ht, lpa, pa, off = saved
    N = ids.shape[0]
    layers, D = ln1.shape
    V = emb.shape[0]
    hd = cos.shape[1]
    qd, kd = heads * hd, kv_heads * hd
    nqkv = qd + 2 * kd
    inter = wd.shape[2]
    Nt = src.shape[0]
    scale = np.float32(1.0) / np.float32(np.sqrt(np.float32(hd)))
    work = (np.empty(8, np.int32), np.empty(2, np.float32))
    # the head: g = d(sum)/d(log-probs) (the target's and the entropy's -p (1 + lp)), then log_softmax's
    # backward dz = g - p * sum(g), divided by the temperature
    dz = _matrix(Nt, V)
    for t in range(Nt):
        tot = np.float32(0.0)
        for v in range(V):
            g = -(pa[t, v] * (np.float32(1.0) + lpa[t, v])) * dent[t]
            if v == tgt[t]:
                g += dlp[t]
            dz[t, v] = g
            tot += g
        for v in range(V):
            dz[t, v] = dz[t, v] - pa[t, v] * tot
            if temperature != 1:
                dz[t, v] = dz[t, v] / temperature
    demb = _matrix(V, D)
    _gemm(dz, ht, demb, True, False, np.float32(0.0), work)
    dht = _matrix(Nt, D)
    _gemm(dz, emb, dht, False, False, np.float32(0.0), work)
    dh = _matrix(N, D)
    dh[:] = 0.0
    for t in range(Nt):
        dh[src[t]] += dht[t]
    dx = _matrix(N, D)
    dx[:] = 0.0
    dnorm = np.zeros(D, np.float32)
    _norm_bwd(X[layers], norm_w, kf, dh, dx, dnorm)
    dln1, dln2 = np.zeros((layers, D), np.float32), np.zeros((layers, D), np.float32)
    dwqkv, dwo = _stack(layers, nqkv, D), _stack(layers, D, qd)
    dwgu, dwd = _stack(layers, 2 * inter, D), _stack(layers, D, inter)
    dact = _matrix(N, inter)
    dgu = _matrix(N, 2 * inter)
    dxm = _matrix(N, D)
    do = _matrix(N, qd)
    dqkv = _matrix(N, nqkv)
    dp = np.empty(max(off[N], 1), np.float32)
    for layer in range(layers - 1, -1, -1):
        gu, sg, sl, act = GU[layer], SG[layer], SL[layer], ACT[layer]
        # MLP: X[layer + 1] = xm + act @ wd^T
        _gemm(dx, wd[layer], dact, False, False, np.float32(0.0), work)
        _gemm(dx, act, dwd[layer], True, False, np.float32(0.0), work)
        for r in range(N):
            a, s, b, g, u = dact[r], sg[r], sl[r], gu[r, :inter], gu[r, inter:]
            dg, du = dgu[r, :inter], dgu[r, inter:]
            for j in range(inter):
                du[j] = a[j] * b[j]
            for j in range(inter):
                dg[j] = (a[j] * u[j]) * (s[j] * (np.float32(1.0) + g[j] * (np.float32(1.0) - s[j])))
        _gemm(dgu, H2[layer], dwgu[layer], True, False, np.float32(0.0), work)
        dh2 = dh
        _gemm(dgu, wgu[layer], dh2, False, False, np.float32(0.0), work)
        dxm[:] = dx
        _norm_bwd(XM[layer], ln2[layer], K2[layer], dh2, dxm, dln2[layer])
        # attention: xm = x + o @ wo^T
        _gemm(dxm, wo[layer], do, False, False, np.float32(0.0), work)
        _gemm(dxm, O[layer], dwo[layer], True, False, np.float32(0.0), work)
        dqkv[:] = 0.0
        _attn_bwd(QKV[layer], spans, off, heads, kv_heads, hd, scale, PR[layer], do, dqkv, dp)
        _unrotate(dqkv, pos, heads + kv_heads, hd, cos, sin)
        _gemm(dqkv, H1[layer], dwqkv[layer], True, False, np.float32(0.0), work)
        dh1 = dh
        _gemm(dqkv, wqkv[layer], dh1, False, False, np.float32(0.0), work)
        dx[:] = dxm
        _norm_bwd(X[layer], ln1[layer], K1[layer], dh1, dx, dln1[layer])
    for i in range(N):
        demb[ids[i]] += dx[i]
    return demb, dnorm, dln1, dwqkv, dwo, dln2, dwgu, dwd


def plan(mb) -> dict | None:
    """The flat tokens of a packed microbatch (llm_backend/packed.Micro) as `forward` reads them, or None
    where its mask is not the layout's tree (a query's keys more than two runs): ids, pos (N,) of the rows'
    real tokens in row order, spans (N, 4) each token's keys as runs [lo1, hi1) and [lo2, hi2) of flat
    indices, src (N_t,) the flat token whose hidden state predicts target tgt (N_t,). Kept on the
    microbatch (its reference and policy forwards, and each update's, read the same plan)."""
    if "tiny" in mb.cache:
        return mb.cache["tiny"]
    R, L = mb.input_ids.shape
    lens = np.asarray(mb.row_lengths, dtype=np.int64)
    out = None
    if lens.shape == (R,):
        real = np.arange(L)[None, :] < lens[:, None]  # (R, L) queries that are not padding
        m = mb.attn[:, 0].cpu().numpy() & real[:, None, :]
        edge = np.zeros((R, L, 1), bool)
        e = np.concatenate([edge, m, edge], axis=-1)[real]  # (N, L + 2): each real query's keys, padded
        starts, ends = e[:, 1:] & ~e[:, :-1], ~e[:, 1:] & e[:, :-1]  # run k starts / ends at key k
        runs = starts.sum(1)
        if len(runs) and runs.min() >= 1 and runs.max() <= 2:
            rows = np.nonzero(real)[0]
            first = np.concatenate([[0], np.cumsum(lens)[:-1]])[rows]  # flat index of each row's key 0
            s1, e1 = starts.argmax(1), ends.argmax(1)
            starts[np.arange(len(runs)), s1] = False
            ends[np.arange(len(runs)), e1] = False
            two = runs == 2
            s2, e2 = np.where(two, starts.argmax(1), 0), np.where(two, ends.argmax(1), 0)
            spans = np.stack([s1 + first, e1 + first, np.where(two, s2 + first, 0),
                              np.where(two, e2 + first, 0)], axis=1).astype(np.int64)
            src = mb.src.cpu().numpy()
            r, p = src // L, src % L
            offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
            if (p < lens[r]).all():
                out = {"ids": mb.input_ids.cpu().numpy()[real].astype(np.int64),
                       "pos": mb.position_ids.cpu().numpy()[real].astype(np.int64), "spans": spans,
                       "src": (offsets[r] + p).astype(np.int64), "tgt": mb.tgt.cpu().numpy().astype(np.int64)}
    mb.cache["tiny"] = out
    return out


def parameters(model) -> list:
    """The parameters `PackedForward` takes and returns gradients for, in `backward`'s order flattened: the
    embedding (the tied head), the final norm, then per layer ln1, q, k, v, o, ln2, gate, up, down."""
    m = model.model
    out = [m.embed_tokens.weight, m.norm.weight]
    for x in m.layers:
        a, p = x.self_attn, x.mlp
        out += [x.input_layernorm.weight, a.q_proj.weight, a.k_proj.weight, a.v_proj.weight, a.o_proj.weight,
                x.post_attention_layernorm.weight, p.gate_proj.weight, p.up_proj.weight, p.down_proj.weight]
    return out


class PackedForward(torch.autograd.Function):
    """(lp, ent) of a planned microbatch from `forward`; the backward is `backward` (module docstring)."""

    @staticmethod
    def forward(ctx, model, pl, temperature, *params):
        cfg = model.config
        w = weights.stacked(model)
        args = (w["emb"], w["ln1"], w["wqkv"], w["wo"], w["ln2"], w["wgu"], w["wd"], w["norm_w"], pl["ids"],
                pl["pos"], pl["spans"], pl["src"], pl["tgt"], np.float32(temperature),
                cfg.num_attention_heads, cfg.num_key_value_heads)
        cos, sin = weights.rope(cfg)
        # a signal never lands inside the compiled call (kernel.held_interrupts)
        lp, ent, saved = call_compiled(forward, *args, np.float32(cfg.rms_norm_eps), cos, sin)
        ctx.state = (args, cos, sin, saved, cfg)
        ctx.set_materialize_grads(False)
        return torch.from_numpy(lp), torch.from_numpy(ent)

    @staticmethod
    def backward(ctx, dlp, dent):
        args, cos, sin, saved, cfg = ctx.state
        Nt = args[11].shape[0]
        zero = np.zeros(Nt, np.float32)
        g = [zero if d is None else np.ascontiguousarray(d.numpy(), dtype=np.float32) for d in (dlp, dent)]
        demb, dnorm, dln1, dwqkv, dwo, dln2, dwgu, dwd = call_compiled(backward, *args, cos, sin, saved, g[0],
                                                                       g[1])
        hd = cfg.head_dim
        qd, kd, inter = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd, cfg.intermediate_size
        out = [demb, dnorm]
        for i in range(dln1.shape[0]):
            out += [dln1[i], dwqkv[i, :qd], dwqkv[i, qd:qd + kd], dwqkv[i, qd + kd:], dwo[i], dln2[i],
                    dwgu[i, :inter], dwgu[i, inter:], dwd[i]]
        return (None, None, None, *(torch.from_numpy(np.ascontiguousarray(a)) for a in out))


def serves(model) -> bool:
    """Whether `forward` computes this model: float32 on the CPU, tied head, every width a whole number of
    ALIGN bytes (its per-layer matrices then stay aligned)."""
    cfg = model.config
    p = model.model.embed_tokens.weight
    widths = (cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads * cfg.head_dim,
              cfg.num_key_value_heads * cfg.head_dim)
    return (p.device.type == "cpu" and p.dtype == torch.float32 and cfg.tie_word_embeddings
            and all(w * 4 % ALIGN == 0 for w in widths))


def packed_logprobs(model, mb, T: int, temperature: float, with_entropy: bool, entropy_grad: bool):
    """What packed.micro_logprobs returns, by `forward` / `backward` (None where they do not serve: the
    torch path then runs)."""
    pl = plan(mb) if serves(model) else None
    if pl is None:
        return None
    lp, ent = PackedForward.apply(model, pl, float(temperature), *parameters(model))
    s = mb.seqs.shape[0]
    out = torch.zeros((s, T), dtype=lp.dtype).index_put((mb.tok_row, mb.tok_t), lp)
    if not with_entropy:
        return out, None
    ctx = torch.enable_grad() if entropy_grad else torch.no_grad()
    with ctx:
        e = torch.zeros((s, T), dtype=ent.dtype).index_put((mb.tok_row, mb.tok_t), ent)
    return out, e
