"""The fast training layout: shared-prompt packing with completion-only logits.

A GRPO group is one prompt P with n completions c_1..c_n. The straightforward layout (batch.PaddedBatch)
runs n padded sequences [P + c_j], recomputing P n times and the 49k-vocabulary head at every position. Here
a group becomes one stretch of a packed row

    P  c_1[:-1]  c_2[:-1]  ...  c_n[:-1]

with position ids 0..|P|-1 for P and |P|.. for each completion, and a block attention mask (a tree): P is
causal, each c_j sees P and its own earlier tokens, never another completion or another group. So P is run
once (its activations, and the gradient flowing back into them from all n completions, are computed once:
one forward whose keys/values the n completions continue), there is no padding inside a row, and the head
and float32 log-softmax run only at the positions that predict completion tokens (the last prompt position
predicts every c_j[0]). Groups are packed into rows of at most `row_tokens` (first fit, longest first); a
group longer than a row is split, its prompt repeated once per part. Rows are batched into microbatches of
at most `micro_tokens` tokens (memory only: the loss is normalised by the whole update).

A PackedBatch is a training batch of llm_backend/batch.py's protocol: completion-aligned (S, T) tensors
(T = longest completion), the layout loss.grpo_loss takes, and its microbatches as chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch


@dataclass
class Micro:
    """One microbatch: R packed rows of length L and the completion tokens they predict.

    input_ids, position_ids: (R, L); attn: (R, 1, L, L) bool (True = may attend); src: (N,) flat index into
    R * L of the hidden state predicting each target; tgt: (N,) target token ids; seqs: (s,) global
    sequence indices covered; tok_row: (N,) row of each target among `seqs`; tok_t: (N,) its position in
    the completion; width: T of the batch. A chunk of batch.py's protocol: its log-probs (s, T) line up
    with the batch's rows `seqs` and all its columns.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attn: torch.Tensor
    src: torch.Tensor
    tgt: torch.Tensor
    seqs: torch.Tensor
    tok_row: torch.Tensor
    tok_t: torch.Tensor
    width: int
    real_tokens: int = 0
    """Tokens of the rows that are not padding (what the body's matmuls do useful work on)."""
    row_lengths: tuple = ()
    """Real tokens of each row (row r is padding from row_lengths[r] on)."""
    cache: dict = field(default_factory=dict, repr=False, compare=False)
    """What a model's own forward derives from the microbatch once (TinyLM: its compiled plan)."""
    cols = slice(None)

    @property
    def rows(self) -> torch.Tensor:
        return self.seqs

    def logprobs(self, model, temperature: float, with_entropy: bool = False, entropy_grad: bool = True,
                 compiled: bool = True):
        return micro_logprobs(model, self, self.width, temperature, with_entropy, entropy_grad,
                              compiled=compiled)


@dataclass
class PackedBatch:
    """A training batch in the packed layout; completion-aligned (S, T) tensors like batch.PaddedBatch.

    comp_mask, engine_logp: (S, T); adv: (S,); n: group size (sequences i*n .. i*n+n-1 share a prompt).
    sizes: the group sizes when they may differ (allocators; then n = sizes[0] if they agree,
    else 0); None = uniform groups of n. chunks(lo, hi) gives the microbatches of the sequences [lo, hi)
    (whole groups).
    """

    prompt_ids: list[list[int]]
    token_ids: list[list[int]]
    comp_mask: torch.Tensor
    engine_logp: torch.Tensor
    adv: torch.Tensor
    n: int
    row_tokens: int = 512
    micro_tokens: int = 2048
    pad_id: int = 0
    device: str = "cpu"
    sizes: tuple[int, ...] | None = None
    _plans: dict = field(default_factory=dict, repr=False)

    @property
    def num_sequences(self) -> int:
        return len(self.token_ids)

    @cached_property
    def _size_at(self) -> dict[int, int]:
        """{first sequence: size} of each group (given sizes), computed once."""
        out, g = {}, 0
        for k in self.sizes or ():
            out[g] = int(k)
            g += int(k)
        return out

    def group_starts(self, lo: int = 0, hi: int | None = None) -> list[int]:
        """First sequence of each group starting in [lo, hi)."""
        hi = self.num_sequences if hi is None else hi
        if self.sizes is None:
            return list(range(lo, hi, self.n))
        return [g for g in self._size_at if lo <= g < hi]

    def group_size(self, start: int) -> int:
        """Size of the group whose first sequence is `start`."""
        return self.n if self.sizes is None else self._size_at[start]

    def chunks(self, lo: int = 0, hi: int | None = None) -> list[Micro]:
        hi = self.num_sequences if hi is None else hi
        if (lo, hi) not in self._plans:
            self._plans[(lo, hi)] = _plan(self, lo, hi)
        return self._plans[(lo, hi)]


