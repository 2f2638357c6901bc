"""Tiny Llama-architecture causal LMs in plain torch, with transformers' `LlamaForCausalLM` names and maths.

Why our own module: at 0.2M parameters a transformers forward is mostly Python (config dispatch, mask
builders, cache objects: ~ms per call), while the matmuls take microseconds; benchmarks/tiny_lm.py measures
both in one process. The module below computes what `LlamaForCausalLM` computes (RMSNorm in float32, rotary
embeddings with `rotate_half`, SiLU-gated MLP, no biases, tied embeddings) and its state_dict keys are the
same (`model.embed_tokens.weight`, `model.layers.{i}.self_attn.q_proj.weight`, ..., `lm_head.weight`), so a
folder saved here (config.json + model.safetensors + tokenizer files) loads in transformers, and
transformers' weights load here (tests/llm_backend/test_tiny_lm.py compares the logits).

It offers what the trainer calls on a transformers model: `model(input_ids, attention_mask).logits`
(padded layout), `get_decoder()(input_ids, position_ids, attention_mask=<(R, 1, L, L) bool>)
.last_hidden_state` and `get_output_embeddings()` (packed layout, llm_backend/packed.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from llm_backend.tiny.weights import rope_tables


@dataclass(frozen=True)
class TinyConfig:
    """The LlamaConfig fields a tiny LM sets (names as transformers'); everything else is Llama's default."""

    vocab_size: int = 18
    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 4
    num_attention_heads: int = 2
    num_key_value_heads: int = 2
    max_position_embeddings: int = 64
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    pad_token_id: int = 0
    bos_token_id: int = 1
    eos_token_id: int = 2

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def hf_config(self) -> dict:
        """config.json of the saved folder: a LlamaForCausalLM config (head_dim 32: vLLM's CPU kernels take
        it; 16 they may not)."""
        d = asdict(self)
        theta = d.pop("rope_theta")
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            **d,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "mlp_bias": False,
            "initializer_range": 0.02,
            "use_cache": True,
            "torch_dtype": "float32",
            "rope_theta": theta,  # transformers < 5
            "rope_parameters": {"rope_type": "default", "rope_theta": theta},  # transformers >= 5
        }

    @classmethod
    def from_hf(cls, d: dict) -> TinyConfig:
        theta = d.get("rope_theta") or (d.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        known = {k: d[k] for k in asdict(cls()) if k in d and k != "rope_theta"}
        return cls(**known, rope_theta=float(theta))


SIZES = {
    "tiny": TinyConfig(hidden_size=64, intermediate_size=192, num_hidden_layers=4, num_attention_heads=2,
                       num_key_value_heads=2),
    "small": TinyConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=4),
}
"""Named sizes: `tiny` ~0.21M parameters (d 64, 4 layers, 2 heads of 32), `small` ~1.05M (d 128, 4 layers,
4 heads of 32). Both tie the head to the embedding (vocabulary 18)."""


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) in float32, times a learned scale (Zhang & Sennrich 2019).

    In float32 this is torch's F.rms_norm: on the CPU the same ops composed in C++, one Python call instead of
    six, with equal floats forward and backward (tests/llm_backend/test_llm_refactor_bits.py would show a
    torch whose kernel rounds otherwise); other precisions keep the float32 upcast written out (F.rms_norm
    rounds differently there)."""
    dt = x.dtype
    if dt == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return w * x.to(dt)


class RMSNorm(nn.Module):
    """LlamaRMSNorm's parameter (`rms_norm` is its maths)."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def residual_mm(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x + h @ w^T, the residual update of an output projection: one `addmm` in float32 (the same floats as
    `mm` then `add`: the gemm adds x to its finished sum; one op and one backward node instead of two),
    `mm` then `add` in other precisions (a bf16 addmm would round once where the two ops round twice)."""
    if x.dtype == torch.float32:
        return torch.addmm(x, h, w.t())
    return x + torch.mm(h, w.t())


def additive_mask(allowed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """0 where a query may attend, -inf elsewhere: the float mask SDPA adds to the scores (its boolean
    argument means the same and is converted to this form inside every call)."""
    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return out.masked_fill_(~allowed, float("-inf"))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' apply_rotary_pos_emb, x * cos + rotate_half(x) * sin, as x * cos + roll(x) * sin' with
    sin' the signed table of `rope_tables`; cos/sin broadcast over heads.

    rotate_half(x) = cat(-x2, x1) and roll(x, d/2) = cat(x2, x1), so each product is the same float
    ((-a) * b == a * (-b) exactly) and so is the sum, forward and backward (the gradient of x2 gets
    g1 * (-s1) where transformers' gets -(g1 * s1)), in 4 ops instead of 7 (and a 1-op backward for the roll
    instead of a cat's, a negation's and two slices')."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin


class Attention(nn.Module):
    """q/k/v/o projections of a layer (parameters only: `Layer.forward` computes the attention)."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        d, hd = cfg.hidden_size, cfg.head_dim
        self.h, self.kvh, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, hd
        self.q_proj = nn.Linear(d, self.h * hd, bias=False)
        self.k_proj = nn.Linear(d, self.kvh * hd, bias=False)
        self.v_proj = nn.Linear(d, self.kvh * hd, bias=False)
        self.o_proj = nn.Linear(self.h * hd, d, bias=False)


class MLP(nn.Module):
    """SiLU-gated MLP projections of a layer (parameters only: `Layer.forward` computes it)."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)


class Layer(nn.Module):
    """One decoder layer: x + attention(norm(x)), then + mlp(norm(x)).

    The forward works on the (B * L, d) rows of the batch, with each projection one `mm` against its
    weight's transposed view (what `Linear` computes; on 3-D inputs `Linear` adds a reshape and a view per
    call, forward and backward) and the output projections folded into the residual add (`residual_mm`); it
    reads its submodules' weights instead of calling them (no per-module call overhead). The floats are those
    of the module-per-projection form, forward and backward (tests/llm_backend/test_llm_refactor_bits.py).
    """

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, shape, cos, sin, mask, causal: bool):
        """x: (B * L, d) rows of a (B, L) batch `shape`; cos/sin: (B, L, 1, head_dim) signed rotary tables;
        mask: additive (B, 1, L, L) or None (causal when `causal`)."""
        B, L = shape
        a, m, n1, n2 = self.self_attn, self.mlp, self.input_layernorm, self.post_attention_layernorm
        h = rms_norm(x, n1.weight, n1.eps)
        q = rotate(torch.mm(h, a.q_proj.weight.t()).view(B, L, a.h, a.hd), cos, sin).transpose(1, 2)
        k = rotate(torch.mm(h, a.k_proj.weight.t()).view(B, L, a.kvh, a.hd), cos, sin).transpose(1, 2)
        v = torch.mm(h, a.v_proj.weight.t()).view(B, L, a.kvh, a.hd).transpose(1, 2)
        if a.kvh != a.h:
            k = k.repeat_interleave(a.h // a.kvh, dim=1)
            v = v.repeat_interleave(a.h // a.kvh, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
        x = residual_mm(x, o.transpose(1, 2).reshape(B * L, a.h * a.hd), a.o_proj.weight)
        h = rms_norm(x, n2.weight, n2.eps)
        gu = F.silu(torch.mm(h, m.gate_proj.weight.t())) * torch.mm(h, m.up_proj.weight.t())
        return residual_mm(x, gu, m.down_proj.weight)


class Body(nn.Module):
    """LlamaModel: embedding, layers, final norm (what `get_decoder()` returns)."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, input_ids, position_ids=None, attention_mask=None, **_):
        """attention_mask: None (causal), (B, L) 0/1 padding (causal and keys where 1, as transformers), or
        a (B, 1, L, L) boolean mask used as given (True = may attend; the packed layout's tree)."""
        B, L = input_ids.shape
        x = F.embedding(input_ids.reshape(-1), self.embed_tokens.weight)  # (B * L, d)
        cos, sin, mask, causal = _TABLES.get(self.cfg, (B, L), input_ids.device, x.dtype, position_ids,
                                             attention_mask)
        for layer in self.layers:
            x = layer(x, (B, L), cos, sin, mask, causal)
        x = rms_norm(x, self.norm.weight, self.norm.eps)
        return SimpleNamespace(last_hidden_state=x.view(B, L, -1))


def forward_tables(cfg: TinyConfig, shape, device, dtype, position_ids=None, attention_mask=None):
    """(cos, sin, mask, causal) of a forward: the (B, L, 1, head_dim) rotary tables of `rope_tables`, the
    additive (B, 1, L, L) mask or None, and whether SDPA applies its own causal mask (Body.forward's
    attention_mask forms)."""
    B, L = shape
    if position_ids is None:
        position_ids = torch.arange(L, device=device).expand(B, L)
    mask, causal = None, True
    if attention_mask is not None and attention_mask.dim() == 4:
        mask, causal = attention_mask.bool(), False
    elif attention_mask is not None and not bool(attention_mask.all()):
        tri = torch.ones(L, L, dtype=torch.bool, device=device).tril()
        mask = (tri[None] & attention_mask.bool()[:, None, :]).unsqueeze(1)
        mask = mask | torch.eye(L, dtype=torch.bool, device=device)  # no empty row: no NaN
        causal = False
    if mask is not None:  # additive form once per forward (SDPA converts a boolean mask at every call)
        mask = additive_mask(mask, dtype)
    cos, sin = rope_tables(cfg, position_ids, dtype)
    return cos[:, :, None], sin[:, :, None], mask, causal  # (B, L, 1, hd): broadcast over heads


class _LastTables:
    """forward_tables of the last forward, reused while the next forward gets the same position-id and mask
    tensors (the same objects, unmodified) at the same precision: the reference and the policy forward of a
    microbatch, and each update's forward over the same batch, build them once.

    The entry holds its key tensors (so their ids cannot be reused while it lives); tensors made under
    inference_mode (no version counter) are never a key. The tables are built outside inference_mode, so a
    forward with autograd may save them whichever forward built them."""

    def __init__(self):
        self.key, self.keep, self.value = None, None, None

    def get(self, cfg, shape, device, dtype, position_ids, attention_mask):
        keys = (position_ids, attention_mask)
        if any(t is not None and t.is_inference() for t in keys):
            return forward_tables(cfg, shape, device, dtype, position_ids, attention_mask)
        key = (cfg, tuple(shape), str(device), dtype,
               *((id(t), t._version) if t is not None else None for t in keys))
        if key != self.key:
            with torch.inference_mode(False), torch.no_grad():
                self.value = forward_tables(cfg, shape, device, dtype, position_ids, attention_mask)
            self.key, self.keep = key, keys
        return self.value


_TABLES = _LastTables()


class TinyLM(nn.Module):
    """LlamaForCausalLM in plain torch (module docstring); the head is tied to the embedding."""

    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.config = cfg
        self.model = Body(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def get_decoder(self) -> Body:
        return self.model

    def packed_logprobs(self, mb, T: int, temperature: float, with_entropy: bool, entropy_grad: bool):
        """packed.micro_logprobs by llm_backend/tiny/train_kernel.py where it serves, else None (the torch
        path); packed.micro_logprobs asks only under LLMConfig.tiny_trainer "compiled"."""
        from llm_backend.tiny import train_kernel

        return train_kernel.packed_logprobs(self, mb, T, temperature, with_entropy, entropy_grad)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def forward(self, input_ids, attention_mask=None, position_ids=None, **_):
        h = self.model(input_ids, position_ids, attention_mask).last_hidden_state
        return SimpleNamespace(logits=self.lm_head(h))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def init_model(cfg: TinyConfig, seed: int) -> TinyLM:
    """A fresh model: normal(0, 0.02) weights as transformers' `_init_weights`, residual projections scaled
    by 1/sqrt(2 * layers) (GPT-2's rule, which trains small models faster); norms at 1."""
    gen = torch.Generator().manual_seed(int(seed))
    model = TinyLM(cfg)
    scale = 1.0 / math.sqrt(2 * cfg.num_hidden_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.fill_(1.0)
            else:
                std = 0.02 * (scale if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0)
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


WEIGHTS = "model.safetensors"


def save_folder(model: TinyLM, tokenizer, folder: str | Path, extra: dict | None = None) -> Path:
    """A Hugging Face folder: config.json, model.safetensors (tied head stored once, as transformers does),
    tokenizer files; `extra` goes to isocompute.json (how it was made). Written to a temporary name first."""
    import shutil

    from safetensors.torch import save_file

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(json.dumps(model.config.hf_config(), indent=1))
    state = {k: v.detach().cpu().float().contiguous().clone() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight")
    save_file(state, str(tmp / WEIGHTS), metadata={"format": "pt"})
    tokenizer.save_pretrained(tmp)
    if extra is not None:
        (tmp / "isocompute.json").write_text(json.dumps(extra, indent=1))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def is_tiny_folder(folder: str | Path) -> bool:
    """A saved tiny LM: a Llama config.json with our character tokenizer."""
    from llm_backend.tiny.tokenizer import is_char_folder

    folder = Path(folder)
    return (folder / "config.json").exists() and (folder / WEIGHTS).exists() and is_char_folder(folder)


def load_folder(folder: str | Path, device: str = "cpu") -> TinyLM:
    """The TinyLM of a saved folder (safetensors only; no pickle)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    cfg = TinyConfig.from_hf(json.loads((folder / "config.json").read_text()))
    model = TinyLM(cfg)
    state = load_file(str(folder / WEIGHTS))
    if cfg.tie_word_embeddings:
        state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])
    model.load_state_dict(state)
    return model.to(device)


SHIPPED: dict[str, str] = {"tiny": "e8735feb974cef7e1e81f88e9804745dc405c934ac161aed12bef52256c4aec3"}
"""sha256 of each shipped llm_backend/models/<name>/model.safetensors (`isocompute llm pretrain --lm <name>
--out llm_backend/models/<name>` regenerates a model of the same quality, not these bits: float results
differ across CPUs). tests/llm_backend/test_tiny_lm.py checks the files against these."""
