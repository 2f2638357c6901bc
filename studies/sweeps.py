"""Sweep grids over the allocation C = bp * n * m (docs/PAPER.md "Findings": n vs m, fixed batch, joint).

Every sweep repeats its grid over seeds 0..S-1; seed s uses problem set `problem_seed = s` (or the base
config's fixed problem_seed) for every n and bp, so configurations are compared on the same problems.
Budgets and evaluation points are log-spaced in compute by the engines (RunConfig.n_evals).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from studies.config import RunConfig, StudiesError


def _seeded(base: RunConfig, seeds: int, **alloc: int) -> list[RunConfig]:
    if seeds < 1:
        raise StudiesError(f"seeds must be >= 1, got {seeds}")
    out = []
    for s in range(seeds):
        ps = base.problem_seed if base.problem_seed is not None else s
        out.append(base.replace(seed=s, problem_seed=ps, **alloc))
    return out


def _distinct(values: Sequence[int] | None, name: str) -> list[int]:
    if not values:
        raise StudiesError(f"the sweep needs at least one value of --{name}")
    if len(set(values)) != len(values):
        raise StudiesError(f"--{name} lists a value twice: {','.join(map(str, values))}")
    return list(values)


def n_vs_m(base: RunConfig, n: Sequence[int], seeds: int = 1, bp: int | None = None,
           budget: int | None = None) -> list[RunConfig]:
    """Fixed bp, one budget, a list of n: m follows (isocompute.contract.budget.STEPS_RULE; paper Fig 6-7)."""
    ns = _distinct(n, "n")
    bp = base.bp if bp is None else bp
    budget = base.budget if budget is None else budget
    return [c for v in ns for c in _seeded(base, seeds, n=v, bp=bp, budget=budget)]


def fixed_batch(base: RunConfig, batch: Sequence[int], n: Sequence[int], seeds: int = 1,
                budget: int | None = None) -> list[RunConfig]:
    """bp * n = B for each B in `batch` and each n dividing it (paper Fig 9); m sweeps along each curve."""
    batches, ns = _distinct(batch, "batch"), _distinct(n, "n")
    budget = base.budget if budget is None else budget
    out = []
    for b in batches:
        fitting = [v for v in ns if b % v == 0 and b // v >= 1]
        if not fitting:
            raise StudiesError(f"no n in {','.join(map(str, ns))} divides batch {b}")
        for v in fitting:
            out.extend(_seeded(base, seeds, n=v, bp=b // v, budget=budget))
    return out


def joint(base: RunConfig, bp: Sequence[int], n: Sequence[int], bmax: int, seeds: int = 1,
          budget: int | None = None) -> list[RunConfig]:
    """Every (bp, n) of the grids with bp * n <= bmax (paper Fig 21-22; B_max = 65,536 Easy, 16,384 Hard)."""
    bps, ns = _distinct(bp, "bp"), _distinct(n, "n")
    budget = base.budget if budget is None else budget
    pairs = [(b, v) for b in bps for v in ns if b * v <= bmax]
    if not pairs:
        raise StudiesError(f"no (bp, n) pair of the grids has bp * n <= bmax = {bmax}")
    return [c for b, v in pairs for c in _seeded(base, seeds, n=v, bp=b, budget=budget)]


def allocators(base: RunConfig, n: Sequence[int], specs: Sequence[str], seeds: int = 1,
               budget: int | None = None, base_n: int | None = None) -> list[RunConfig]:
    """Rollout allocators at iso-compute: the fixed-n runs of the grid `n` (allocator `fixed`,
    table label `fixed-n8`...) plus each allocator spec of `specs` at group size `base_n` (default: 8 when
    the grid has it, else the grid's middle value), all at the same bp and budget. `fixed` in `specs` adds
    nothing (the grid's runs are it). Specs are checked by the backend (sandbox/allocators.py,
    llm_backend/allocators.py). On the llm backend problem_seed stays the base's (None unless given): the
    problems are the split and the LM, so it pairs nothing there, and the fixed-n runs keep the run ids of
    isocompute.reports.llm_study's grid (the same results directory reuses them)."""
    ns = _distinct(n, "n")
    names = [s.strip() for s in specs if s.strip()]
    if not names:
        raise StudiesError("the allocators study needs --allocators, e.g. knapsack,dynamic-sampling")
    if len(set(names)) != len(names):
        raise StudiesError(f"--allocators lists a value twice: {','.join(names)}")
    if base_n is None:
        base_n = 8 if 8 in ns else sorted(ns)[len(ns) // 2]
    budget = base.budget if budget is None else budget
    if base.backend == "llm":
        if seeds < 1:
            raise StudiesError(f"seeds must be >= 1, got {seeds}")
        runs = [("fixed", v) for v in ns] + [(spec, base_n) for spec in names if spec != "fixed"]
        return [base.replace(allocator=a, n=v, budget=budget, seed=s) for a, v in runs for s in range(seeds)]
    out = n_vs_m(base.replace(allocator="fixed"), ns, seeds, budget=budget)
    for spec in names:
        if spec != "fixed":
            out.extend(_seeded(base, seeds, n=base_n, allocator=spec, budget=budget))
    return out


STUDIES: dict[str, Callable[..., list[RunConfig]]] = {
    "n-vs-m": n_vs_m,
    "fixed-batch": fixed_batch,
    "joint": joint,
    "allocators": allocators,
}


def build_sweep(study: str, base: RunConfig, *, n: Sequence[int] | None = None,
                bp: Sequence[int] | None = None, batch: Sequence[int] | None = None,
                bmax: int | None = None, seeds: int = 1, budget: int | None = None,
                allocators: Sequence[str] | None = None, base_n: int | None = None) -> list[RunConfig]:
    """Configs of one study from CLI-style grids; StudiesError (one line) on grids that do not fit it."""
    if study not in STUDIES:
        raise StudiesError(f"unknown study {study!r}; choose one of {', '.join(STUDIES)}")
    n = n or [base.n]
    if allocators and study != "allocators":
        raise StudiesError("--allocators belongs to the allocators study")
    if study == "allocators":
        if batch or bmax or (bp is not None and len(bp) != 1):
            raise StudiesError("allocators takes --n, one --bp, --allocators and --budget")
        b = base if not bp else base.replace(bp=bp[0])
        return STUDIES["allocators"](b, n, allocators or [], seeds, budget=budget, base_n=base_n)
    if study == "n-vs-m":
        if bp is not None and len(bp) != 1:
            raise StudiesError("n-vs-m keeps bp fixed: give one --bp value (the joint study takes a bp grid)")
        if batch or bmax:
            raise StudiesError("n-vs-m takes --n, --bp and --budget, not --batch or --bmax")
        return n_vs_m(base, n, seeds, bp=bp[0] if bp else None, budget=budget)
    if study == "fixed-batch":
        if not batch:
            raise StudiesError("fixed-batch needs --batch (one or more values of bp * n)")
        if bp or bmax:
            raise StudiesError("fixed-batch derives bp = batch / n; do not give --bp or --bmax")
        return fixed_batch(base, batch, n, seeds, budget=budget)
    if bmax is None:
        raise StudiesError("joint needs --bmax (the largest bp * n)")
    if batch:
        raise StudiesError("joint takes --bp, --n and --bmax, not --batch")
    return joint(base, bp or [base.bp], n, bmax, seeds, budget=budget)
