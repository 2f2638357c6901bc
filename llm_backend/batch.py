"""Training batches: one protocol for the padded and the packed layout, so the trainer is written once.

A batch holds S completions (rows of groups that share a prompt) as completion-aligned tensors
    comp_mask, engine_logp: (S, T)  which positions are completion tokens, and the engine's log-probs there
    adv: (S,)                       the advantage of each completion (llm_backend/loss.py `advantages`)
    sizes                           the group sizes in order (None: groups of the config's n)
and splits any range of whole groups [lo, hi) into `chunks(lo, hi)`, the microbatches one forward/backward
runs on. A chunk gives the log-probs (s, t) of its completions (`logprobs(model, temperature, ...)`) and
says which part of the batch's tensors they line up with: x[chunk.rows] for (S,) tensors,
x[chunk.rows, chunk.cols] for (S, T) ones. Layouts:
- padded (`PaddedBatch`, here): n padded sequences [prompt + completion] per group, `microbatch` sequences
  per chunk, bf16 by autocast; T = the longest sequence - 1 and each chunk trims its right padding.
- packed (`PackedBatch`, llm_backend/packed.py): each group's prompt once in shared rows, completion-only
  logits; bf16 by the trainer's MasterWeights; T = the longest completion.
Both give the same loss and gradient (tests/llm_backend/test_packed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from llm_backend.engines import autocast
from llm_backend.loss import advantages, group_advantages


class Chunk(Protocol):
    """One microbatch of a batch: its completions' log-probs and where they sit in the batch's tensors."""

    rows: slice | torch.Tensor
    cols: slice

    def logprobs(self, model, temperature: float, with_entropy: bool = False, entropy_grad: bool = True,
                 compiled: bool = True):
        """(logp, entropy or None), each (s, t): the log-probs of the chunk's tokens under logits / T;
        compiled: a tiny LM's packed chunk runs its compiled trainer (LLMConfig.tiny_trainer)."""


class TrainBatch(Protocol):
    comp_mask: torch.Tensor
    engine_logp: torch.Tensor
    adv: torch.Tensor
    sizes: tuple[int, ...] | None

    @property
    def num_sequences(self) -> int: ...

    def chunks(self, lo: int, hi: int) -> list[Chunk]: ...


@dataclass
class Group:
    """One drawn group: n_i completions of one prompt (token ids per completion) and their rewards (n_i,)."""

    prompt_ids: list
    token_ids: list
    logprobs: list
    rewards: np.ndarray


def build_batch(cfg, groups: list[Group], pad_id: int) -> TrainBatch | None:
    """The training batch of the kept groups in the layout of cfg.train_layout (None: no group kept).

    Advantages are normalised per group (loss.advantages on the (bp, n) rewards when the sizes agree, as the
    fixed path always had; loss.group_advantages otherwise)."""
    if not groups:
        return None
    rews = [g.rewards for g in groups]
    sizes = [len(r) for r in rews]
    if len(set(sizes)) == 1:
        adv = advantages(np.stack(rews), cfg.scale_rewards, cfg.adv_std, cfg.adv_eps).reshape(-1)
    else:
        adv = group_advantages(rews, cfg.scale_rewards, cfg.adv_std, cfg.adv_eps)
    pids = [x for g in groups for x in g.prompt_ids]
    tids = [x for g in groups for x in g.token_ids]
    lps = [x for g in groups for x in g.logprobs]
    if cfg.train_layout == "packed":
        from llm_backend.packed import make_packed_batch

        return make_packed_batch(pids, tids, lps, adv, sizes, pad_id, cfg.device, cfg.row_tokens,
                                 cfg.micro_tokens)
    return make_padded_batch(pids, tids, lps, adv, pad_id, cfg.device, sizes, cfg.microbatch, cfg.train_dtype)


