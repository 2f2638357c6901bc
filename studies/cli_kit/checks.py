"""What a command may ask of this machine, checked before any work starts or any file is created: the size
of a sweep, the number of worker processes, a CUDA device torch can see, the memory one step holds, and every
config's validity by its backend. Each failure is a StudiesError, one line and exit code 2 at the root group;
what the user may mean (a step that fills most of the memory) is a one-line warning."""

from __future__ import annotations

import os

import click

from studies.config import RunConfig, StudiesError

MAX_RUNS = 100_000
"""Most runs one sweep may ask for (grid x seeds): its configs, manifest and progress bar live in memory."""
JOBS_PER_CORE = 4
"""--jobs above this many worker processes per core only adds memory and contention; it is capped there."""


def check_configs(configs: list[RunConfig]) -> None:
    """Every config validated by its backend before anything is created on disk (a bad --model,
    --dataset or --option used to leave an empty results directory behind). run_sweep validates again once
    the store is open; a simulator config validates in microseconds."""
    from studies.backends import get_backend

    for cfg in {c.run_id: c for c in configs}.values():
        get_backend(cfg.backend).validate(cfg)


def check_jobs(jobs: int | None) -> int | None:
    """--jobs: >= 1, capped (with a warning) at JOBS_PER_CORE worker processes per core."""
    if jobs is None:
        return None
    if jobs < 1:
        raise StudiesError(f"--jobs must be >= 1, got {jobs}")
    cores = os.cpu_count() or 1
    cap = JOBS_PER_CORE * cores
    if jobs > cap:
        click.echo(f"warning: --jobs {jobs} capped at {cap} ({JOBS_PER_CORE} per core, {cores} cores)",
                   err=True)
        return cap
    return jobs


def check_sweep_size(seeds: int, *grids: list[int] | None) -> None:
    """Refuse a sweep of more than MAX_RUNS runs before building its configs (that alone could hang)."""
    if seeds < 1:
        raise StudiesError(f"--seeds must be >= 1, got {seeds}")
    total = seeds
    for g in grids:
        total *= len(g) if g else 1
    if total > MAX_RUNS:
        raise StudiesError(f"the sweep asks for up to {total} runs (grid x {seeds} seeds); at most "
                           f"{MAX_RUNS} per sweep: split it or use fewer seeds")


def check_device(cfg: RunConfig) -> None:
    """A cuda run on this machine needs torch to see that GPU (the simulator refuses cuda itself)."""
    if cfg.backend != "llm" or not cfg.device.startswith("cuda"):
        return
    try:
        import torch
    except ImportError:
        raise StudiesError(f"--device {cfg.device} needs torch: pip install 'isocompute[llm]'") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(cfg.device.split(":", 1)[1]) if ":" in cfg.device else 0
    if index >= count:
        raise StudiesError(f"--device {cfg.device}: this machine has {count} CUDA device(s) visible to torch")


MEMORY_WARN = 0.5
"""A step estimated to hold more than this share of the available memory gets a warning (more than all of
it: refused)."""


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes of memory available to new work (Linux's MemAvailable), or None where it cannot be read."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(configs: list[RunConfig], available: int | None = None) -> None:
    """Refuse, in one line, a run whose one step would hold more memory than this machine has available (the
    backend's estimate, `step_bytes`: rollouts x tokens x bytes per token), before it starts and fills the
    memory for minutes; warn when a step would take more than MEMORY_WARN of it. Backends without an estimate
    (the simulator: a step costs O(bp * K * dim) whatever n is) and cuda runs (the GPU's memory is the
    engine's) pass."""
    from studies.backends import get_backend

    available = available_memory() if available is None else available
    if not available:
        return
    worst, need = None, 0
    for cfg in {c.run_id: c for c in configs}.values():
        estimate = getattr(get_backend(cfg.backend), "step_bytes", None)
        if estimate is None or cfg.device.startswith("cuda"):
            continue
        b = estimate(cfg)
        if b > need:
            worst, need = cfg, b
    if worst is None:
        return
    gb = 2**30
    what = (f"one step of {worst.bp * worst.n:,} rollouts (bp {worst.bp} x n {worst.n}) holds about "
            f"{need / gb:.1f} GB, and this machine has {available / gb:.1f} GB available")
    if need > available:
        raise StudiesError(f"{what}: use a smaller n or bp (the budget only sets the number of steps)")
    if need > MEMORY_WARN * available:
        click.echo(f"warning: {what}", err=True)
