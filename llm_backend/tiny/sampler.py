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

import torch
import torch.nn.functional as F

from llm_backend.rollouts import Rollouts
from llm_backend.tiny.model import TinyLM, additive_mask, rope_tables, rotate


def _norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def sample_tokens(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None,
                  u: torch.Tensor | None = None):
    """(token ids (B,), their log-probs (B,)) drawn from softmax(logits / temperature) (top-p nucleus).

    u: the (B, V) uniforms of the Gumbel draw when the caller drew them (else drawn here from `gen`)."""
    if temperature <= 0:  # greedy: the log-prob of the argmax under the untempered distribution
        logp = torch.log_softmax(logits.float(), -1)
        tok = logp.argmax(-1)
        return tok, logp.gather(-1, tok[:, None]).squeeze(-1)
    z = logits.float() / temperature
    if top_p < 1.0:
        srt, order = z.sort(-1, descending=True)
        mass = torch.softmax(srt, -1).cumsum(-1)
        drop = (mass - torch.softmax(srt, -1)) >= top_p  # tokens after the nucleus reached top_p
        z = z.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    logp = torch.log_softmax(z, -1)
    u = (torch.rand(z.shape, generator=gen) if u is None else u.clone()).clamp_(min=1e-20)
    tok = (logp - torch.log(-torch.log(u))).argmax(-1)  # Gumbel-max: an exact draw from softmax(z)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


