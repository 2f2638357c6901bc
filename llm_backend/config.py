"""Configuration of one GRPO run on a real LLM (the backend's own config; studies.RunConfig maps onto it)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from isocompute.contract import options
from isocompute.contract.allocspec import AllocatorError
from isocompute.contract.config import ConfigError, EngineConfig, check_choice, check_options, check_updates
from isocompute.contract.options import ADV_STDS as ADV_STD
from isocompute.contract.options import OBJECTIVES, SCALE_REWARDS, ZERO_PASS1
from isocompute.contract.schedule import eval_steps, grid_points
from llm_backend.allocators import parse as parse_allocator
from llm_backend.engines import DTYPES, ENGINES
from llm_backend.family import ModelFamily, family_of

__all__ = ["ADV_STD", "CPU_DTYPE", "DATASETS", "LOSS_AGG", "OBJECTIVES", "SCALE_REWARDS", "TINY_DEFAULTS",
           "TRAIN_LAYOUTS", "ZERO_PASS1", "ConfigError", "LLMConfig", "config_for", "cpu_dtype", "validate"]

LOSS_AGG = ("token_mean", "seq_mean")
TRAIN_LAYOUTS = ("packed", "padded")
TINY_TRAINERS = ("compiled", "torch")
"""Values of LLMConfig.tiny_trainer."""
DATASETS = (*options.DATASETS, "arith")
"""The calibrated difficulty presets and `arith` (uncalibrated generated arithmetic, for tests)."""


def cpu_dtype(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The default precision on this CPU: bfloat16 where it has AMX tiles (amx_tile) or AVX-512 BF16
    (avx512_bf16), float32 elsewhere. bf16 is ~2.5x the float32 tokens/s with AMX and ~20x slower than
    float32 on an AVX2-only CPU (measured on the project's machines; docs/LLM_NOTES.md)."""
    try:
        with open(cpuinfo) as f:
            flags = set(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return "float32"
    return "bfloat16" if flags & {"amx_tile", "avx512_bf16"} else "float32"


CPU_DTYPE = cpu_dtype()
"""cpu_dtype() of this machine: the default of LLMConfig.engine_dtype and train_dtype."""


@dataclass(frozen=True)
class LLMConfig(EngineConfig):
    """Hyperparameters of one GRPO run. Vocabulary from docs/DESIGN.md: compute C = bp * n * m in rollouts."""

    # --- allocation (docs/PAPER.md "The question") ---
    n: int = 4
    """Rollouts per problem (GRPO group size)."""
    bp: int = 8
    """Problems per step (B_p)."""
    budget: int = 256
    """Compute cap in rollouts; the run takes m = budget // (bp * n) steps (isocompute.contract.budget
    STEPS_RULE, with no decoupled baseline)."""
    seed: int = 0
    """Seed of the training randomness (problem order, rollout sampling, evaluation sampling)."""
    allocator: str = "fixed"
    """Rollout allocator `name[:args]` (llm_backend/allocators.py: fixed, knapsack, dynamic-sampling,
    skip-zero-var, schedule:double@F, pilot-commit, dynamo; the simulator's spec strings and defaults).
    Every drawn rollout counts toward the budget; fixed is today's path."""

    # --- model and engine ---
    model: str | None = None
    """Local HF causal-LM folder, or a tiny LM by name (tiny, shipped; small, once `isocompute llm pretrain
    --lm small` made it: llm_backend/tiny/model.py);
    None = the prepared SmolLM2-135M-Instruct (`isocompute llm prepare`)."""
    cache_dir: str | None = None
    """Cache root for the prepared model and calibrated splits ($ISOCOMPUTE_CACHE or ~/.cache/isocompute)."""
    engine: str = "vllm"
    """Rollout engine: vllm (in-process, weights synced after every step), hf (transformers generate) or kv
    (batched KV-cache sampling of the tiny LMs, llm_backend/tiny/sampler.py)."""
    device: str = "cpu"
    """Trainer device: cpu or cuda[:i]. vLLM runs on whatever its install targets."""
    engine_dtype: str = CPU_DTYPE
    """Rollout precision: float32 or bfloat16 (vLLM weights in bf16, or bf16 autocast for hf). bf16 is
    ~2.5x faster on an AMX CPU; the trainer's log-probs stay float32 and TIS corrects the mismatch.
    Default: chosen by the CPU (cpu_dtype: bfloat16 with AMX / AVX-512 BF16, else float32)."""
    train_dtype: str = CPU_DTYPE
    """Trainer precision: float32 or bfloat16 (default: as engine_dtype, by the CPU). packed layout: bf16
    weights for forward/backward with float32 master weights and AdamW state (trainer.MasterWeights); padded
    layout: bf16 autocast."""
    train_layout: str = "packed"
    """packed (each group's prompt once, completion-only logits, no padding: llm_backend/packed.py) or
    padded (the straightforward n padded sequences per group; same loss and gradient; tests, benchmarks)."""
    row_tokens: int = 512
    """packed: tokens per packed row (attention is dense within a row, so its cost grows with this)."""
    micro_tokens: int = 2048
    """packed: tokens per forward/backward microbatch (memory only; the update is the same)."""
    tiny_trainer: str = "compiled"
    """packed layout on a tiny LM: who computes a microbatch's log-probs and their gradients (TINY_TRAINERS):
    "compiled", llm_backend/tiny/train_kernel.py's two Numba calls where they serve (float32 on the CPU), or
    "torch", the module's forward and autograd always (the floats of the tests that pin the trainer's bits).
    Why compiled: at the study's sizes the eager forward's and backward's fixed cost per op is most of a step
    (benchmarks/tiny_lm.py); the two differ by float32 round-off (tests/llm_backend/
    test_tiny_train_kernel.py). Other models ignore it."""
    gpu_memory_utilization: float = 0.35
    """vLLM: share of (CPU or GPU) memory it reserves; 0.2 leaves no KV cache on this machine."""
    max_model_len: int = 512
    kv_cache_gib: float = 1.0
    """vLLM: KV cache size in GiB (explicit, so the reservation does not depend on what vLLM reads as
    the machine's memory); 0 = vLLM's own sizing from gpu_memory_utilization."""

    # --- problems ---
    dataset: str = "easy"
    """A calibrated split (easy, hard, xhard, veasy: files `<data_dir>/<name>.{train,val}.jsonl`), `arith`
    (uncalibrated generated arithmetic, for tests), or a path to a JSONL file of {question, answer}."""
    data_dir: str | None = None
    """Folder of calibrated splits; None = `<cache>/splits` if it holds the split, else the committed splits
    in llm_backend/data (calibrated on SmolLM2-135M-Instruct)."""
    d: int = 0
    """Training problems used (0 = all in the split)."""
    d_val: int = 16
    """Held-out validation problems (0 = all in the split)."""
    digits: int = 1
    """`arith` only: digits per operand."""
    terms: int = 2
    """`arith` only: operands per problem."""
    operations: str = "+"
    """`arith` only: operations to draw from (subset of "+-*")."""

    # --- sampling ---
    temperature: float = 0.7
    """Sampling temperature of rollouts and evaluation (trainer log-probs use the same temperature)."""
    top_p: float = 1.0
    """Nucleus sampling; keep 1.0 so engine and trainer log-probs mean the same distribution."""
    max_new_tokens: int = 32
    """Completion cap in tokens (a truncated completion is graded as it stands)."""

    # --- optimiser (docs/PAPER.md "Healthy recipe": AdamW, lr scaled by sqrt(B / B_ref)) ---
    lr: float = 1e-5
    """Base learning rate at `lr_ref_batch`. The paper uses 1e-6 at 1024 for hundreds of steps; a CPU run
    has tens of steps of batch 16-128, where 1e-6 moves nothing measurable, so the default is 1e-5 at 64."""
    lr_rule: str = "sqrt"
    """constant, linear (lr * B / B_ref) or sqrt (lr * sqrt(B / B_ref)) in batch B = bp * n."""
    lr_ref_batch: int = 64
    """Reference batch B_ref of `lr_rule`."""
    warmup_steps: int = 0
    """Linear lr warm-up over the first K optimizer steps: step s in 1..K uses lr * s / K (lr after
    `lr_rule`), then lr; 0 = none. The paper's recipe warms up over 10 steps (docs/PAPER.md "Healthy
    recipe"). Computed from the step number (`step_lr`), so a resumed run gets the same lr."""
    weight_decay: float = 0.0
    """torch AdamW's decoupled weight decay (toward zero); 0 disables it."""
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0
    """Gradient clipping (global L2 norm); 0 disables it."""
    microbatch: int = 16
    """Sequences per forward/backward chunk (memory only; the update is the same)."""

    # --- objective ---
    scale_rewards: str = "group"
    """Advantage normalisation: group (by group std), batch (by batch std) or none (same names as sandbox)."""
    adv_std: str = "sample"
    """Std of the advantage scale: sample (n - 1 denominator, as TRL and verl) or population (n)."""
    adv_eps: float = 1e-4
    """A = (r - mean) / (std + adv_eps) (TRL: 1e-4, verl: 1e-6); groups whose rewards agree get exactly 0."""
    objective: str = "pg"
    """pg (plain policy gradient), ppo (clipped ratio against the rollout-time policy) or cispo (stop-gradient
    clipped IS weight min(r, 1 + clip_eps) times A grad log pi); same names and meaning as the simulator."""
    clip_eps: float = 0.2
    """Clipping range of ppo / cispo ratios."""
    ppo_epochs: int = 1
    """Passes over each batch for ppo / cispo."""
    minibatches: int = 1
    """Minibatches (of whole groups) per pass for ppo / cispo, each an optimiser step."""
    loss_agg: str = "token_mean"
    """token_mean (over all completion tokens of the batch) or seq_mean (per sequence, then batch)."""
    kl_coef: float = 0.0
    """Coefficient of KL(pi || pi_ref), pi_ref the initial policy, estimated per token by the ratio-corrected
    k3 (TRL `use_bias_correction_kl`: expected gradient = reverse-KL gradient); 0 skips the reference."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus (full-vocabulary entropy at each completion token)."""
    tis_cap: float = 2.0
    """Truncated importance sampling cap C: weight min(pi_train / pi_engine, C); 0 disables TIS."""

    # --- metrics and checkpoints ---
    k: int = 4
    """Samples per validation (and train-metric) problem at each evaluation point (metric@k)."""
    train_eval: bool = True
    """Estimate train_* metrics at each evaluation point on a fixed sample of min(d, d_val) training
    problems, k samples each (not counted as compute); False leaves them NaN."""
    n_evals: int = 4
    """Log-spaced evaluation points between step 1 and m (plus m = 0); unused when eval_from is set."""
    eval_from: int = 0
    """Evaluate on the absolute compute grid eval_from * 2^(i / evals_per_octave) rollouts (i = 0, 1, ...;
    isocompute.contract.schedule.grid_points) plus step 0 and the run's end, instead of n_evals points
    spread over the run; 0: the n_evals schedule. The same points for every budget, so a run can be
    extended to a larger budget without changing the points it has."""
    evals_per_octave: int = 2
    """Points per doubling of compute on the eval_from grid."""
    continue_from: str | None = None
    """A folder holding a kept final state (keep_final; a result store's final/RUN_ID/) of this same config
    at a smaller budget: the run continues from it instead of starting over, and its table holds the earlier
    rows too. Needs the absolute evaluation grid (eval_from), so that the points do not depend on the
    budget; a checkpoint in checkpoint_dir, if any, comes first."""
    keep_final: bool = False
    """Hand the run's final state (weights, AdamW state, step, rollouts spent, the allocator's problem stream
    and history) back with its result (LLMResult.final), so that a result store keeps it and a later run
    can continue from it instead of restarting."""
    checkpoint_every: int = 0
    """Save a checkpoint every this many steps (0 = never)."""
    checkpoint_dir: str | None = None
    """Where checkpoints go; a run resumes from the latest one found there."""

    def __post_init__(self) -> None:
        validate(self)

    @cached_property
    def family(self) -> ModelFamily:
        """The family of `model` (tiny LM or Hugging Face LM, llm_backend/family.py), resolved once for this
        config and read wherever the two differ: engines, model loading, problems and splits. Not a field:
        it follows from `model` and stays out of to_dict, equality and the checkpoint key."""
        return family_of(self.model)

    def eval_points(self) -> list[int]:
        """The evaluation points after step 0, in rollouts spent: a run evaluates after the first step whose
        cumulative rollouts reach each (and after its last step)."""
        if self.eval_from:
            return grid_points(self.eval_from, self.evals_per_octave, self.budget)
        return [s * self.batch for s in eval_steps(self.steps, self.n_evals)[1:]]

    def step_lr(self, step: int) -> float:
        """The lr of GRPO step `step` (1-based; every optimizer update of that step under ppo / cispo):
        effective_lr() times min(1, step / warmup_steps)."""
        lr = self.effective_lr()
        if self.warmup_steps and step < self.warmup_steps:
            return lr * step / self.warmup_steps
        return lr


TINY_DEFAULTS = {
    "engine": "kv",
    "temperature": 1.0,
    "max_new_tokens": 10,
    "lr": 1e-4,
    "d_val": 256,
    "engine_dtype": "float32",
    "train_dtype": "float32",
    "max_model_len": 64,
    "row_tokens": 64,
}
"""Defaults of a run on a tiny LM (--lm tiny / small) where the caller set nothing: the kv engine, sampling at
temperature 1 (the distribution the model learned, which the calibration measured), answers of at most 9
characters + EOS (llm_backend/tiny/tasks.py), the base lr 1e-4 at B_ref = 64 under the sqrt rule that tuning
on held-out seeds chose for every n at 2^14 and 2^16 rollouts (docs/GROUP_STD.md, "Tiny LM"; the earlier
default 3e-4 collapsed n = 64, docs/tiny_lm/README.md), 256 validation problems (an evaluation costs
milliseconds), float32 on every CPU (the matmuls are too small for bf16 to pay even with AMX), for `--option
engine=vllm`, vLLM's context at the model's 64 positions (tiny.model.TinyConfig.max_position_embeddings;
tested equal), and packed rows of 64 tokens: a group is a prompt of ~7 tokens and completions of ~3, so long
rows are mostly masked-out attention (at n = 16, bp = 16 the update took 2.3x longer with rows of 512;
benchmarks/tiny_lm.py)."""


def config_for(model: str | None = None, **kw) -> LLMConfig:
    """LLMConfig for `model` with its family's defaults (TINY_DEFAULTS for a tiny LM) under `kw`."""
    base = dict(TINY_DEFAULTS) if family_of(model).is_tiny else {}
    return LLMConfig(model=model, **{**base, **kw})


def validate(c: LLMConfig) -> None:
    """Check one config; raise ConfigError with a one-line message quoting the bad values."""
    check_choice("engine", c.engine, ENGINES)
    if (why := c.family.engine_error(c.engine)) is not None:
        raise ConfigError(why)
    check_choice("engine_dtype", c.engine_dtype, DTYPES)
    check_choice("train_dtype", c.train_dtype, DTYPES)
    check_options(c)
    check_choice("loss_agg", c.loss_agg, LOSS_AGG)
    check_choice("train_layout", c.train_layout, TRAIN_LAYOUTS)
    check_choice("tiny_trainer", c.tiny_trainer, TINY_TRAINERS)
    if c.dataset not in DATASETS and not c.dataset.endswith(".jsonl"):
        raise ConfigError(
            f"unknown dataset {c.dataset!r}; choose one of {', '.join(DATASETS)} or a .jsonl path"
        )
    if c.n < 2:
        raise ConfigError(f"n = {c.n} < 2 leaves the group baseline without signal; use n >= 2")
    for name in (
        "bp", "budget", "k", "n_evals", "evals_per_octave", "max_new_tokens", "lr_ref_batch", "microbatch",
        "row_tokens", "micro_tokens",
    ):
        if getattr(c, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(c, name)}")
    if c.continue_from and not c.eval_from:
        raise ConfigError("continue_from needs the absolute evaluation grid: set eval_from (e.g. 4096)")
    if c.eval_from < 0:
        raise ConfigError(f"eval_from must be >= 0 rollouts (0: the n_evals schedule), got {c.eval_from}")
    if c.budget < c.batch:
        raise ConfigError(f"budget {c.budget} < batch bp*n = {c.batch}: not even one step")
    if not c.lr > 0 or c.max_grad_norm < 0 or c.kl_coef < 0 or c.entropy_coef < 0 or c.tis_cap < 0:
        raise ConfigError("lr must be > 0 and max_grad_norm, kl_coef, entropy_coef, tis_cap >= 0")
    if not 0 < c.temperature <= 2 or not 0 < c.top_p <= 1:
        raise ConfigError(f"need 0 < temperature <= 2 and 0 < top_p <= 1; got {c.temperature}, {c.top_p}")
    if not c.adv_eps >= 0 or not c.clip_eps > 0:
        raise ConfigError(f"need adv_eps >= 0 and clip_eps > 0; got {c.adv_eps}, {c.clip_eps}")
    check_updates(c)
    try:
        parse_allocator(c.allocator, c.n)
    except AllocatorError as e:
        raise ConfigError(str(e)) from None
    if c.d < 0 or c.d_val < 0 or c.checkpoint_every < 0 or c.warmup_steps < 0:
        raise ConfigError("d, d_val, checkpoint_every and warmup_steps must be >= 0")
    if c.checkpoint_every and not c.checkpoint_dir:
        raise ConfigError("checkpoint_every > 0 needs checkpoint_dir")
