"""Pretraining of the tiny LMs from scratch: supervised next-token training on "a op b=answer<eos>" text.

Why stopped early: RL needs a base model whose pass@1 is spread over (0, 1) across problems, as a real
base model's is; a model trained to convergence on easy cells and not at all on hard ones would give only
0s and 1s. Every batch draws its examples from all cells of llm_backend/tiny/tasks.py (operation x operand
digits) with weights `mix`, and training stops after `steps` updates: short sums are learned, long products
are not, and the cells in between land anywhere in (0, 1) (docs/tiny_lm/ shows the histogram).

Loss: cross-entropy on the answer tokens and EOS only (the prompt is given at RL time, so its tokens carry
no signal we need). Deterministic from `seed` on one machine (initialisation, data and dropout-free
training all come from seeded generators); float results differ across CPUs, hence the shipped weights
with their hash (llm_backend/tiny/model.py SHIPPED).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from llm_backend.tiny import tasks as tiny_tasks
from llm_backend.tiny.model import SIZES, TinyLM, init_model
from llm_backend.tiny.tokenizer import EOS_ID, PAD_ID, CharTokenizer


@dataclass(frozen=True)
class PretrainConfig:
    size: str = "tiny"
    steps: int = 3000
    batch: int = 256
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.0
    seed: int = 0
    cells: str = "pretrain"
    """Which cells the data draws from (uniformly): "pretrain" (tiny_tasks.PRETRAIN_CELLS) or "all"."""
    threads: int = 1
    """torch threads (0: torch's default). One: at this model size a step is many small ops, and a second
    OpenMP thread costs more in synchronisation than it gains (and much more on a shared machine)."""


def batch_tensors(rng: np.random.Generator, tok: CharTokenizer, batch: int, cells=tiny_tasks.CELLS):
    """(input_ids (B, L), target ids (B, L) with -100 outside answer + EOS) of `batch` fresh problems."""
    seqs, starts = [], []
    picks = rng.integers(0, len(cells), size=batch)
    for c in picks:
        op, a, b = cells[int(c)]
        x = int(rng.integers(0 if a == 1 else 10 ** (a - 1), 10**a))
        y = int(rng.integers(0 if b == 1 else 10 ** (b - 1), 10**b))
        q = tiny_tasks.question(op, x, y)
        ans = str(x + y if op == "add" else x - y if op == "sub" else x * y)
        seqs.append(tok.encode(q) + tok.encode(ans) + [EOS_ID])
        starts.append(len(q))
    L = max(len(s) for s in seqs)
    ids = torch.full((batch, L), PAD_ID, dtype=torch.long)
    tgt = torch.full((batch, L), -100, dtype=torch.long)
    for i, (s, p) in enumerate(zip(seqs, starts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        tgt[i, p - 1 : len(s) - 1] = torch.tensor(s[p:])  # logits at j predict token j + 1
    return ids, tgt


def lr_at(step: int, cfg: PretrainConfig) -> float:
    """Linear warmup, then constant: the model after s steps does not depend on the total, so stopping
    early is just stopping (a run of s steps is the prefix of a longer one)."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    return cfg.lr


def pretrain(cfg: PretrainConfig, progress: bool = False, log=None) -> tuple[TinyLM, dict]:
    """Train a fresh `cfg.size` model for cfg.steps updates; returns (model, facts about the run)."""
    if cfg.size not in SIZES:
        raise ValueError(f"unknown size {cfg.size!r}; choose one of {', '.join(SIZES)}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    tok = CharTokenizer()
    model = init_model(SIZES[cfg.size], cfg.seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=cfg.weight_decay)
    rng = np.random.default_rng([cfg.seed, 1])
    cells = tiny_tasks.PRETRAIN_CELLS if cfg.cells == "pretrain" else tiny_tasks.CELLS
    it = range(cfg.steps)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(it, desc=f"pretrain {cfg.size}", unit="step")
        it = bar
    t0 = time.perf_counter()
    ema = None
    for step in it:
        ids, tgt = batch_tensors(rng, tok, cfg.batch, cells)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        logits = model(ids).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        v = float(loss.detach())
        ema = v if ema is None else 0.98 * ema + 0.02 * v
        if bar is not None and step % 50 == 0:
            bar.set_postfix(loss=f"{ema:.3f}")
        if log is not None and (step + 1) % 250 == 0:
            log(step + 1, ema, model)
    model.eval()
    facts = {**asdict(cfg), "final_loss_ema": ema, "seconds": time.perf_counter() - t0,
             "parameters": model.num_parameters(), "torch": torch.__version__}
    return model, facts


DEFAULTS = {
    "tiny": PretrainConfig(size="tiny", steps=1500, batch=128, lr=3e-3),
    "small": PretrainConfig(size="small", steps=1000, batch=128, lr=2e-3),
}
"""The recipes of the shipped models (`isocompute llm pretrain --lm NAME` with no other flag)."""
