"""Rollout allocators of the LLM backend (docs/DESIGN.md "Allocators"): which problems a step trains on and
how many rollouts n_i each gets, within the step's rollout budget bp * n.

The simulator's spec strings `name[:args]` and parameter defaults (one grammar:
isocompute.contract.allocspec) and its per-problem rules, the same functions the simulator compiles (the rule
book isocompute.contract.allocrules; sandbox/allocators.py's docstring cites each paper): llm_backend never
imports sandbox. An allocator only plans draws (problems, n_i) and says which drawn groups go into the update;
the run loop (loop.py) generates, grades, updates the per-problem `History` and runs the unchanged GRPO step
on the kept groups. Every drawn rollout counts as compute, discarded ones too.

Allocators on this backend:
- `fixed`: every problem n (the plain GRPO step).
- `knapsack[:nmin=2,nmax=4n,prior=0.5,ema=1]`: Knapsack RL (Li et al., arXiv 2509.25849): n_i maximising
  sum_i v(n_i, p_i), v(k, p) = (1 - p^k - (1 - p)^k) p (1 - p)^2, sum n_i = bp * n, nmin <= n_i <= nmax;
  p_i = the problem's last observed group success rate (an EMA when ema < 1), `prior` for unseen problems.
  (`oracle=1` of the simulator needs the true pass@1, which a real model does not have: refused.)
- `dynamic-sampling[:rounds=4]`: DAPO (Yu et al., arXiv 2503.14476): draw bp problems x n, drop groups whose
  rewards all agree, refill with further problems until bp groups have signal or `rounds` draws (or the
  budget has no room for another draw); train on the first bp kept groups.
- `skip-zero-var[:p=0.5,streak=1]`: GRESO (Zheng et al., arXiv 2506.02177): before any rollout skip a
  candidate with probability p when its last `streak` groups all had zero reward variance (at most d skips
  per draw); skipped problems cost nothing.
- `schedule:double@F1,F2,...`: BroRL-style (Hu et al., arXiv 2510.01180): n doubles each time the spent share
  of the budget passes F_j (bp fixed; the last step is cut to the room left, n >= 2).
- `pilot-commit[:pilot=max(2,n/4),lower=0.125,upper=0.25,evict=1,rounds=30]`: Pilot-Commit (Kim et al.,
  arXiv 2605.26606; databricks/pilot-commit recipe/pc): a pilot draw of bp candidates x `pilot`; those with
  lower <= c / pilot <= 1 - upper (the rule book's `pilot_keep`) get a commit draw of n - pilot more
  rollouts, appended to their pilot group (one group of n, Draw.extends); problems with
  c / pilot >= evict are never drawn again (`pilot_evict`, History.out); pilot rounds go on until bp groups
  are committed, `rounds` pilot draws, or no room for a round and its commits (bp n). The choices where
  this loop lacks the repository's machinery (its replay buffer of pilot survivors committed a generation
  round later, up to 4 steps stale, and its 3 bp pilot prompts at once) are those of the simulator,
  listed in sandbox/allocators.py: here too the commit follows the pilot within the step.
- `dynamo[:nmin=n/2,nmax=3n/2,prior=0.5,floor=0.01,master=0.85]`: DynaMO's allocation (Fang et al., arXiv
  2602.19208): n_i proportional to 4 k_i (g_i - k_i) / (g_i (g_i - 1)) (the unbiased Bernoulli variance of
  the problem's k_i correct of g_i rollouts so far, History.k / .g) within [nmin, nmax], sum n_i = bp * n
  (the rule book's `dynamo_alloc`; parameters and choices in sandbox/allocators.py).
The simulator's `variance`, `gvm`, `ada` and `schedule:zv@T` are refused here with a one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isocompute.contract import allocrules
from isocompute.contract.allocspec import NAMES, AllocatorError, AllocSpec, parse_double, split
from isocompute.contract.allocspec import parse as parse_spec

IMPLEMENTED = ("fixed", "knapsack", "dynamic-sampling", "skip-zero-var", "schedule:double@F", "pilot-commit",
               "dynamo")
"""What the llm backend runs (the error for the others lists these)."""


def _not_here(what: str) -> AllocatorError:
    return AllocatorError(f"allocator {what} is not implemented on the llm backend (the simulator has it); "
                          f"the llm backend has {', '.join(IMPLEMENTED)}")


def parse(spec: str, n: int) -> AllocSpec:
    """The AllocSpec of a spec at base group size n (isocompute.contract.allocspec.parse); AllocatorError (one
    line) if the spec is bad or names an allocator this backend lacks."""
    name, args = split(spec)
    if name not in NAMES:
        raise AllocatorError(f"unknown allocator {name!r}; the llm backend has {', '.join(IMPLEMENTED)}")
    if name in ("variance", "gvm", "ada"):
        raise _not_here(name)
    if name == "schedule":
        if args.startswith("zv@"):
            raise _not_here("schedule:zv@T")
        return parse_double(args)
    s = parse_spec(spec, n)
    if s.params.get("oracle", 0.0) != 0.0:
        raise AllocatorError(f"{name}:oracle=1 needs the true pass@1, which the llm backend lacks")
    return s


def has_signal(rewards) -> bool:
    """DAPO's keep rule on one group's 0/1 reward vector (the rule book's `has_signal` of its correct count
    and size): the group carries a gradient iff its rewards do not all agree."""
    r = np.asarray(rewards)
    return bool(allocrules.has_signal(int(np.count_nonzero(r)), r.size))


# ---------------------------------------------------------------- state the runner keeps

@dataclass
class History:
    """Per training problem: `p` the last observed group success rate (-1 = never drawn; an EMA when
    ema < 1), `streak` the number of consecutive zero-variance groups, `k` / `g` the correct and drawn
    rollouts of all its groups so far (DynaMO) and `out` whether it is evicted (Pilot-Commit). Updated by the
    runner for every drawn group, kept or not (as the simulator's sandbox.kernels.allocate.update_history)."""

    p: np.ndarray
    streak: np.ndarray
    k: np.ndarray = None
    g: np.ndarray = None
    out: np.ndarray = None

    def __post_init__(self) -> None:
        d = self.p.size  # checkpoints from before the counts existed carry none: zero counts, none evicted
        self.k = np.zeros(d) if self.k is None else self.k
        self.g = np.zeros(d) if self.g is None else self.g
        self.out = np.zeros(d, dtype=bool) if self.out is None else self.out

    @classmethod
    def empty(cls, d: int) -> History:
        return cls(np.full(d, -1.0), np.zeros(d, dtype=np.int64))

    def record(self, i: int, rewards, ema: float = 1.0) -> None:
        """Update problem i after a drawn group with these 0/1 rewards (the rule book's tracked_rate and
        next_streak, as the simulator's update_history)."""
        r = np.asarray(rewards, dtype=np.float64)
        c = int(np.count_nonzero(r))
        self.p[i] = allocrules.tracked_rate(self.p[i], c / r.size, ema)
        self.streak[i] = allocrules.next_streak(self.streak[i], c, r.size)
        self.k[i] += c
        self.g[i] += r.size

    def state(self) -> dict:
        return {"p": self.p.tolist(), "streak": self.streak.tolist(), "k": self.k.tolist(),
                "g": self.g.tolist(), "out": self.out.tolist()}

    @classmethod
    def from_state(cls, s: dict) -> History:
        def arr(key, dtype):
            return np.array(s[key], dtype=dtype) if key in s else None

        return cls(np.array(s["p"], dtype=np.float64), np.array(s["streak"], dtype=np.int64),
                   arr("k", np.float64), arr("g", np.float64), arr("out", bool))


class ProblemStream:
    """Training problems in the order the fixed path draws them (problems.problem_order): position j of a
    fresh seeded permutation per epoch, default_rng([seed, epoch]). Allocators that draw more (refills) or
    fewer (skips) problems per step read further along the same stream."""

    def __init__(self, seed: int, d: int, pos: int = 0):
        self.seed, self.d, self.pos = seed, d, pos
        self._perm: tuple[int, np.ndarray] | None = None

    def next(self) -> int:
        epoch, j = divmod(self.pos, self.d)
        if self._perm is None or self._perm[0] != epoch:
            self._perm = (epoch, np.random.default_rng([self.seed, epoch]).permutation(self.d))
        self.pos += 1
        return int(self._perm[1][j])

    def take(self, k: int) -> list[int]:
        return [self.next() for _ in range(k)]


@dataclass
class Draw:
    """One generate request of a step: problem indices and the rollouts n_i of each. `extends`: its groups'
    rollouts are appended, in order, to the groups the step's previous draw kept (Pilot-Commit's commit: the
    same problems), not groups of their own."""

    problems: list[int]
    ns: list[int]
    extends: bool = False

    @property
    def rollouts(self) -> int:
        return int(sum(self.ns))


@dataclass
class StepContext:
    """What an allocator sees while planning one step: the run's spend before the step, the budget, the
    base n and bp, the problem stream, the history, a per-step seeded generator, and the step so far."""

    step: int
    spent: int
    budget: int
    n: int
    bp: int
    stream: ProblemStream
    history: History
    rng: np.random.Generator
    drawn: int = 0
    """Rollouts drawn in this step so far."""
    kept: int = 0
    """Groups kept for the update so far."""
    rounds: int = 0
    """Draws made in this step so far."""
    draws: list[Draw] = field(default_factory=list)


class Allocator:
    """`fixed`: one draw of bp problems x n per step. Subclasses override one hook each (group_size,
    candidates, sizes, refill, keep); none of them touches the GRPO step."""

    name = "fixed"
    ema = 1.0

    def __init__(self, spec: AllocSpec, n: int, bp: int):
        self.spec, self.n, self.bp, self.params = spec, n, bp, spec.params

    def group_size(self, ctx: StepContext) -> int:
        return self.n

    def candidates(self, ctx: StepContext, k: int) -> list[int]:
        return ctx.stream.take(k)

    def sizes(self, ctx: StepContext, problems: list[int], n_step: int) -> list[int]:
        return [n_step] * len(problems)

    def refill(self, ctx: StepContext) -> Draw | None:
        return None

    def keep(self, ctx: StepContext, draw: Draw, rewards: list[np.ndarray]) -> list[bool]:
        return [True] * len(rewards)

    def propose(self, ctx: StepContext) -> Draw | None:
        """The next draw of this step; None when the step has all its draws (or, for the first draw, when
        the budget leaves no room for a step: the run ends)."""
        if ctx.rounds:
            return self.refill(ctx)
        n_step = self.group_size(ctx)
        if n_step < 2 or ctx.spent + ctx.bp * n_step > ctx.budget:
            return None
        problems = self.candidates(ctx, ctx.bp)
        return Draw(problems, self.sizes(ctx, problems, n_step))


class Knapsack(Allocator):
    name = "knapsack"

    def __init__(self, spec, n, bp):
        super().__init__(spec, n, bp)
        self.ema = self.params["ema"]

    def sizes(self, ctx, problems, n_step):
        prior = float(self.params["prior"])
        p = [float(ctx.history.p[g]) if ctx.history.p[g] >= 0.0 else prior for g in problems]
        out = [0] * len(p)
        allocrules.knapsack_alloc(p, ctx.bp * n_step, int(self.params["nmin"]), int(self.params["nmax"]), out)
        return out


class DynamicSampling(Allocator):
    name = "dynamic-sampling"

    def refill(self, ctx):
        rounds = int(self.params["rounds"])
        if ctx.kept >= ctx.bp or ctx.rounds >= rounds or ctx.spent + ctx.drawn + ctx.bp * self.n > ctx.budget:
            return None
        return Draw(ctx.stream.take(ctx.bp), [self.n] * ctx.bp)

    def keep(self, ctx, draw, rewards):
        out, kept = [], ctx.kept
        for r in rewards:
            k = has_signal(r) and kept < ctx.bp
            kept += k
            out.append(k)
        return out


class SkipZeroVar(Allocator):
    name = "skip-zero-var"

    def candidates(self, ctx, k):
        out, tries = [], 0
        p_skip, min_streak = self.params["p"], self.params["streak"]
        while len(out) < k:
            g = ctx.stream.next()
            if tries < ctx.stream.d:
                q = allocrules.skip_probability(int(ctx.history.streak[g]), min_streak, p_skip)
                if q > 0.0 and ctx.rng.random() < q:
                    tries += 1
                    continue
            out.append(g)
        return out


class Schedule(Allocator):
    name = "schedule:double"

    def group_size(self, ctx):
        n_step = allocrules.schedule_n(self.n, ctx.spent / ctx.budget, self.spec.fractions)
        return min(n_step, (ctx.budget - ctx.spent) // ctx.bp)


class DynaMO(Allocator):
    name = "dynamo"

    def sizes(self, ctx, problems, n_step):
        par = self.params
        k = [float(ctx.history.k[g]) for g in problems]
        g = [float(ctx.history.g[i]) for i in problems]
        out, w = [0] * len(problems), [0.0] * len(problems)
        allocrules.dynamo_alloc(k, g, par["prior"], par["floor"], par["master"], ctx.bp * n_step,
                                int(par["nmin"]), int(par["nmax"]), w, out)
        return out


class PilotCommit(Allocator):
    """Pilot draws of bp candidates x `pilot`, each followed by a commit draw (Draw.extends) of n - pilot
    rollouts for the candidates `keep` committed to (module docstring)."""

    name = "pilot-commit"

    def __init__(self, spec, n, bp):
        super().__init__(spec, n, bp)
        self.pilot = int(self.params["pilot"])
        self._pending: list[int] = []
        """Problems the last pilot draw committed to, whose commit draw is next."""

    def group_size(self, ctx):
        return self.pilot

    def propose(self, ctx):
        if ctx.rounds == 0 and ctx.spent + ctx.bp * self.n > ctx.budget:  # a round and its commits: bp n
            return None
        if ctx.rounds == 0:
            self._pending = []
            problems = self.candidates(ctx, ctx.bp)
            return Draw(problems, [self.pilot] * len(problems))
        return self.refill(ctx)

    def candidates(self, ctx, k):
        out, tries = [], 0
        while len(out) < k:
            g = ctx.stream.next()
            if tries < ctx.stream.d and ctx.history.out[g]:
                tries += 1
                continue
            out.append(g)
        return out

    def refill(self, ctx):
        if self._pending:
            problems, self._pending = self._pending, []
            return Draw(problems, [self.n - self.pilot] * len(problems), extends=True)
        pilots = sum(not d.extends for d in ctx.draws)
        if (ctx.kept >= ctx.bp or pilots >= int(self.params["rounds"])
                or ctx.spent + ctx.drawn + ctx.bp * self.n > ctx.budget):
            return None
        problems = self.candidates(ctx, ctx.bp)
        return Draw(problems, [self.pilot] * len(problems))

    def keep(self, ctx, draw, rewards):
        out, kept = [], ctx.kept
        for g, r in zip(draw.problems, rewards, strict=True):
            c, k = int(np.count_nonzero(r)), len(r)
            if allocrules.pilot_evict(c, k, self.params["evict"]):
                ctx.history.out[g] = True
            band = allocrules.pilot_keep(c, k, self.params["lower"], self.params["upper"])
            ok = bool(band) and kept < ctx.bp
            kept += ok
            out.append(ok)
        self._pending = [g for g, ok in zip(draw.problems, out, strict=True) if ok]
        return out


_CLASSES = {c.name: c for c in (Allocator, Knapsack, DynamicSampling, SkipZeroVar, Schedule, DynaMO,
                                PilotCommit)}


def make(spec: str, n: int, bp: int) -> Allocator:
    """The allocator object of a spec at base group size n and bp problems per step."""
    s = parse(spec, n)
    return _CLASSES[s.kind](s, n, bp)
