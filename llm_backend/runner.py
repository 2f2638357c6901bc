"""One GRPO run on a real LLM: rollouts -> rewards -> advantages -> AdamW step -> weight sync, with
log-spaced evaluations into the learning-curve table of docs/DESIGN.md and checkpoints a killed run resumes
from.

Randomness is derived from (seed, step, purpose) at every call, never carried as hidden state, so a run
resumed from a checkpoint at step s draws exactly what the uninterrupted run drew after s (HF engine; vLLM
on the CPU takes only an engine-wide seed, docs/LLM_NOTES.md, so its rollouts are not reproducible across a
resume).
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from llm_backend import allocators, tasks
from llm_backend.config import ZERO_PASS1, ConfigError, LLMConfig
from llm_backend.model import cache_root, default_model_dir, is_tiny, resolve_model, tiny_name

PACKAGED_SPLITS = Path(__file__).resolve().parent / "data"
"""Committed splits calibrated on SmolLM2-135M-Instruct (`isocompute llm calibrate`, see data/README.md)."""

TABLE_COLUMNS = (
    "backend",
    "model",
    "dataset",
    "seed",
    "n",
    "bp",
    "batch",
    "m",
    "compute",
    "tokens",
    "epoch",
    "lr",
    "k",
    "train_mean",
    "train_best_k",
    "train_worst_k",
    "train_zero_frac",
    "batch_reward",
    "val_mean",
    "val_best_k",
    "val_worst_k",
    "val_zero_frac",
    "entropy",
    "kl",
    "grad_norm",
    "response_len",
    "zero_var_frac",
)


@dataclass
class LLMResult:
    """Output of one run, shaped like sandbox.SimResult (docs/CONTRACTS.md) plus the per-step log."""

    config: LLMConfig
    table: dict[str, np.ndarray]
    pass1: dict[str, np.ndarray]
    steps: list[dict] = field(default_factory=list)
    status: str = "ok"
    diverged_step: int | None = None
    reason: str | None = None

    def save(self, out_dir: str | Path) -> Path:
        """Write table.csv, steps.csv, pass1.csv (tidy) and config.json into out_dir."""
        import pandas as pd

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)

        def write(path: Path, text: str) -> None:  # atomic: a crash leaves the old file or the new one
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)

        write(out / "table.csv", pd.DataFrame(self.table).to_csv(index=False))
        write(out / "steps.csv", pd.DataFrame(self.steps).to_csv(index=False))
        rows = [
            {"compute": int(c), "split": "val", "problem": j, "pass1": float(p)}
            for c, vec in zip(self.pass1["compute"], self.pass1["val"], strict=True)
            for j, p in enumerate(vec)
        ]
        write(out / "pass1.csv", pd.DataFrame(rows).to_csv(index=False))
        write(
            out / "config.json",
            json.dumps(
                {
                    "config": self.config.to_dict(),
                    "status": self.status,
                    "diverged_step": self.diverged_step,
                    "reason": self.reason,
                },
                indent=1,
            ),
        )
        return out


def _seed(*parts) -> int:
    """A 32-bit seed derived from (seed, step, purpose, ...): explicit randomness, no global state."""
    ints = [
        p if isinstance(p, int) else int.from_bytes(str(p).encode()[:8].ljust(8, b"\0"), "little")
        for p in parts
    ]
    return int(np.random.SeedSequence(ints).generate_state(1)[0])


MIXES = {"dual": (("hard", 0.5), ("easy", 0.5)), "tri": (("hard", 0.5), ("easy", 0.25), ("veasy", 0.25))}
"""Mixed presets as the simulator's (sandbox/problems.py): shares of calibrated splits."""


def _mix(sets: list[list], shares: list[float]) -> list:
    """The largest mixture with these shares that the sets allow, in a seeded (fixed) interleaved order."""
    total = min(int(len(s) / w) for s, w in zip(sets, shares, strict=True))
    out = [p for s, w in zip(sets, shares, strict=True) for p in s[: int(round(total * w))]]
    return [out[i] for i in np.random.default_rng(0).permutation(len(out))]


