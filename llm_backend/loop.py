"""One GRPO run on a real LLM, top to bottom: choose problems (the allocator; fixed n is one), roll out,
score, build the training batch, update, sync the engine's weights, evaluate on the log-spaced schedule of
docs/DESIGN.md, checkpoint (a killed run resumes from the latest checkpoint).

Randomness is derived from (seed, step, purpose) at every call (engines.derive_seed), never carried as hidden
state, so a run resumed from a checkpoint at step s draws exactly what the uninterrupted run drew after s
(HF and kv engines; vLLM on the CPU takes only an engine-wide seed, docs/LLM_NOTES.md, so its rollouts are
not reproducible across a resume).
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isocompute.contract import status
from isocompute.contract.progress import Progress
from llm_backend import allocators, evaluation, tasks
from llm_backend.batch import Group, build_batch
from llm_backend.checkpoint import Checkpointer, config_key
from llm_backend.config import ConfigError, LLMConfig
from llm_backend.engines import derive_seed
from llm_backend.model import default_model_dir, load_tokenizer, resolve_model
from llm_backend.problems import load_problems, train_eval_sample
from llm_backend.results import Curve, LLMResult
from llm_backend.trainer import Trainer


def run(cfg: LLMConfig, progress: bool = False, stop_after: int | None = None, engine=None) -> LLMResult:
    """Run GRPO for m = budget // (bp * n) steps' worth of rollouts; evaluate at cfg.eval_points().

    Steps cost what the allocator (cfg.allocator) drew: the run goes on while the rollouts spent are below
    m * bp * n and the next step's first draw fits in the budget (a refill only when it fits too), so it
    never exceeds the budget; it evaluates after the first step whose cumulative rollouts reach each point
    of cfg.eval_points() (bp * n * eval_steps(m, n_evals), or the absolute grid from cfg.eval_from), and
    after its last step. With cfg.keep_final a finished run hands back its final state (LLMResult.final).

    `stop_after` ends the run after that many steps (as if killed right after a checkpoint; for tests).
    `engine` reuses a started engine of the same model: its weights are synced from this run's policy first
    and it is left open. engine=None with cfg.engine "vllm" takes the process's cached engine for this
    model and engine options (engines.cached_engine; started once, left open for the next run).
    """
    with _torch_threads(cfg), _frozen_heap():
        path = resolve_model(cfg.model, cfg.cache_dir, cfg.family)
        train, val = load_problems(cfg)
        tok = load_tokenizer(path, cfg.family)
        trainer = Trainer(cfg, path)
        ckpt = Checkpointer(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        state = RunState.resume(cfg, len(train), ckpt, trainer)
        alloc = allocators.make(cfg.allocator, cfg.n, cfg.bp)
        engine, own_engine, t_engine = _open_engine(cfg, trainer, tok, path, engine)
        log = _Log(cfg, progress, state, len(val), t_engine)
        evaluator = Evaluator(cfg, engine, tok, train, val, log)
        due = [c for c in cfg.eval_points() if c > state.spent]  # in rollouts spent
        outcome, last = (status.DONE, None, None), None
        try:
            if state.step == 0:
                evaluator.record(state, None)
            while state.spent < cfg.steps * cfg.batch:
                step = state.step + 1
                t0 = time.perf_counter()
                log.phase(f"step {step}: drawing rollouts")  # a step of many rollouts takes minutes
                drawn = draw_step(alloc, cfg, step, state, engine, tok, train)
                if drawn is None:  # the budget has no room for another step
                    break
                log.phase(f"step {step}: training on {drawn.rollouts:,} rollouts")
                batch = build_batch(cfg, drawn.kept, tok.pad_token_id)
                t1 = time.perf_counter()
                stats = trainer.step(batch, step)
                if not stats["finite"]:
                    reason = f"non-finite loss {stats['loss']} or grad norm {stats['grad_norm']}"
                    outcome = (status.DIVERGED, step, reason)
                    break
                t2 = time.perf_counter()
                sync_s = trainer.sync(engine) if batch is not None else 0.0
                last = state.advance(drawn, stats, trainer.ref is not None,
                                     (t1 - t0, t2 - t1, sync_s, time.perf_counter() - t0))
                log.step(last, drawn)
                if due and state.spent >= due[0]:
                    evaluator.record(state, last)
                    due = [c for c in due if c > state.spent]
                if ckpt and cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
                    ckpt.save(step, trainer.model, trainer.opt, state.saved(cfg))
                if stop_after is not None and step >= stop_after:
                    break
            stopped = stop_after is not None and state.step >= stop_after
            between = last is not None and state.curve.rows[-1]["m"] != state.step
            if outcome[0] == status.DONE and between and not stopped:
                evaluator.record(state, last)  # the budget ended the run between evaluation points
        finally:
            log.close()
            if own_engine:
                engine.close()
    res = state.curve.result(cfg, len(evaluator.train_sample), len(val), *outcome)
    res.model = trainer.model  # the trained module, for callers and tests (not serialised)
    if cfg.keep_final and outcome[0] == status.DONE:
        res.final = Checkpointer.files(trainer.model, trainer.opt, state.final(cfg))
    return res


def step_bytes(cfg: LLMConfig) -> int:
    """About how much memory one step of `cfg` holds beyond the process's own: rollouts of its first draw
    (bp x n) x tokens per rollout (the longest training prompt, in characters: never fewer than its tokens,
    plus a chat template's for a Hugging Face model, plus max_new_tokens) x memory.HELD_BYTES_PER_TOKEN.
    Checked against the machine's memory before a run starts (studies.cli_kit.checks.check_memory)."""
    from llm_backend.memory import HELD_BYTES_PER_TOKEN

    train, _ = load_problems(cfg)
    prompt = max((len(p.question) for p in train), default=0)
    if not cfg.family.is_tiny:
        prompt += len(tasks.SYSTEM_PROMPT) + 32  # the chat template's system prompt and role markers
    return int(cfg.bp * cfg.n * (prompt + cfg.max_new_tokens) * HELD_BYTES_PER_TOKEN)


@contextlib.contextmanager
def _frozen_heap():
    """Python's cyclic garbage collector told to skip the objects alive when the run starts (gc.freeze),
    given back to it after (gc.unfreeze). Why: importing torch leaves ~170,000 tracked objects, and every
    full collection walks all of them; a run allocates enough small lists per step (rollouts, batches) to
    trigger one every few steps, so a tiny-LM run spent ~10% of an evaluation walking torch's module
    objects. Nothing a run computes depends on when the collector runs."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _torch_threads(cfg: LLMConfig):
    """One torch thread for a kv-engine run (the caller's count restored after): a tiny LM's step is
    thousands of small ops, as pretraining uses; a second OpenMP thread mostly synchronises, and spins on a
    busy machine. Other engines keep the caller's count."""
    import torch

    threads = torch.get_num_threads()
    if cfg.engine == "kv":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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


def _open_engine(cfg: LLMConfig, trainer: Trainer, tok, path, engine):
    """(engine, whether this run closes it, seconds to get it ready): the caller's engine synced to the
    policy, vLLM's process-wide cached engine (shared by the runs of a sweep), or a new hf / kv engine."""
    from llm_backend.engines import cached_engine, make_engine

    t0 = time.perf_counter()
    own = engine is None and cfg.engine != "vllm"
    if engine is None and cfg.engine == "vllm":
        opts = {k: v for k, v in engine_options(cfg).items() if k != "device"}
        engine = cached_engine(trainer.model, tok, str(path), seed=cfg.seed, **opts)
    elif engine is None:
        engine = make_engine(cfg.engine, trainer.model, tok, str(path), seed=cfg.seed, **engine_options(cfg))
    else:
        engine.sync_weights(trainer.model)
    return engine, own, time.perf_counter() - t0


@dataclass
class Drawn:
    """What one step drew, whatever the allocator: the groups kept for the update (empty: no update), the
    rollouts and tokens generated (all count as compute), the mean reward (of the kept groups; of all drawn
    when none was kept), the share of drawn groups whose rewards all agree, and the allocator's columns of
    the step log."""

    kept: list[Group]
    rollouts: int
    tokens: int
    reward: float
    zero_var_frac: float
    info: dict


def draw_step(alloc, cfg: LLMConfig, step: int, state: RunState, engine, tok, train) -> Drawn | None:
    """The draws of one step as `alloc` plans them (llm_backend/allocators.py), graded, recorded in the
    problems' history, and the kept groups; None when the budget leaves no room for a step.

    Draw r of the step is seeded by (seed, step, "rollout", r), draw 0 by (seed, step, "rollout"). A draw
    that `extends` adds its groups' rollouts to the groups the draw before kept, in order (one group each).
    """
    from llm_backend.engines import generate_groups

    ctx = allocators.StepContext(step, state.spent, cfg.budget, cfg.n, cfg.bp, state.stream, state.history,
                                 np.random.default_rng(derive_seed(cfg.seed, step, "allocator")))
    kept: list[Group] = []
    drawn_rewards: list[np.ndarray] = []
    n_tok = 0
    at: list[tuple[int, int]] = []  # the last draw's kept groups, in order: (index in kept, in drawn_rewards)
    while (draw := alloc.propose(ctx)) is not None:
        probs = [train[i] for i in draw.problems]
        prompts = [tasks.build_prompt(tok, p.question) for p in probs]
        refill = [ctx.rounds] if ctx.rounds else []  # draw 0 is seeded as the fixed path always was
        seed = derive_seed(cfg.seed, step, "rollout", *refill)
        ro = generate_groups(engine, prompts, draw.ns, cfg.max_new_tokens, cfg.temperature, cfg.top_p,
                             seed=seed)
        groups, off = [], 0
        for g, p, k in zip(draw.problems, probs, draw.ns, strict=True):
            sl = slice(off, off + k)
            off += k
            r = np.array([tasks.reward(t, p.answer) for t in ro.texts[sl]])
            state.history.record(g, r, alloc.ema)  # every drawn group, kept or not
            groups.append(Group(ro.prompt_ids[sl], ro.token_ids[sl], ro.logprobs[sl], r))
        if off != len(ro.token_ids):
            raise RuntimeError(f"engine returned {len(ro.token_ids)} rollouts for a draw of {off}")
        if draw.extends:  # the rollouts join the groups the previous draw kept, in the same order
            for (j, dj), gr in zip(at, groups, strict=True):
                kept[j] = extend(kept[j], gr)
                drawn_rewards[dj] = kept[j].rewards
        else:
            keep = alloc.keep(ctx, draw, [gr.rewards for gr in groups])
            at = []
            for i, (gr, k) in enumerate(zip(groups, keep, strict=True)):
                if k:
                    at.append((len(kept), len(drawn_rewards) + i))
                    kept.append(gr)
            drawn_rewards += [gr.rewards for gr in groups]
            ctx.kept += int(sum(keep))
        n_tok += ro.num_tokens
        ctx.drawn += len(ro.token_ids)
        ctx.rounds += 1
        ctx.draws.append(draw)
    if ctx.rounds == 0:
        return None
    zero_var = float(np.mean([not allocators.has_signal(r) for r in drawn_rewards]))
    info = {"rollouts": ctx.drawn, "groups_drawn": len(drawn_rewards), "groups_kept": len(kept),
            "rounds": ctx.rounds, "n_min": min(r.size for r in drawn_rewards),
            "n_max": max(r.size for r in drawn_rewards)}
    reward = float(np.concatenate([gr.rewards for gr in kept] if kept else drawn_rewards).mean())
    return Drawn(kept, ctx.drawn, n_tok, reward, zero_var, info)


def extend(group: Group, more: Group) -> Group:
    """One group of a problem's rollouts from two draws: `group`'s, then `more`'s."""
    return Group(list(group.prompt_ids) + list(more.prompt_ids), list(group.token_ids) + list(more.token_ids),
                 list(group.logprobs) + list(more.logprobs), np.concatenate([group.rewards, more.rewards]))


@dataclass
class RunState:
    """What a run carries from step to step and a checkpoint saves: the last step done, rollouts spent and
    tokens generated so far, the allocator's problem stream and per-problem history, and the curve."""

    step: int
    spent: int
    tokens: int
    stream: allocators.ProblemStream
    history: allocators.History
    curve: Curve = field(default_factory=Curve)

    @classmethod
    def resume(cls, cfg: LLMConfig, d: int, ckpt: Checkpointer | None, trainer: Trainer) -> RunState:
        """A fresh state, or the latest checkpoint's (its weights and optimiser loaded into `trainer`)."""
        state = cls(0, 0, 0, allocators.ProblemStream(cfg.seed, d), allocators.History.empty(d))
        latest = ckpt.latest() if ckpt else None
        if latest is None and cfg.continue_from:  # a kept final state of the same run at a smaller budget
            latest = Path(cfg.continue_from)
            saved = Checkpointer.load(latest, trainer.model, trainer.opt, cfg.device)
            was, now = dict(saved["config"]), config_key(cfg)
            if was.pop("budget") > now.pop("budget") or was != now:
                raise ConfigError(f"{latest} holds another run's final state (not this config at a "
                                  "budget up to this one's)")
        elif latest is not None:
            saved = Checkpointer.load(latest, trainer.model, trainer.opt, cfg.device)
            if saved["config"] != config_key(cfg):
                raise ConfigError(f"checkpoint {latest} belongs to a different config; use another "
                                  "checkpoint_dir")
        if latest is not None:
            step = saved["step"]
            # checkpoints of fixed runs from before the allocator loop carry no allocator state
            alloc = saved.get("alloc") or {"spent": step * cfg.batch, "pos": step * cfg.bp,
                                           "history": state.history.state()}
            state = cls(step, alloc["spent"], saved["tokens"],
                        allocators.ProblemStream(cfg.seed, d, alloc["pos"]),
                        allocators.History.from_state(alloc["history"]),
                        Curve(saved["rows"], saved.get("steps", []), saved["snaps"], saved["snaps_train"]))
        trainer.loaded()
        return state

    def saved(self, cfg: LLMConfig) -> dict:
        """The checkpoint's state.json."""
        c = self.curve
        return {"step": self.step, "tokens": self.tokens, "rows": c.rows, "steps": c.steps, "snaps": c.snaps,
                "snaps_train": c.snaps_train, "config": config_key(cfg),
                "alloc": {"spent": self.spent, "pos": self.stream.pos, "history": self.history.state()}}

    def final(self, cfg: LLMConfig) -> dict:
        """The state.json of a kept final state (LLMConfig.keep_final): the checkpoint's, less the step log
        (one entry per step: megabytes at 2^22 rollouts; the result store keeps the learning curve), so that
        a continuation starts its step log afresh and keeps the curve's rows and pass@1 snapshots."""
        out = self.saved(cfg)
        out.pop("steps")
        return out

    def advance(self, drawn: Drawn, stats: dict, with_kl: bool, seconds: tuple) -> dict:
        """Count a finished step (its rollouts, tokens) and log it; returns the step log's row. seconds:
        (rollout, train, sync, whole step)."""
        self.step += 1
        self.spent += drawn.rollouts
        self.tokens += drawn.tokens
        per_tok = max(stats["tokens"], 1)
        t_rollout, t_train, t_sync, t_step = seconds
        last = {
            "step": self.step,
            "compute": self.spent,
            "tokens": self.tokens,
            "reward": drawn.reward,
            "entropy": stats["entropy_sum"] / per_tok,
            "kl": stats["kl_sum"] / per_tok if with_kl else float("nan"),
            "grad_norm": stats["grad_norm"],
            "response_len": drawn.tokens / drawn.rollouts,
            "loss": stats["loss"],
            "updates": stats["updates"],
            "clip_frac": stats["clip_sum"] / per_tok,
            "approx_kl": stats["approx_kl_sum"] / per_tok,
            "tis_mean": stats["tis_sum"] / per_tok,
            "tis_clip_frac": stats["tis_clipped"] / per_tok,
            "logp_mismatch": stats["mismatch_abs_sum"] / per_tok,
            "zero_var_frac": drawn.zero_var_frac,
            **drawn.info,
            "t_rollout": t_rollout,
            "t_train": t_train,
            "t_sync": t_sync,
            "t_step": t_step,
        }
        self.curve.steps.append(last)
        return last


class Evaluator:
    """Evaluates the policy through the engine at an evaluation point and records the table row."""

    def __init__(self, cfg: LLMConfig, engine, tok, train, val, log: _Log):
        self.cfg, self.engine, self.tok, self.val, self.log = cfg, engine, tok, val, log
        self.d = len(train)
        self.train_sample = train_eval_sample(train, cfg, len(val))
        model = Path(cfg.model).name if cfg.model else default_model_dir(cfg.cache_dir).name  # tiny: "tiny"
        self.base = {"backend": "llm", "model": model, "dataset": cfg.dataset, "seed": cfg.seed, "n": cfg.n,
                     "bp": cfg.bp, "batch": cfg.batch, "lr": cfg.effective_lr(), "k": cfg.k}

    def record(self, state: RunState, last: dict | None) -> None:
        """Evaluate at the state's step and add its table row (the step columns from `last`, the step log's
        latest row; None at step 0)."""
        cfg, step = self.cfg, state.step
        self.log.evaluating(step, len(self.val) + len(self.train_sample))
        t0 = time.perf_counter()
        metrics, p1, p1_train = evaluation.evaluate(self.engine, self.tok, self.val, cfg, step,
                                                    self.train_sample)
        self.log.evaluated(step, metrics["val_mean"], time.perf_counter() - t0)
        row = {**self.base, "m": step, "compute": state.spent, "tokens": state.tokens,
               "epoch": step * cfg.bp / self.d, **metrics}
        state.curve.record(row, last, p1, p1_train)


class _Log:
    """A run's progress on stderr (isocompute.contract.progress): on a terminal a bar over the m steps, with
    the engine's start and each evaluation as lines above it; without one a line at most every ~10 s
    (step, rollouts, rollouts/s, the last evaluation, the phase: an evaluation or a long step is never
    silent), never a line per step. Nothing without `progress`; stdout stays for results."""

    def __init__(self, cfg: LLMConfig, progress: bool, state: RunState, n_val: int, t_engine: float):
        self.cfg = cfg
        self.bar = Progress(f"llm n={cfg.n} bp={cfg.bp}", cfg.steps, "step", "rollouts", enabled=progress,
                            done=state.step, amount=state.spent)
        self.say(f"llm: engine {cfg.engine} ({cfg.engine_dtype}) ready in {t_engine:.1f} s; {cfg.steps} "
                 f"steps of {cfg.batch} rollouts, {1 + len(cfg.eval_points())} evaluations of {n_val} "
                 f"problems x k = {cfg.k}")

    def say(self, line: str) -> None:
        """A phase as a line of its own, on a terminal only (without one the periodic line says it)."""
        if self.bar.tty:
            self.bar.say(line)

    def phase(self, text: str | None) -> None:
        """What the run is doing now (None: nothing to say), shown on the next progress line."""
        self.bar.update(phase=text)

    def evaluating(self, step: int, problems: int) -> None:
        self.bar.update(phase=f"evaluating {problems} problems x {self.cfg.k} samples")

    def evaluated(self, step: int, val_mean: float, seconds: float) -> None:
        self.bar.update(phase=None, evaluation=f"val_mean {val_mean:.3f} at step {step}")
        self.say(f"llm: step {step}/{self.cfg.steps}: val_mean {val_mean:.3f} ({seconds:.1f} s)")

    def step(self, last: dict, drawn: Drawn) -> None:
        self.bar.update(last["step"], last["compute"], reward=f"reward {drawn.reward:.2f}", phase=None)

    def close(self) -> None:
        self.bar.close()