def make_packed_batch(
    prompt_ids, token_ids, engine_logps, adv, n, pad_id: int = 0, device="cpu",
    row_tokens: int = 512, micro_tokens: int = 2048,
) -> PackedBatch:
    """Pack prompt-major rollouts (groups of n consecutive sequences sharing a prompt) into a PackedBatch.

    n: the group size, or a sequence of group sizes in order when groups may differ (allocators)."""
    S = len(token_ids)
    sizes = None
    if isinstance(n, int | np.integer):
        n = int(n)
        if S % n:
            raise ValueError(f"{S} sequences are not whole groups of n = {n}")
        bounds = [(g, n) for g in range(0, S, n)]
    else:
        sizes = tuple(int(k) for k in n)
        if sum(sizes) != S or any(k < 1 for k in sizes):
            raise ValueError(f"group sizes {list(sizes)} do not cover the {S} sequences")
        n = sizes[0] if len(set(sizes)) == 1 else 0
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        bounds = list(zip((int(g) for g in starts), sizes, strict=True))
    for g, k in bounds:
        if any(list(prompt_ids[g + j]) != list(prompt_ids[g]) for j in range(k)):
            raise ValueError(f"sequences {g}..{g + k - 1} do not share one prompt")
    lens = [len(t) for t in token_ids]
    T = max(1, max(lens))
    # whole (S, T) tables from padded lists: one tensor each, not one write per sequence
    mask = torch.tensor([[1.0] * k + [0.0] * (T - k) for k in lens], dtype=torch.float32)
    elp = torch.tensor([[float(x) for x in lp[:k]] + [0.0] * (T - k)
                        for lp, k in zip(engine_logps, lens, strict=True)], dtype=torch.float32)
    return PackedBatch(
        [list(p) for p in prompt_ids], [list(t) for t in token_ids], mask.to(device), elp.to(device),
        torch.as_tensor(np.asarray(adv), dtype=torch.float32).to(device), n, row_tokens, micro_tokens,
        pad_id, device, sizes,
    )


def _pieces(pb: PackedBatch, lo: int, hi: int) -> list[tuple[list[int], list[int]]]:
    """(prompt, [sequence indices]) pieces of at most row_tokens tokens (a long group is split)."""
    out = []
    for g in pb.group_starts(lo, hi):
        prompt = pb.prompt_ids[g]
        cur, size = [], len(prompt)
        for i in range(g, min(g + pb.group_size(g), hi)):
            need = max(len(pb.token_ids[i]) - 1, 0)
            if cur and size + need > pb.row_tokens:
                out.append((prompt, cur))
                cur, size = [], len(prompt)
            cur.append(i)
            size += need
        if cur:
            out.append((prompt, cur))
    return out


def _plan(pb: PackedBatch, lo: int, hi: int) -> list[Micro]:
    pieces = _pieces(pb, lo, hi)
    sizes = [len(p) + sum(max(len(pb.token_ids[i]) - 1, 0) for i in seqs) for p, seqs in pieces]
    rows: list[list[int]] = []  # piece indices per row, first fit decreasing
    fill: list[int] = []
    for k in sorted(range(len(pieces)), key=lambda k: -sizes[k]):
        for r in range(len(rows)):
            if fill[r] + sizes[k] <= pb.row_tokens:
                rows[r].append(k)
                fill[r] += sizes[k]
                break
        else:
            rows.append([k])
            fill.append(sizes[k])
    # microbatches: rows (longest first) while R * L_max stays within micro_tokens
    order = sorted(range(len(rows)), key=lambda r: -fill[r])
    micros, cur = [], []
    for r in order:
        if cur and (len(cur) + 1) * fill[cur[0]] > pb.micro_tokens:
            micros.append(cur)
            cur = []
        cur.append(r)
    if cur:
        micros.append(cur)
    return [_build(pb, [[pieces[k] for k in rows[r]] for r in mb]) for mb in micros]