def load_problems(cfg: LLMConfig) -> tuple[list[tasks.Problem], list[tasks.Problem]]:
    """Train and validation problems; they depend on the data fields, never on `seed` (paired runs)."""
    tiny = is_tiny(cfg.model)
    if cfg.dataset == "arith" and tiny:  # the tiny family's cells of `digits` x `digits`, `operations`
        from llm_backend import tiny_tasks

        names = {"+": "add", "-": "sub", "*": "mul"}
        cells = [(names[o], cfg.digits, cfg.digits) for o in cfg.operations]
        allp = tiny_tasks.suite(2 * (cfg.d or 64) + 2 * (cfg.d_val or 16), 1, cells)
        train, val = allp[: cfg.d or 64], allp[cfg.d or 64 :][: cfg.d_val or 16]
    elif cfg.dataset == "arith":
        d = cfg.d or 64
        train = tasks.generate_arithmetic(d, 1, cfg.digits, cfg.terms, cfg.operations)
        seen = {p.question for p in train}
        pool = tasks.generate_arithmetic(4 * (cfg.d_val or 16) + 64, 2, cfg.digits, cfg.terms, cfg.operations)
        val = [p for p in pool if p.question not in seen][: cfg.d_val or 16]
    elif cfg.dataset.endswith(".jsonl"):
        allp = tasks.load_jsonl(cfg.dataset)
        order = np.random.default_rng(0).permutation(len(allp))
        n_val = min(cfg.d_val or max(1, len(allp) // 5), len(allp) - 1)
        val = [allp[i] for i in order[:n_val]]
        train = [allp[i] for i in order[n_val:]]
    else:
        # a tiny LM's splits are calibrated on it: a folder's own <folder>/splits, else <cache>/splits/<name>
        # and the shipped data/<name>
        sub = (tiny_name(cfg.model) or "tiny") if tiny else ""
        roots = [Path(cfg.data_dir)] if cfg.data_dir else [
            cache_root() / "splits" / sub if sub else cache_root() / "splits", PACKAGED_SPLITS / sub]
        if tiny and not cfg.data_dir and not tiny_name(cfg.model):
            roots.insert(0, Path(cfg.model).expanduser() / "splits")
        parts = MIXES.get(cfg.dataset, ((cfg.dataset, 1.0),))
        split_sets = []
        for name, _ in parts:
            have = [r for r in roots if (r / f"{name}.train.jsonl").exists()
                    and (r / f"{name}.val.jsonl").exists()]
            if not have:
                raise ConfigError(
                    f"no calibrated split {name!r} in {roots[0]}; run `isocompute llm calibrate` first"
                )
            root = have[0]
            split_sets.append((tasks.load_jsonl(root / f"{name}.train.jsonl"),
                               tasks.load_jsonl(root / f"{name}.val.jsonl")))
        if len(parts) == 1:
            train, val = split_sets[0]
        else:
            shares = [w for _, w in parts]
            train = _mix([s[0] for s in split_sets], shares)
            val = _mix([s[1] for s in split_sets], shares)
    if cfg.d:
        train = train[: cfg.d]
    if cfg.d_val:
        val = val[: cfg.d_val]
    if not train or not val:
        raise ConfigError(
            f"dataset {cfg.dataset!r} gives {len(train)} train / {len(val)} val problems; need both"
        )
    return train, val


def eval_steps(m: int, n_evals: int) -> list[int]:
    """m = 0 plus `n_evals` log-spaced steps in [1, m] (rounded, unique), always including m."""
    if m == 0:
        return [0]
    pts = np.unique(np.round(np.geomspace(1, m, n_evals)).astype(int)) if n_evals > 1 else np.array([m])
    return sorted({0, *map(int, pts), m})


def _problem_order(cfg: LLMConfig, step: int, d: int) -> list[int]:
    """Indices of the bp problems of `step` (1-based): a fresh seeded permutation per epoch."""
    out = []
    for j in range(cfg.bp):
        idx = (step - 1) * cfg.bp + j
        epoch, pos = divmod(idx, d)
        out.append(int(np.random.default_rng([cfg.seed, epoch]).permutation(d)[pos]))
    return out


class _Checkpointer:
    """Latest-only checkpoints: model.safetensors + optimizer.pt (weights_only loading) + state.json."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def latest(self) -> Path | None:
        if not self.root.exists():
            return None
        done = sorted(
            (p for p in self.root.glob("ckpt-*") if (p / "state.json").exists()),
            key=lambda p: int(p.name.split("-")[1]),
        )
        return done[-1] if done else None

    def save(self, step: int, model, optimizer, state: dict) -> Path:
        import torch
        from safetensors.torch import save_file

        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-ckpt-{step}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        # clone: tied embeddings share storage, which save_file refuses
        save_file(
            {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()},
            str(tmp / "model.safetensors"),
        )
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        (tmp / "state.json").write_text(json.dumps(state))  # written last
        final = self.root / f"ckpt-{step}"
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in self.root.glob("ckpt-*"):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        return final

    @staticmethod
    def load(path: Path, model, optimizer, device: str) -> dict:
        import torch
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(path / "model.safetensors"), device=str(device)))
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True, map_location=device))
        return json.loads((path / "state.json").read_text())


def train_eval_sample(train: list, cfg: LLMConfig) -> list:
    """The fixed training problems whose pass@1 estimates train_* (min(d, d_val) of them; same for all
    seeds and runs of a split, so paired); empty when cfg.train_eval is off."""
    if not cfg.train_eval:
        return []
    size = min(len(train), cfg.d_val or len(train))
    idx = np.sort(np.random.default_rng(0).permutation(len(train))[:size])
    return [train[i] for i in idx]


def _metrics(r: np.ndarray, prefix: str) -> dict:
    """mean (avg@k), best_k (pass@k), worst_k (all k correct), zero_frac of rewards (problems, k)."""
    p1 = r.mean(1)
    return {
        f"{prefix}_mean": float(p1.mean()),
        f"{prefix}_best_k": float((r.max(1) > 0).mean()),
        f"{prefix}_worst_k": float((r.min(1) > 0).mean()),
        f"{prefix}_zero_frac": float((p1 < ZERO_PASS1).mean()),
    }


def _evaluate(engine, tok, val, cfg: LLMConfig, step: int, train_sample=()) -> tuple[dict, np.ndarray, ...]:
    """k samples per validation problem (and per problem of the fixed train sample), one generate call.

    Returns the val_* and train_* metrics (train_* NaN without a train sample) and both pass@1 vectors.
    Evaluation rollouts are not counted as compute.
    """
    probs = list(val) + list(train_sample)
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    ro = engine.generate(
        prompts, cfg.k, cfg.max_new_tokens, cfg.temperature, cfg.top_p, seed=_seed(cfg.seed, step, "eval")
    )
    r = np.array([tasks.reward(t, probs[i // cfg.k].answer) for i, t in enumerate(ro.texts)])
    r = r.reshape(-1, cfg.k)
    rv, rt = r[: len(val)], r[len(val) :]
    out = _metrics(rv, "val")
    if len(rt):
        out.update(_metrics(rt, "train"))
    else:
        out.update({f"train_{k}": math.nan for k in ("mean", "best_k", "worst_k", "zero_frac")})
    return out, rv.mean(1), rt.mean(1)


def _config_key(cfg: LLMConfig) -> dict:
    d = cfg.to_dict()
    if d.get("allocator") == "fixed":  # checkpoints of runs from before the field still resume
        del d["allocator"]
    for k in (
        "checkpoint_dir",
        "checkpoint_every",
        "engine",
        "device",
        "gpu_memory_utilization",
        "microbatch",
        "micro_tokens",
        "row_tokens",
    ):
        d.pop(k)
    return d


def engine_options(cfg: LLMConfig) -> dict:
    """The keyword arguments of make_engine that come from a config (vLLM-only ones only for vLLM)."""
    opts = {"device": cfg.device, "dtype": cfg.engine_dtype}
    if cfg.engine == "vllm":
        opts.update(
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            max_model_len=cfg.max_model_len,
            kv_cache_gib=cfg.kv_cache_gib or None,
        )
    return opts


def _fixed_step(cfg: LLMConfig, step: int, train, tok, engine, grpo, make_packed_batch):
    """Today's step (allocator fixed): bp problems of the epoch order x n rollouts in one generate call.
    Returns (batch, rollouts drawn, tokens, mean reward, zero-variance share, allocator info, t0, t1)."""
    idx = _problem_order(cfg, step, len(train))
    probs = [train[i] for i in idx]
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    t0 = time.perf_counter()
    ro = engine.generate(
        prompts,
        cfg.n,
        cfg.max_new_tokens,
        cfg.temperature,
        cfg.top_p,
        seed=_seed(cfg.seed, step, "rollout"),
    )
    t1 = time.perf_counter()
    rew = np.array([tasks.reward(t, probs[i // cfg.n].answer) for i, t in enumerate(ro.texts)])
    rew = rew.reshape(cfg.bp, cfg.n)
    adv = grpo.advantages(rew, cfg.scale_rewards, cfg.adv_std, cfg.adv_eps).reshape(-1)
    if cfg.train_layout == "packed":
        batch = make_packed_batch(
            ro.prompt_ids, ro.token_ids, ro.logprobs, adv, cfg.n, tok.pad_token_id, cfg.device,
            cfg.row_tokens, cfg.micro_tokens,
        )
    else:
        batch = grpo.make_batch(
            ro.prompt_ids, ro.token_ids, ro.logprobs, adv, tok.pad_token_id, cfg.device
        )
    drawn = len(ro.token_ids)
    info = {"rollouts": drawn, "groups_drawn": cfg.bp, "groups_kept": cfg.bp, "rounds": 1,
            "n_min": cfg.n, "n_max": cfg.n}
    zero_var = float((rew == rew[:, :1]).all(1).mean())
    return batch, drawn, ro.num_tokens, float(rew.mean()), zero_var, info, t0, t1


@dataclass
class _AllocStep:
    """One step planned by an allocator: the training batch of its kept groups (None: none kept, no update)
    and what it drew."""

    batch: object | None
    drawn: int
    tokens: int
    reward: float
    zero_var_frac: float
    info: dict


def _allocated_step(alloc, cfg: LLMConfig, step: int, spent: int, stream, history, engine, tok, train,
                    device_batch) -> _AllocStep | None:
    """Draws of one step as `alloc` plans them (llm_backend/allocators.py), graded, recorded in `history`,
    the kept groups made into a training batch; None when the budget leaves no room for a step.

    Draw r of the step is seeded by (seed, step, "rollout", r), draw 0 exactly as the fixed path's step.
    """
    from llm_backend import grpo
    from llm_backend.engines import generate_groups

    ctx = allocators.StepContext(step, spent, cfg.budget, cfg.n, cfg.bp, stream, history,
                                 np.random.default_rng(_seed(cfg.seed, step, "allocator")))
    kept: list[tuple] = []  # (prompt_ids, token_ids, logprobs, rewards) per kept group
    drawn_rewards: list[np.ndarray] = []
    n_tok, ns = 0, []
    while (draw := alloc.propose(ctx)) is not None:
        probs = [train[i] for i in draw.problems]
        prompts = [tasks.build_prompt(tok, p.question) for p in probs]
        seed = _seed(cfg.seed, step, "rollout") if ctx.rounds == 0 else _seed(cfg.seed, step, "rollout",
                                                                             ctx.rounds)
        ro = generate_groups(engine, prompts, draw.ns, cfg.max_new_tokens, cfg.temperature, cfg.top_p,
                             seed=seed)
        groups, off = [], 0
        for g, p, k in zip(draw.problems, probs, draw.ns, strict=True):
            sl = slice(off, off + k)
            off += k
            r = np.array([tasks.reward(t, p.answer) for t in ro.texts[sl]])
            history.record(g, r, alloc.ema)  # every drawn group, kept or not
            groups.append((ro.prompt_ids[sl], ro.token_ids[sl], ro.logprobs[sl], r))
        if off != len(ro.token_ids):
            raise RuntimeError(f"engine returned {len(ro.token_ids)} rollouts for a draw of {off}")
        keep = alloc.keep(ctx, draw, [gr[3] for gr in groups])
        kept += [gr for gr, k in zip(groups, keep, strict=True) if k]
        drawn_rewards += [gr[3] for gr in groups]
        ns += list(draw.ns)
        n_tok += ro.num_tokens
        ctx.drawn += len(ro.token_ids)
        ctx.kept += int(sum(keep))
        ctx.rounds += 1
        ctx.draws.append(draw)
    if ctx.rounds == 0:
        return None
    zero_var = float(np.mean([not allocators.has_signal(r) for r in drawn_rewards]))
    info = {"rollouts": ctx.drawn, "groups_drawn": len(drawn_rewards), "groups_kept": len(kept),
            "rounds": ctx.rounds, "n_min": int(min(ns)), "n_max": int(max(ns))}
    if not kept:
        reward = float(np.concatenate(drawn_rewards).mean())
        return _AllocStep(None, ctx.drawn, n_tok, reward, zero_var, info)
    rews = [gr[3] for gr in kept]
    sizes = [len(r) for r in rews]
    if len(set(sizes)) == 1:  # the uniform path's advantages
        adv = grpo.advantages(np.stack(rews), cfg.scale_rewards, cfg.adv_std, cfg.adv_eps).reshape(-1)
    else:
        adv = grpo.group_advantages(rews, cfg.scale_rewards, cfg.adv_std, cfg.adv_eps)
    pids = [x for gr in kept for x in gr[0]]
    tids = [x for gr in kept for x in gr[1]]
    lps = [x for gr in kept for x in gr[2]]
    batch = device_batch(pids, tids, lps, adv, sizes)
    return _AllocStep(batch, ctx.drawn, n_tok, float(np.concatenate(rews).mean()), zero_var, info)


def run(cfg: LLMConfig, progress: bool = False, stop_after: int | None = None, engine=None) -> LLMResult:
    """Run GRPO for m = budget // (bp * n) steps; evaluate at eval_steps(m, n_evals).

    Under an allocator other than fixed (cfg.allocator) steps cost what the allocator drew: the run goes on
    while the rollouts spent are below m * bp * n and the next step's first draw fits in the budget (a
    refill only when it fits too), so it never exceeds the budget; it evaluates after the first step whose
    cumulative rollouts reach each point bp * n * eval_steps(m, n_evals), and after its last step.

    `stop_after` ends the run after that many steps (as if killed right after a checkpoint; for tests).
    `engine` reuses a started engine of the same model: its weights are synced from this run's policy first
    and it is left open. engine=None with cfg.engine "vllm" takes the process's cached engine for this
    model and engine options (engines.cached_engine; started once, left open for the next run).
    """
    import torch

    if cfg.engine == "kv":
        # a tiny LM's step is thousands of small ops: one torch thread (the caller's count is restored), as
        # pretraining uses; a second OpenMP thread mostly synchronises, and spins on a busy machine
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return _run(cfg, progress, stop_after, engine)
        finally:
            torch.set_num_threads(threads)
    return _run(cfg, progress, stop_after, engine)


def _run(cfg: LLMConfig, progress: bool = False, stop_after: int | None = None, engine=None) -> LLMResult:
    import torch

    from llm_backend import grpo
    from llm_backend.engines import cached_engine, make_engine
    from llm_backend.model import load_model, load_tokenizer
    from llm_backend.packed import make_packed_batch

    path = resolve_model(cfg.model, cfg.cache_dir)
    model_name = Path(cfg.model).name if cfg.model else default_model_dir(cfg.cache_dir).name  # tiny: "tiny"
    train, val = load_problems(cfg)
    tok = load_tokenizer(path)
    model = load_model(path, cfg.device)
    model.train()
    lr = cfg.effective_lr()
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
    )
    mixed = None
    if cfg.train_layout == "packed" and cfg.train_dtype == "bfloat16":
        mixed = grpo.MasterWeights(model)  # refreshed after a checkpoint load below
    ref = None
    if cfg.kl_coef > 0:
        ref = load_model(path, cfg.device).eval().requires_grad_(False)
        if mixed is not None:
            ref = ref.to(torch.bfloat16)  # the policy's precision: rounding alone puts no floor under the KL

    M, evals = cfg.steps, eval_steps(cfg.steps, cfg.n_evals)
    rows: list[dict] = []
    steps_log: list[dict] = []
    snaps: list[list[float]] = []
    snaps_train: list[list[float]] = []
    start, tokens = 0, 0
    alloc = None if cfg.allocator == "fixed" else allocators.make(cfg.allocator, cfg.n, cfg.bp)
    spent = 0
    stream = allocators.ProblemStream(cfg.seed, len(train))
    history = allocators.History.empty(len(train))
    ckpt = _Checkpointer(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    if ckpt and (latest := ckpt.latest()) is not None:
        state = _Checkpointer.load(latest, model, opt, cfg.device)
        if state["config"] != _config_key(cfg):
            raise ConfigError(
                f"checkpoint {latest} belongs to a different config; use another checkpoint_dir"
            )
        start, tokens, rows, steps_log, snaps, snaps_train = (
            state["step"],
            state["tokens"],
            state["rows"],
            state["steps"],
            state["snaps"],
            state["snaps_train"],
        )
        spent = start * cfg.batch
        if alloc is not None:
            spent, stream.pos = state["alloc"]["spent"], state["alloc"]["pos"]
            history = allocators.History.from_state(state["alloc"]["history"])

    if mixed is not None:
        mixed.refresh()
    own_engine = engine is None and cfg.engine != "vllm"
    t_engine = time.perf_counter()
    if engine is None and cfg.engine == "vllm":  # one engine per process, shared by the runs of a sweep
        opts = {k: v for k, v in engine_options(cfg).items() if k != "device"}
        engine = cached_engine(model, tok, str(path), seed=cfg.seed, **opts)
    elif engine is None:
        engine = make_engine(cfg.engine, model, tok, str(path), seed=cfg.seed, **engine_options(cfg))
    else:
        engine.sync_weights(model)
    t_engine = time.perf_counter() - t_engine
    base = {
        "backend": "llm",
        "model": model_name,
        "dataset": cfg.dataset,
        "seed": cfg.seed,
        "n": cfg.n,
        "bp": cfg.bp,
        "batch": cfg.batch,
        "lr": lr,
        "k": cfg.k,
    }
    status, div_step, reason = "ok", None, None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=M, initial=start, desc=f"llm n={cfg.n} bp={cfg.bp}", leave=False)
        bar.write(f"llm: engine {cfg.engine} ({cfg.engine_dtype}) ready in {t_engine:.1f} s; {M} steps of "
                  f"{cfg.batch} rollouts, {len(evals)} evaluations of {len(val)} problems x k = {cfg.k}",
                  file=sys.stderr)

    def say(line: str) -> None:
        """One progress line per phase with --progress (issue 28: a bar at 0/M for minutes said nothing)."""
        if bar is not None:
            bar.write(line, file=sys.stderr)  # beside the bar; stdout stays for results

    train_sample = train_eval_sample(train, cfg)

    def record(step: int, last: dict | None) -> None:
        say(f"llm: step {step}/{M}: evaluating {len(val) + len(train_sample)} problems x {cfg.k} samples")
        t_eval = time.perf_counter()
        metrics, p1, p1_train = _evaluate(engine, tok, val, cfg, step, train_sample)
        t_eval = time.perf_counter() - t_eval
        say(f"llm: step {step}/{M}: val_mean {metrics['val_mean']:.3f} ({t_eval:.1f} s)")
        nan = math.nan
        rows.append(
            {
                **base,
                "m": step,
                "compute": spent,
                "tokens": tokens,
                "epoch": step * cfg.bp / len(train),
                **metrics,
                "batch_reward": last["reward"] if last else nan,
                "entropy": last["entropy"] if last else nan,
                "kl": last["kl"] if last else nan,
                "grad_norm": last["grad_norm"] if last else nan,
                "response_len": last["response_len"] if last else nan,
                "zero_var_frac": last["zero_var_frac"] if last else nan,
            }
        )
        snaps.append([float(x) for x in p1])
        snaps_train.append([float(x) for x in p1_train])

    def device_batch(pids, tids, lps, adv, sizes):
        if cfg.train_layout == "packed":
            return make_packed_batch(pids, tids, lps, adv, sizes, tok.pad_token_id, cfg.device,
                                     cfg.row_tokens,
                                     cfg.micro_tokens)
        return grpo.make_batch(pids, tids, lps, adv, tok.pad_token_id, cfg.device, sizes=sizes)

    target = M * cfg.batch  # the fixed path's compute at its last step
    pending = [s * cfg.batch for s in evals if s * cfg.batch > spent]  # allocators: compute points to reach
    last = None
    try:
        if start == 0:
            record(0, None)
        for step in range(start + 1, M + 1) if alloc is None else itertools.count(start + 1):
            if alloc is not None:
                if spent >= target:
                    break
                t0 = time.perf_counter()
                planned = _allocated_step(alloc, cfg, step, spent, stream, history, engine, tok, train,
                                          device_batch)
                if planned is None:  # the budget has no room for another step
                    break
                t1 = time.perf_counter()
                batch, drawn, n_tok = planned.batch, planned.drawn, planned.tokens
                step_reward, zero_var, alloc_info = planned.reward, planned.zero_var_frac, planned.info
            else:
                batch, drawn, n_tok, step_reward, zero_var, alloc_info, t0, t1 = _fixed_step(
                    cfg, step, train, tok, engine, grpo, make_packed_batch)
            if batch is not None:
                agg = grpo.train_step(model, opt, batch, cfg, ref, mixed)
            else:  # every group discarded (dynamic-sampling): no update, the rollouts still count
                agg = {"loss": math.nan, "tokens": 0.0, "grad_norm": math.nan, "updates": 0, "finite": True,
                       **{k: math.nan for k in grpo.STAT_KEYS}}
            gn = agg["grad_norm"]
            if not agg["finite"]:
                status, div_step, reason = (
                    "diverged",
                    step,
                    f"non-finite loss {agg['loss']} or grad norm {gn}",
                )
                break
            t2 = time.perf_counter()
            # a bf16 engine takes the bf16 compute copy as it is (no cast)
            bf16_copy = mixed is not None and cfg.engine == "vllm" and cfg.engine_dtype == "bfloat16"
            sync_s = engine.sync_weights(mixed.compute if bf16_copy else model) if batch is not None else 0.0
            t3 = time.perf_counter()
            spent = step * cfg.batch if alloc is None else spent + drawn
            tokens += n_tok
            per_tok = max(agg["tokens"], 1)
            last = {
                "step": step,
                "compute": spent,
                "tokens": tokens,
                "reward": step_reward,
                "entropy": agg["entropy_sum"] / per_tok,
                "kl": agg["kl_sum"] / per_tok if ref is not None else math.nan,
                "grad_norm": gn,
                "response_len": n_tok / drawn,
                "loss": agg["loss"],
                "updates": agg["updates"],
                "clip_frac": agg["clip_sum"] / per_tok,
                "approx_kl": agg["approx_kl_sum"] / per_tok,
                "tis_mean": agg["tis_sum"] / per_tok,
                "tis_clip_frac": agg["tis_clipped"] / per_tok,
                "logp_mismatch": agg["mismatch_abs_sum"] / per_tok,
                "zero_var_frac": zero_var,
                **alloc_info,
                "t_rollout": t1 - t0,
                "t_train": t2 - t1,
                "t_sync": sync_s,
                "t_step": t3 - t0,
            }
            steps_log.append(last)
            roll_s = max(t1 - t0, 1e-9)
            say(f"llm: step {step}/{M}: rollout {roll_s:.1f} s ({n_tok / roll_s:.0f} tokens/s, {drawn} "
                f"completions), train {t2 - t1:.1f} s, sync {sync_s:.2f} s, reward {step_reward:.3f}")
            if alloc is None:
                if step in evals:
                    record(step, last)
            elif pending and spent >= pending[0]:
                record(step, last)
                pending = [c for c in pending if c > spent]
            if bar is not None:
                bar.update(1)
                bar.set_postfix(reward=f"{last['reward']:.2f}")
            if ckpt and cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
                state = {
                    "step": step,
                    "tokens": tokens,
                    "rows": rows,
                    "steps": steps_log,
                    "snaps": snaps,
                    "snaps_train": snaps_train,
                    "config": _config_key(cfg),
                }
                if alloc is not None:
                    state["alloc"] = {"spent": spent, "pos": stream.pos, "history": history.state()}
                ckpt.save(step, model, opt, state)
            if stop_after is not None and step >= stop_after:
                break
        if alloc is not None and status == "ok" and last is not None and rows[-1]["m"] != last["step"] \
                and (stop_after is None or last["step"] < stop_after):
            record(last["step"], last)  # the budget ended the run between evaluation points
    finally:
        if bar is not None:
            bar.close()
        if own_engine:
            engine.close()

    table = {c: np.array([r[c] for r in rows]) for c in TABLE_COLUMNS}
    pass1 = {
        "compute": table["compute"].copy(),
        "train": np.array(snaps_train, dtype=np.float32).reshape(len(rows), len(train_sample)),
        "val": np.array(snaps, dtype=np.float32).reshape(len(rows), len(val)),
    }
    res = LLMResult(cfg, table, pass1, steps_log, status, div_step, reason)
    res.model = model  # the trained module, for callers and tests (not serialised)
    return res