class KVEngine:
    """Engine interface of llm_backend/engines.py (generate, sync_weights, close) over a TinyLM policy.

    The engine reads the policy's parameters at each call (no copy to sync: `sync_weights` only swaps the
    module, e.g. after a checkpoint load).
    """

    name = "kv"

    def __init__(self, model, tokenizer, device: str = "cpu", dtype: str = "float32", chunk_rows: int = 1024):
        if not isinstance(model, TinyLM):
            raise ValueError("engine 'kv' samples the tiny LMs (--lm tiny or small); use vllm or hf here")
        if dtype != "float32":
            raise ValueError("engine 'kv' runs in float32 (bf16 is slower than float32 without AMX)")
        self.model, self.tok, self.device = model, tokenizer, device
        self.chunk_rows = chunk_rows

    def sync_weights(self, model) -> float:
        self.model = model
        return 0.0

    def close(self) -> None:
        pass

    def _weights(self):
        """Per layer: (ln1, W_qkv, W_o, ln2, W_gate_up, W_down), detached; plus embedding and final norm."""
        m = self.model.model
        layers = []
        for layer in m.layers:
            a, p = layer.self_attn, layer.mlp
            layers.append((
                layer.input_layernorm.weight.detach(),
                torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).detach(),
                a.o_proj.weight.detach(),
                layer.post_attention_layernorm.weight.detach(),
                torch.cat([p.gate_proj.weight, p.up_proj.weight]).detach(),
                p.down_proj.weight.detach(),
            ))
        head = self.model.lm_head.weight.detach()
        return m.embed_tokens.weight.detach(), layers, m.norm.weight.detach(), head

    def generate(self, prompts: list[str], n: int, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int = 0) -> Rollouts:
        with torch.no_grad():
            return self._generate(prompts, n, max_new_tokens, temperature, top_p, seed)

    def _generate(self, prompts, n, max_new_tokens, temperature, top_p, seed) -> Rollouts:
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
        ids = torch.full((bp, P), self.tok.pad_token_id, dtype=torch.long)
        pad = torch.tensor([P - len(e) for e in enc])
        for i, e in enumerate(enc):
            ids[i, P - len(e):] = torch.tensor(e, dtype=torch.long)
        weights = self._weights()
        # the uniforms of every step for the whole batch, drawn up front in the order one (B, V) draw per step
        # gives: chunk c reads its rows of each step's draw
        V = weights[3].shape[0]
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        U = torch.rand((T, B, V), generator=gen) if temperature > 0 else None
        toks = torch.zeros(B, T, dtype=torch.long)
        lps = torch.zeros(B, T)
        lengths = torch.full((B,), T, dtype=torch.long)
        # chunks of <= chunk_rows rows (whole prompts, sizes balanced: no small tail): every tensor of a
        # step stays cache-sized; a row's values do not depend on the chunking up to matmul round-off
        chunks = -(-bp // max(1, self.chunk_rows // n))
        bounds = [i * bp // chunks for i in range(chunks + 1)]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            rows = slice(a * n, b * n)
            toks[rows], lps[rows], lengths[rows] = self._decode(
                weights, ids[a:b], pad[a:b], n, T, temperature, top_p, None if U is None else U[:, rows])
        tl, ll, lens = toks.tolist(), lps.tolist(), lengths.tolist()
        texts: dict[tuple, str] = {}  # completions repeat: decode each distinct one once
        for r in range(B):
            k = lens[r]
            ids = tl[r][:k]
            key = tuple(ids)
            if key not in texts:
                texts[key] = self.tok.decode(ids)
            out.prompt_ids.append(enc[r // n])
            out.token_ids.append(ids)
            out.logprobs.append(ll[r][:k])
            out.texts.append(texts[key])
        out.seconds = time.perf_counter() - t0
        return out

    def _decode(self, weights, ids, pad, n, T, temperature, top_p, U):
        """Prefill the c prompts `ids` (c, P) (left padding `pad` (c,)) once, then sample n completions of
        each, T steps at most, all c * n rows in one batch; U: (T, c * n, V) uniforms of the Gumbel draws
        (None: greedy). Returns token ids (c * n, T), their log-probs (c * n, T) and the lengths (c * n,)."""
        cfg, dev = self.model.config, self.device
        c, P = ids.shape
        B = c * n
        ids, pad = ids.to(dev), pad.to(dev)
        ar = torch.arange(P, device=dev)
        pos = (ar[None] - pad[:, None]).clamp(min=0)
        valid = ar[None] >= pad[:, None]  # (c, P)
        H, KVH, hd, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps
        rep = H // KVH
        emb, layers, norm_w, head_w = weights
        S = P + T
        # uninitialised: a decoding step reads positions < P + t + 1 only, all written by then
        caches = [(torch.empty(B, KVH, S, hd, device=dev), torch.empty(B, KVH, S, hd, device=dev))
                  for _ in layers]
        key_ok = torch.ones(B, S, dtype=torch.bool, device=dev)
        key_ok[:, :P] = valid.repeat_interleave(n, 0)
        key_add = additive_mask(key_ok[:, None, None, :])  # (B, 1, 1, S)
        cos_all, sin_all = rope_tables(cfg, torch.arange(S, device=dev))  # (S, hd), indexed per step

        # prefill: the c prompts once; each prompt's keys/values copied into its n rows of the cache
        tri = torch.ones(P, P, dtype=torch.bool, device=dev).tril()
        mask = additive_mask(((tri[None] & valid[:, None, :]) | torch.eye(P, dtype=torch.bool, device=dev))
                             .unsqueeze(1))
        cos, sin = rope_tables(cfg, pos)
        cos, sin = cos[:, None], sin[:, None]
        x = F.embedding(ids, emb)
        qd, kd = H * hd, KVH * hd
        for (ln1, wqkv, wo, ln2, wgu, wd), (kc, vc) in zip(layers, caches, strict=True):
            qkv = F.linear(_norm(x, ln1, eps), wqkv)
            q = rotate(qkv[..., :qd].view(c, P, H, hd).transpose(1, 2), cos, sin)
            k = rotate(qkv[..., qd:qd + kd].view(c, P, KVH, hd).transpose(1, 2), cos, sin)
            v = qkv[..., qd + kd:].view(c, P, KVH, hd).transpose(1, 2)
            kc[:, :, :P].view(c, n, KVH, P, hd).copy_(k[:, None].expand(c, n, KVH, P, hd))
            vc[:, :, :P].view(c, n, KVH, P, hd).copy_(v[:, None].expand(c, n, KVH, P, hd))
            if rep > 1:
                k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + F.linear(o.transpose(1, 2).reshape(c, P, qd), wo)
            g, u = F.linear(_norm(x, ln2, eps), wgu).chunk(2, -1)
            x = x + F.linear(F.silu(g) * u, wd)
        logits = F.linear(_norm(x[:, -1], norm_w, eps), head_w).repeat_interleave(n, 0)  # (B, V)

        toks = torch.zeros(B, T, dtype=torch.long)
        lps = torch.zeros(B, T)
        done = torch.zeros(B, dtype=torch.bool)
        lengths = torch.full((B,), T, dtype=torch.long)
        eos = self.tok.eos_token_id
        start = (P - pad).repeat_interleave(n, 0)  # position id of the first new token
        for t in range(T):
            tok, lp = sample_tokens(logits.cpu(), temperature, top_p, None, None if U is None else U[t])
            toks[:, t], lps[:, t] = tok, lp
            hit = (tok == eos) & ~done
            lengths[hit] = t + 1
            done |= hit
            if bool(done.all()) or t == T - 1:
                break
            x = F.embedding(tok.to(dev), emb)[:, None]  # (B, 1, d)
            cs, sn = cos_all[start + t][:, None, None], sin_all[start + t][:, None, None]  # (B, 1, 1, hd)
            am = key_add[..., : P + t + 1]
            for (ln1, wqkv, wo, ln2, wgu, wd), (kc, vc) in zip(layers, caches, strict=True):
                qkv = F.linear(_norm(x, ln1, eps), wqkv)
                q = rotate(qkv[..., :qd].view(B, 1, H, hd).transpose(1, 2), cs, sn)
                k_new = qkv[..., qd:qd + kd].view(B, 1, KVH, hd).transpose(1, 2)
                kc[:, :, P + t] = rotate(k_new, cs, sn)[:, :, 0]
                vc[:, :, P + t] = qkv[..., qd + kd:].view(B, KVH, hd)
                k, v = kc[:, :, : P + t + 1], vc[:, :, : P + t + 1]
                if rep > 1:
                    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=am)
                x = x + F.linear(o.transpose(1, 2).reshape(B, 1, qd), wo)
                g, u = F.linear(_norm(x, ln2, eps), wgu).chunk(2, -1)
                x = x + F.linear(F.silu(g) * u, wd)
            logits = F.linear(_norm(x[:, 0], norm_w, eps), head_w)
        return toks, lps, lengths

