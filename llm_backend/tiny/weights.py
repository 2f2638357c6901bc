"""The tiny LM's weights as its Numba kernels read them, shared by the compiled sampler (tiny/sampler.py,
kernel.decode) and the compiled trainer (tiny/train_kernel.py): the per-layer matrices stacked, and the
rotary tables by position, made once per config.

Both kernels take C-contiguous float32 numpy arrays in torch's (out, in) layout; stacking is a copy, so a
caller stacks again after each optimiser step (the weights change), while the rotary tables are a function of
the config alone and are cached here for the process. `rope_tables` itself (any positions, any device)
lives here too, so the model module imports this one and not the other way round.
"""

from __future__ import annotations

import torch

_ROPE: dict = {}


def rope_tables(cfg, positions: torch.Tensor, dtype=torch.float32):
    """cos and signed sin of TinyConfig cfg, each positions.shape + (head_dim,): Llama's default rotary
    embedding (Su et al. 2021), inv_freq = theta^(-2i/d) duplicated over both halves as transformers'
    LlamaRotaryEmbedding; the first half of the sin table is negated for model.rotate. Computed on the
    positions' device (cpu or cuda)."""
    hd = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64, device=positions.device).float()
                                    / hd))
    freqs = positions.float()[..., None] * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    sin = emb.sin()
    sin[..., : hd // 2].neg_()
    return emb.cos().to(dtype), sin.to(dtype)


def stacked(model) -> dict:
    """Per layer stacked ln1 (L, d), W_qkv (L, q + 2 kv, d; q, k, v in that order), W_o, ln2, W_gate_up
    (L, 2 inter, d), W_down; then the embedding (the tied head, (vocab, d)) and the final norm (d,); the
    embedding and norm are the torch tensors' memory (read, never written)."""
    m = model.model

    def stack(ts):
        return torch.stack([t.detach() for t in ts]).numpy()

    ls = m.layers
    return dict(
        ln1=stack([x.input_layernorm.weight for x in ls]),
        wqkv=stack([torch.cat([x.self_attn.q_proj.weight, x.self_attn.k_proj.weight,
                               x.self_attn.v_proj.weight]).detach() for x in ls]),
        wo=stack([x.self_attn.o_proj.weight for x in ls]),
        ln2=stack([x.post_attention_layernorm.weight for x in ls]),
        wgu=stack([torch.cat([x.mlp.gate_proj.weight, x.mlp.up_proj.weight]).detach() for x in ls]),
        wd=stack([x.mlp.down_proj.weight for x in ls]),
        emb=m.embed_tokens.weight.detach().numpy(), norm_w=m.norm.weight.detach().numpy())


def rope(cfg) -> tuple:
    """The rotary tables by position of a TinyConfig, (cos, signed sin), each (max positions, head_dim)
    float32 numpy (`rope_tables` over every position), made once per config for the process."""
    if cfg not in _ROPE:
        _ROPE[cfg] = tuple(t.numpy() for t in rope_tables(cfg, torch.arange(cfg.max_position_embeddings)))
    return _ROPE[cfg]