def token_logprobs(
    model,
    input_ids,
    attention_mask,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = True,
):
    """Log-probs (S, L-1) of each next token under logits / temperature; optionally the entropy (S, L-1)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # log-softmax over 49k logits needs float32
    logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)  # (S, L-1, V)
    logp = logp_all.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return logp, None
    if entropy_grad:
        return logp, -(logp_all.exp() * logp_all).sum(-1)
    with torch.no_grad():  # logged only: two fewer (S, L, V) tensors kept for backward
        return logp, -(logp_all.exp() * logp_all).sum(-1)


@dataclass
class PaddedChunk:
    """Sequences `rows` of a PaddedBatch, right padding trimmed to their longest: input_ids, attention_mask
    (s, L); their log-probs line up with the batch's columns cols = [0, L-1)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    rows: slice
    cols: slice
    dtype: str

    def logprobs(self, model, temperature: float, with_entropy: bool = False, entropy_grad: bool = True,
                 compiled: bool = True):
        with autocast(str(self.input_ids.device), self.dtype):
            return token_logprobs(model, self.input_ids, self.attention_mask, temperature, with_entropy,
                                  entropy_grad)


@dataclass
class PaddedBatch:
    """Padded tensors of one training batch of S sequences (prompt + completion), right padding.

    input_ids, attention_mask: (S, L); comp_mask: (S, L-1) marks the positions whose *next* token is a
    completion token (what the loss sums over); engine_logp: (S, L-1), engine log-probs there (0 elsewhere);
    adv: (S,) advantages. sizes: group sizes in order (None = groups of the config's n). microbatch:
    sequences per chunk (memory only); dtype: "bfloat16" runs the forward passes under bf16 autocast.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    comp_mask: torch.Tensor
    engine_logp: torch.Tensor
    adv: torch.Tensor
    sizes: tuple[int, ...] | None = None
    microbatch: int = 16
    dtype: str = "float32"

    @property
    def num_sequences(self) -> int:
        return self.input_ids.shape[0]

    def chunks(self, lo: int, hi: int) -> list[PaddedChunk]:
        out = []
        for a in range(lo, hi, self.microbatch):
            sl = slice(a, min(a + self.microbatch, hi))
            ids, att = self.input_ids[sl], self.attention_mask[sl]
            L = int(att.sum(1).max())  # trim right padding of this chunk
            out.append(PaddedChunk(ids[:, :L], att[:, :L], sl, slice(0, L - 1), self.dtype))
        return out


def make_padded_batch(prompt_ids, token_ids, engine_logps, adv, pad_id: int, device="cpu", sizes=None,
                      microbatch: int = 16, dtype: str = "float32") -> PaddedBatch:
    """Pack lists of prompt ids, completion ids, engine log-probs and advantages into a PaddedBatch (`sizes`:
    the group sizes when they may differ)."""
    seqs = [list(p) + list(t) for p, t in zip(prompt_ids, token_ids, strict=True)]
    L = max(len(s) for s in seqs)
    S = len(seqs)
    ids = torch.full((S, L), pad_id, dtype=torch.long)
    att = torch.zeros((S, L), dtype=torch.long)
    cmask = torch.zeros((S, L - 1), dtype=torch.float32)
    elp = torch.zeros((S, L - 1), dtype=torch.float32)
    for i, (p, t, lp) in enumerate(zip(prompt_ids, token_ids, engine_logps, strict=True)):
        s = seqs[i]
        ids[i, : len(s)] = torch.tensor(s)
        att[i, : len(s)] = 1
        a, b = len(p) - 1, len(p) - 1 + len(t)  # logits at position j predict token j + 1
        cmask[i, a:b] = 1
        if len(t):
            elp[i, a:b] = torch.tensor(lp[: len(t)], dtype=torch.float32)
    return PaddedBatch(
        ids.to(device),
        att.to(device),
        cmask.to(device),
        elp.to(device),
        torch.as_tensor(np.asarray(adv), dtype=torch.float32).to(device),
        None if sizes is None else tuple(int(k) for k in sizes),
        microbatch,
        dtype,
    )