def _build(pb: PackedBatch, rows: list[list[tuple[list[int], list[int]]]]) -> Micro:
    """Tensors of one microbatch from its rows, each a list of (prompt, sequence indices) pieces."""
    toks, poss, grps, brs = [], [], [], []
    src, tgt, seq_of, tpos = [], [], [], []
    for r, pieces in enumerate(rows):
        ids, pos, grp, br = [], [], [], []
        for gi, (prompt, seqs) in enumerate(pieces):
            P = len(prompt)
            ids += prompt
            pos += range(P)
            grp += [gi] * P
            br += [-1] * P
            last_prompt = len(ids) - 1
            for j, i in enumerate(seqs):
                comp = pb.token_ids[i]
                start = len(ids)
                ids += comp[:-1]
                pos += range(P, P + len(comp) - 1)
                grp += [gi] * (len(comp) - 1)
                br += [j] * (len(comp) - 1)
                for t, tok in enumerate(comp):  # hidden state predicting comp[t]
                    src.append((r, last_prompt if t == 0 else start + t - 1))
                    tgt.append(tok)
                    seq_of.append(i)
                    tpos.append(t)
        toks.append(ids)
        poss.append(pos)
        grps.append(grp)
        brs.append(br)
    L = max(len(x) for x in toks)

    def padded(lists, fill):  # (R, L) from rows of unequal lengths: one tensor, not one write per row
        return torch.tensor([x + [fill] * (L - len(x)) for x in lists], dtype=torch.long)

    input_ids, position_ids = padded(toks, pb.pad_id), padded(poss, 0)
    G = padded(grps, 10**6)  # padding: its own block (attends to earlier padding only: never an empty row)
    B = padded(brs, -2)
    idx = torch.arange(L)
    causal = idx[None, :] <= idx[:, None]
    same = G[:, :, None] == G[:, None, :]
    branch = (B[:, None, :] == -1) | (B[:, None, :] == B[:, :, None])
    attn = (same & branch & causal[None]).unsqueeze(1)
    seqs = sorted(set(seq_of))
    local = {s: k for k, s in enumerate(seqs)}
    dev = pb.device
    return Micro(
        input_ids.to(dev),
        position_ids.to(dev),
        attn.to(dev),
        torch.tensor([r * L + i for r, i in src], dtype=torch.long, device=dev),
        torch.tensor(tgt, dtype=torch.long, device=dev),
        torch.tensor(seqs, dtype=torch.long, device=dev),
        torch.tensor([local[s] for s in seq_of], dtype=torch.long, device=dev),
        torch.tensor(tpos, dtype=torch.long, device=dev),
        pb.comp_mask.shape[1],
        sum(len(x) for x in toks),
        tuple(len(x) for x in toks),
    )


def micro_logprobs(model, mb: Micro, T: int, temperature: float = 1.0, with_entropy: bool = False,
                   entropy_grad: bool = True, vocab_chunk: int = 0, compiled: bool = True):
    """Log-probs (s, T) of the completion tokens of a microbatch (and the entropy there), completion-aligned.

    Only the body runs over the packed rows; the head and the float32 log-softmax run on the N hidden
    states that predict completion tokens. A model with its own `packed_logprobs` (TinyLM: compiled forward
    and backward) computes it where that returns a result, unless compiled is False
    (LLMConfig.tiny_trainer "torch").
    """
    own = getattr(model, "packed_logprobs", None) if compiled else None
    if own is not None and not vocab_chunk and (got := own(mb, T, temperature, with_entropy,
                                                            entropy_grad)) is not None:
        return got
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    h = body(input_ids=mb.input_ids, position_ids=mb.position_ids, attention_mask=mb.attn).last_hidden_state
    h = h.reshape(-1, h.shape[-1])[mb.src]  # (N, d)
    logits = model.get_output_embeddings()(h).float()  # (N, V) float32
    if temperature != 1.0:  # x / 1 is x (and so is its gradient): no op at the default temperature
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    lp = logp_all.gather(-1, mb.tgt[:, None]).squeeze(-1)
    s = mb.seqs.shape[0]
    out = torch.zeros((s, T), dtype=lp.dtype, device=lp.device).index_put((mb.tok_row, mb.tok_t), lp)
    if not with_entropy:
        return out, None
    ctx = torch.enable_grad() if entropy_grad else torch.no_grad()
    with ctx:
        ent_tok = -(logp_all.exp() * logp_all).sum(-1)
        ent = torch.zeros((s, T), dtype=ent_tok.dtype, device=lp.device)
        ent = ent.index_put((mb.tok_row, mb.tok_t), ent_tok)
    return out, ent
