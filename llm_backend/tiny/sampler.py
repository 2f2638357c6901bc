"""The `kv` rollout engine: batched KV-cache sampling for the tiny LMs, all bp * n sequences in one batch.

Why: transformers `generate` spends ~ms of Python per decoding step on a 0.2M-parameter model whose matmuls
take microseconds (benchmarks/tiny_lm.py measures both). Here the bp prompts are left-padded into one
(bp, P) batch and prefilled once; their keys/values are repeated n times into a preallocated (bp * n, heads,
P + max_new_tokens, head_dim) cache per layer; each decoding step is then one batched pass over the bp * n
last tokens (fused q/k/v and gate/up matmuls, built once per call from the policy's current weights).
Sampling draws from softmax(logits / temperature) (top-p: the smallest nucleus with mass >= top_p,
renormalised, as transformers' TopPLogitsWarper) by the Gumbel-max trick with a generator seeded per call,
so the same prompts, weights and seed give the same tokens. The returned log-probs are those of the
sampled tokens under that same distribution over the full vocabulary, the engine log-probs the trainer's
TIS compares against (llm_backend/engines.py). Position ids of a left-padded prompt start at 0 at its first
real token, as in the trainer's layouts, and padding keys are masked out.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from llm_backend.memory import retain_freed_memory
from llm_backend.rollouts import Rollouts
from llm_backend.tiny.model import TinyLM, additive_mask, rope_tables, rotate


def _norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in float32 (model.rms_norm: torch's F.rms_norm, one call)."""
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def gumbel_noise(u: torch.Tensor) -> torch.Tensor:
    """log(-log(u)) in place of the uniforms u (clamped at 1e-20): the noise the Gumbel-max draw subtracts,
    for a whole call's uniforms at once (elementwise: the same floats as step by step)."""
    return u.clamp_(min=1e-20).log_().neg_().log_()


def sample_tokens(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None,
                  u: torch.Tensor | None = None, noise: torch.Tensor | None = None):
    """(token ids (B,), their log-probs (B,)) drawn from softmax(logits / temperature) (top-p nucleus).

    u: the (B, V) uniforms of the Gumbel draw when the caller drew them (else drawn here from `gen`);
    noise: gumbel_noise of them, when the caller computed it for all steps at once."""
    if temperature <= 0:  # greedy: the log-prob of the argmax under the untempered distribution
        logp = torch.log_softmax(logits.float(), -1)
        tok = logp.argmax(-1)
        return tok, logp.gather(-1, tok[:, None]).view(-1)
    z = logits.float()
    if temperature != 1.0:  # x / 1 is x: no op at the default temperature
        z = z / temperature
    if top_p < 1.0:
        srt, order = z.sort(-1, descending=True)
        mass = torch.softmax(srt, -1).cumsum(-1)
        drop = (mass - torch.softmax(srt, -1)) >= top_p  # tokens after the nucleus reached top_p
        z = z.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    logp = torch.log_softmax(z, -1)
    if noise is None:
        noise = gumbel_noise(torch.rand(z.shape, generator=gen) if u is None else u.clone())
    tok = (logp - noise).argmax(-1)  # Gumbel-max: an exact draw from softmax(z)
    return tok, logp.gather(-1, tok[:, None]).view(-1)


def _lengths(toks: torch.Tensor, eos: int) -> torch.Tensor:
    """Each row's length in tokens (B, T'): through its first EOS, else all T' steps taken."""
    hit = toks == eos
    return torch.where(hit.any(1), hit.int().argmax(1) + 1, toks.shape[1])


COMPACT_AT = 0.75
"""Evaluation's row compaction (KVEngine._decode): cut the batch to its unfinished rows once they are at most
this share of it."""

ATTENTION = ("bmm", "sdpa")
"""How a decoding step attends (KVEngine._decode): "bmm" (the engine's default, `KVEngine.attention`), two
batched matmuls and a softmax over the whole cache, positions not yet written masked: at 64 to 1,000 rows of
one query against ~16 keys SDPA's CPU kernel pays ~0.5 us per (row, head), about twice what MKL's batched
gemm takes; "sdpa", one F.scaled_dot_product_attention over the keys written so far, the floats of the
sampler before "bmm" (the pre-refactor bit tests run it)."""


DECODERS = ("compiled", "torch")
"""Who runs a draw's prefill and decoding steps (KVEngine.generate): "compiled" (the engine's default,
`KVEngine.decoder`), llm_backend/tiny/kernel.py's one Numba call per chunk, for the draws it serves (the CPU,
top_p 1, attention "bmm": training rollouts and evaluation), the torch path below for every other; "torch",
the torch path always (its floats are those of the tests that pin the sampler's bits). Why: at these sizes
a decoding step's ~130 torch ops cost more than its arithmetic (benchmarks/tiny_lm.py)."""


class KVEngine:
    """Engine interface of llm_backend/engines.py (generate, sync_weights, close) over a TinyLM policy.

    The engine reads the policy's parameters at each call (no copy to sync: `sync_weights` only swaps the
    module, e.g. after a checkpoint load).

    At training batch sizes a decoding step costs more in the fixed cost of each torch op (dispatch, Python)
    than in arithmetic, so it is written to issue few ops (about 30 per layer): the hidden state is (B, d)
    rows, each projection one `mm` against a transposed view of its weight (the output projections one
    `addmm` into the residual); q, k and v are (B, heads, 1, hd) views of the fused projection, q and k
    rotated by one `rotate`, k and v written into a (B, heads, S, hd) cache that SDPA reads as it is; RMSNorm
    is one F.rms_norm call; the rotary table, the key mask and the Gumbel noise of all steps are built once
    per call; tokens and log-probs are collected per step and the lengths found at the end; all of it runs
    under inference_mode. Each of these computes the same floats as the longer op sequence it stands for
    (the same kernels on the same values: tests/llm_backend/test_llm_refactor_bits.py compares whole runs),
    and tests/llm_backend/test_tiny_speed.py bounds the ops of a step.
    """

    name = "kv"

    attention = "bmm"
    """How `generate` attends unless told (ATTENTION)."""

    decoder = "compiled"
    """Who decodes unless told (DECODERS)."""

    eval_options = {"compact": True}
    """Keywords evaluation passes to `generate` (llm_backend/evaluation.py): evaluation drops finished rows
    from its batches (`compact`); training rollouts do not, so their floats do not depend on when rows
    end."""

    def __init__(self, model, tokenizer, device: str = "cpu", dtype: str = "float32", chunk_rows: int = 1024):
        if not isinstance(model, TinyLM):
            raise ValueError("engine 'kv' samples the tiny LMs (--lm tiny or small); use vllm or hf here")
        if dtype != "float32":
            raise ValueError("engine 'kv' runs in float32 (bf16 is slower than float32 without AMX)")
        self.model, self.tok, self.device = model, tokenizer, device
        self.chunk_rows = chunk_rows
        self._caches: dict = {}  # _finite_caches
        retain_freed_memory()  # its per-call caches reuse freed heap memory instead of faulting in new pages

    def sync_weights(self, model) -> float:
        self.model = model
        return 0.0

    def close(self) -> None:
        pass

    def _weights(self):
        """Per layer: (ln1, W_qkv^T, W_o^T, ln2, W_gate_up^T, W_down^T), the matrices as transposed views
        (x @ W^T by one `mm`, the call `linear` makes); plus embedding, final norm and head^T. Called under
        inference_mode, where nothing records a graph (no detach needed)."""
        m = self.model.model
        layers = []
        for layer in m.layers:
            a, p = layer.self_attn, layer.mlp
            layers.append((
                layer.input_layernorm.weight,
                torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).t(),
                a.o_proj.weight.t(),
                layer.post_attention_layernorm.weight,
                torch.cat([p.gate_proj.weight, p.up_proj.weight]).t(),
                p.down_proj.weight.t(),
            ))
        return m.embed_tokens.weight, layers, m.norm.weight, self.model.lm_head.weight.t()

    def generate(self, prompts: list[str], n: int, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int = 0, compact: bool = False, attention: str | None = None,
                 decoder: str | None = None) -> Rollouts:
        """n completions of each prompt (prompt-major). compact: drop rows that have emitted EOS from the
        decoding batch; attention: "bmm" or "sdpa" (ATTENTION, _decode; None: the engine's `attention`);
        decoder: "compiled" or "torch" (DECODERS; None: the engine's `decoder`); all give the same tokens up
        to round-off."""
        attention = self.attention if attention is None else attention
        if attention not in ATTENTION:
            raise ValueError(f"attention {attention!r}: one of {', '.join(ATTENTION)}")
        decoder = self.decoder if decoder is None else decoder
        if decoder not in DECODERS:
            raise ValueError(f"decoder {decoder!r}: one of {', '.join(DECODERS)}")
        compiled = (decoder == "compiled" and attention == "bmm" and top_p >= 1.0
                    and torch.device(self.device).type == "cpu")
        with torch.inference_mode():
            return self._generate(prompts, n, max_new_tokens, temperature, top_p, seed, compact, attention,
                                  compiled)

    def _generate(self, prompts, n, max_new_tokens, temperature, top_p, seed, compact=False,
                  attention="sdpa", compiled=False) -> Rollouts:
        t0 = time.perf_counter()
        cfg = self.model.config
        enc = [self.tok.encode(p) for p in prompts]
        bp, B = len(enc), len(enc) * n
        out = Rollouts([], [], [], [], n)
        if bp == 0:
            return out
        P = max(len(e) for e in enc)
        T = max(1, int(max_new_tokens))
        if P + T > cfg.max_position_embeddings:
            raise ValueError(f"prompt {P} + {T} new tokens exceed the model's {cfg.max_position_embeddings}")
        pad_id = self.tok.pad_token_id
        ids = torch.tensor([[pad_id] * (P - len(e)) + e for e in enc], dtype=torch.long)
        pad = torch.tensor([P - len(e) for e in enc])
        weights = self._kernel_weights() if compiled else self._weights()
        # the uniforms of every step for the whole batch, drawn up front in the order one (B, V) draw per step
        # gives (chunk c reads its rows of each step's draw), turned into Gumbel noise at once
        V = self.model.config.vocab_size
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        G = gumbel_noise(torch.rand((T, B, V), generator=gen)) if temperature > 0 else None
        tl, ll, lens = [], [], []
        # chunks of <= chunk_rows rows (whole prompts, sizes balanced: no small tail): every tensor of a
        # step stays cache-sized; a row's values do not depend on the chunking up to matmul round-off
        chunks = -(-bp // max(1, self.chunk_rows // n))
        bounds = [i * bp // chunks for i in range(chunks + 1)]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            rows = slice(a * n, b * n)
            if compiled:
                toks, lps, lengths = self._decode_compiled(weights, ids[a:b], pad[a:b], n, T, temperature, G,
                                                           a * n, compact)
            else:
                toks, lps, lengths = self._decode(
                    weights, ids[a:b], pad[a:b], n, T, temperature, top_p, None if G is None else G[:, rows],
                    COMPACT_AT if compact else 0.0, attention == "bmm")
            tl += toks.tolist()
            ll += lps.tolist()
            lens += lengths.tolist()
        out.prompt_ids = [e for e in enc for _ in range(n)]
        out.token_ids = [row[:k] for row, k in zip(tl, lens, strict=True)]
        out.logprobs = [row[:k] for row, k in zip(ll, lens, strict=True)]
        texts: dict[tuple, str] = {}  # completions repeat: decode each distinct one once
        for ids in out.token_ids:
            key = tuple(ids)
            text = texts.get(key)
            if text is None:
                text = texts[key] = self.tok.decode(ids)
            out.texts.append(text)
        out.seconds = time.perf_counter() - t0
        return out

    def _kernel_weights(self):
        """The weights as kernel.decode reads them, C-contiguous float32 numpy arrays in torch's (out, in)
        layout: per layer stacked ln1, W_qkv, W_o, ln2, W_gate_up, W_down; then the embedding (the tied
        head), the final norm and the rotary tables by position (cos, signed sin, (max positions, hd))."""
        from llm_backend.tiny import kernel, weights

        cfg = self.model.config
        if not cfg.tie_word_embeddings:
            raise ValueError("the compiled decoder reads the head as the embedding (tied weights)")
        out = weights.stacked(self.model)
        out["cos"], out["sin"] = weights.rope(cfg)
        for key in ("wqkv", "wo", "wgu", "wd", "emb"):  # sgemm's operands: aligned as kernel.ALIGN says
            a = out[key]
            if a.ctypes.data % kernel.ALIGN or (a.ndim == 3 and a[0].nbytes % kernel.ALIGN):
                raise ValueError(f"the compiled decoder needs {key} {kernel.ALIGN}-byte aligned per layer; "
                                 "use decoder='torch' for this model's shapes")
        return out

    def _decode_compiled(self, w, ids, pad, n, T, temperature, G, g0, compact=False):
        """What `_decode` returns, by kernel.decode (one call); G: the whole call's (T, rows, V) Gumbel noise
        (None: greedy), this chunk's rows starting at g0; compact: decode only the unfinished rows from each
        step on (kernel.decode; every step, where the torch path waits for a quarter of the rows)."""
        from llm_backend.tiny import kernel

        cfg = self.model.config
        B = ids.shape[0] * n
        toks = torch.empty(B, T, dtype=torch.long)
        lps = torch.empty(B, T)
        noise = np.zeros((1, 1, 1), np.float32) if G is None else G.numpy()
        steps = kernel.call_compiled(  # a signal never lands inside the compiled call
            kernel.decode, w["emb"], w["ln1"], w["wqkv"], w["wo"], w["ln2"], w["wgu"], w["wd"], w["norm_w"],
            ids.numpy(), pad.numpy(), n, T, noise, g0, np.float32(temperature), self.tok.eos_token_id,
            cfg.num_attention_heads, cfg.num_key_value_heads, np.float32(cfg.rms_norm_eps), w["cos"],
            w["sin"], toks.numpy(), lps.numpy(), bool(compact))
        toks, lps = toks[:, :steps], lps[:, :steps]
        return toks, lps, _lengths(toks, self.tok.eos_token_id)

    def _finite_caches(self, layers: int, shape: tuple) -> list:
        """Per layer a (keys, values) pair of `shape` whose every element is finite: zeros when first made,
        then kept by the engine and reused by its next call of that shape, whose writes are keys and values
        (finite). Why: "bmm" attention reads positions not written yet (with weight 0), and 0 * NaN from
        uninitialised memory would be NaN; zeroing them per call cost ~8% of an evaluation."""
        key = (layers, shape, str(self.device))
        if key not in self._caches:
            dev = self.device
            self._caches[key] = [(torch.zeros(shape, device=dev), torch.zeros(shape, device=dev))
                                 for _ in range(layers)]
        return self._caches[key]

    def _decode(self, weights, ids, pad, n, T, temperature, top_p, G, compact=0.0, bmm=False):
        """Prefill the c prompts `ids` (c, P) (left padding `pad` (c,)) once, then sample n completions of
        each, T steps at most, all c * n rows in one batch; G: (T, c * n, V) Gumbel noise of the draws
        (None: greedy). Returns token ids (c * n, T'), their log-probs (c * n, T') and the lengths (c * n,),
        T' <= T the steps taken (entries past a row's length are meaningless).

        compact > 0: row compaction. A row that has emitted EOS is still computed until the rows still
        sampling are at most `compact` of the batch; then the batch is cut to those rows (their hidden
        state's next tokens, KV caches, key mask and rotary start positions gathered into smaller tensors,
        `rows` mapping them to their original rows). Why: an evaluation's answers are a few tokens while
        a batch of ~1000 rows runs until its longest row ends, so most of the late steps' rows are finished;
        with compact = 3/4 a compaction (~12 ops) is paid only when it cuts a quarter of the rows. Each
        row's draw reads its original row of G, so it uses the uniforms it would have used in the full
        batch; a row's floats change only by the round-off of matmuls over fewer rows (BLAS picks kernels by
        the number of rows), which can flip a near-tied draw: tests/llm_backend/test_tiny_compaction.py
        measures and bounds it. Output tokens of dropped rows are EOS (after their first EOS: meaningless).
        compact = 0 runs the full batch to the end, op for op the plain path (training rollouts).

        bmm: each decoding step attends over the whole cache of S = P + T positions by baddbmm (key mask +
        scaled q k^T), softmax and bmm, with q grouped per key/value head as (B * KVH, H / KVH, hd) (no
        repeated keys); positions not written yet are masked (-inf in the key mask until the step writes
        them) and hold finite values (`_finite_caches`), so their softmax weight, exactly 0, times them is
        0. Why
        the whole cache: torch runs a batched matmul whose rows x columns x contraction is under 400 with its
        own loops, ~4x slower than MKL's batched gemm, which a contraction of 32 reaches at 13 keys; the
        masked positions cost less than that. Same tokens as "sdpa" up to the round-off of another
        summation order (tests/llm_backend/test_tiny_compaction.py)."""
        cfg, dev = self.model.config, self.device
        c, P = ids.shape
        B = c * n
        ids, pad = ids.to(dev), pad.to(dev)
        ar = torch.arange(P, device=dev)
        pos = (ar[None] - pad[:, None]).clamp(min=0)
        valid = ar[None] >= pad[:, None]  # (c, P)
        H, KVH, hd, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps
        d, rep, nqk = cfg.hidden_size, H // KVH, H + KVH
        scale = hd**-0.5  # SDPA's default
        emb, layers, norm_w, head_t = weights
        S = P + T
        # (B, heads, S, hd) per layer, uninitialised: a decoding step reads positions < P + t + 1 only, all
        # written by then (this layout, each head's keys contiguous, is also the one SDPA reads fastest)
        if bmm:
            caches = self._finite_caches(len(layers), (B, KVH, S, hd))
        else:
            caches = [(torch.empty(B, KVH, S, hd, device=dev), torch.empty(B, KVH, S, hd, device=dev))
                      for _ in layers]
        key_ok = torch.ones(B, S, dtype=torch.bool, device=dev)
        key_ok[:, :P] = valid.repeat_interleave(n, 0)
        if bmm:  # (B, KVH, 1, S), the positions to come masked until the step that writes them
            key_ok[:, P:] = False
            key_add = additive_mask(key_ok[:, None, None, :].expand(B, KVH, 1, S))
        else:
            key_add = additive_mask(key_ok[:, None, None, :])  # (B, 1, 1, S)
        # rotary tables by position, cos and sin side by side, for the prefill and every decoding step (the
        # same floats as tables of those positions: elementwise); row r's new token at step t has position
        # start_r + t, looked up per step (a call ends early)
        start = (P - pad).repeat_interleave(n, 0)
        rope = torch.stack(rope_tables(cfg, torch.arange(S, device=dev)), 1)[:, :, None]  # (S, 2, 1, hd)

        # prefill: the c prompts once, as (c * P, d) rows; each prompt's keys/values copied into its n rows
        tri = torch.ones(P, P, dtype=torch.bool, device=dev).tril()
        mask = additive_mask(((tri[None] & valid[:, None, :]) | torch.eye(P, dtype=torch.bool, device=dev))
                             .unsqueeze(1))
        cos, sin = rope[pos].unbind(2)  # (c, P, 1, hd): broadcast over heads
        x = F.embedding(ids, emb).view(c * P, d)
        qd, kd = H * hd, KVH * hd
        for (ln1, wqkv, wo, ln2, wgu, wd), (kc, vc) in zip(layers, caches, strict=True):
            qk, v = torch.mm(_norm(x, ln1, eps), wqkv).split((qd + kd, kd), 1)
            qk = rotate(qk.view(c, P, nqk, hd), cos, sin)  # (c, P, H + KVH, hd)
            q, k = qk.split((H, KVH), 2)
            k, v = k.transpose(1, 2), v.view(c, P, KVH, hd).transpose(1, 2)  # (c, KVH, P, hd)
            kc[:, :, :P].view(c, n, KVH, P, hd).copy_(k[:, None].expand(c, n, KVH, P, hd))
            vc[:, :, :P].view(c, n, KVH, P, hd).copy_(v[:, None].expand(c, n, KVH, P, hd))
            if rep > 1:
                k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=mask)
            x = torch.addmm(x, o.transpose(1, 2).reshape(c * P, qd), wo)
            g, u = torch.mm(_norm(x, ln2, eps), wgu).chunk(2, -1)
            x = torch.addmm(x, F.silu(g) * u, wd)
        last = x.view(c, P, d)[:, -1]
        logits = torch.mm(_norm(last, norm_w, eps), head_t).repeat_interleave(n, 0)  # (B, V)

        toks, lps = [], []
        done = torch.zeros(B, dtype=torch.bool)
        eos = self.tok.eos_token_id
        full, rows = B, None  # compaction: rows (B,) the original row of each row in the batch, None: all
        for t in range(T):
            noise = None if G is None else G[t] if rows is None else G[t].index_select(0, rows)
            tok, lp = sample_tokens(logits.cpu(), temperature, top_p, None, noise=noise)
            done |= tok == eos
            if rows is None:
                toks.append(tok)
                lps.append(lp)
            else:  # back to all rows: EOS (log-prob 0) in the rows dropped
                toks.append(tok.new_full((full,), eos).index_copy_(0, rows, tok))
                lps.append(lp.new_zeros(full).index_copy_(0, rows, lp))
            if not compact:
                if t == T - 1 or bool(done.all()):
                    break
            else:
                live = B - int(done.sum())
                if t == T - 1 or live == 0:
                    break
                if live <= compact * B:
                    keep = done.logical_not().nonzero().view(-1)
                    rows = keep if rows is None else rows[keep]
                    tok, done, B = tok[keep], done[keep], live
                    kd = keep.to(dev)
                    caches = [(kc.index_select(0, kd), vc.index_select(0, kd)) for kc, vc in caches]
                    key_add, start = key_add.index_select(0, kd), start.index_select(0, kd)
            x = F.embedding(tok.to(dev), emb)  # (B, d)
            cs, sn = rope[start + t].split(1, 1)  # (B, 1, 1, hd) each
            L = P + t + 1
            if bmm:
                key_add.narrow(3, L - 1, 1).zero_()  # the position this step writes
                am = key_add.view(B * KVH, 1, S)
            else:
                am = key_add[..., :L]
            for (ln1, wqkv, wo, ln2, wgu, wd), (kc, vc) in zip(layers, caches, strict=True):
                # (B, heads, 1, hd) views of the projection: SDPA's shape of one query, the cache's of one key
                qk, v = torch.mm(_norm(x, ln1, eps), wqkv).view(B, nqk + KVH, 1, hd).split((nqk, KVH), 1)
                q, k = rotate(qk, cs, sn).split((H, KVH), 1)
                kc.narrow(2, L - 1, 1).copy_(k)
                vc.narrow(2, L - 1, 1).copy_(v)
                if bmm:  # (B * KVH, rep, S) scores of each key/value head's rep query heads
                    kt = kc.view(B * KVH, S, hd).transpose(1, 2)
                    sc = torch.baddbmm(am, q.reshape(B * KVH, rep, hd), kt, alpha=scale)
                    o = torch.bmm(torch.softmax(sc, -1), vc.view(B * KVH, S, hd))  # (B * KVH, rep, hd)
                else:
                    k, v = kc[:, :, :L], vc[:, :, :L]
                    if rep > 1:
                        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
                    o = F.scaled_dot_product_attention(q, k, v, attn_mask=am)  # (B, H, 1, hd)
                x = torch.addmm(x, o.reshape(B, qd), wo)
                g, u = torch.mm(_norm(x, ln2, eps), wgu).chunk(2, -1)
                x = torch.addmm(x, F.silu(g) * u, wd)
            logits = torch.mm(_norm(x, norm_w, eps), head_t)
        toks, lps = torch.stack(toks, 1), torch.stack(lps, 1)
        return toks, lps, _lengths(toks, eos)
