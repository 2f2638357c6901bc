"""Run a list of RunConfigs into a ResultStore: in-process, on a local process pool, or as Ray tasks.

Workers only compute; the parent writes each result as it arrives (studies/store.py), so a killed sweep
loses at most the runs in flight, and every executor yields the same files for the same configs.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing as mp
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from studies.backends import Adapter, RunOutput, get_backend
from studies.config import RunConfig, StudiesError
from studies.store import ResultStore

EXECUTORS = ("local", "ray")

# (run_id, output or None, traceback or None, wall seconds)
Result = tuple[str, RunOutput | None, str | None, float]


@dataclass
class SweepSummary:
    """Counts of one sweep invocation."""

    total: int = 0
    skipped: int = 0
    done: int = 0
    diverged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0


def execute_one(adapter: Adapter, cfg: RunConfig, progress: bool = False) -> Result:
    """Run one config; an exception becomes a traceback string (a failed run is data for the manifest)."""
    t0 = time.perf_counter()
    try:
        out = adapter.run(cfg, progress=progress)
    except Exception:  # noqa: BLE001 - recorded as a failed run, the sweep goes on
        return cfg.run_id, None, traceback.format_exc(), time.perf_counter() - t0
    return cfg.run_id, out, None, time.perf_counter() - t0


def _worker_init() -> None:
    """Pool workers: die with the parent (Linux PR_SET_PDEATHSIG) and leave Ctrl-C to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)


BATCH_RUNS = 16
"""Runs per in-process batch of a batching adapter (SimAdapter.run_many): enough to keep the threads busy,
few enough that results reach the store (and a killed sweep resumes) batch by batch."""


def _batches(tasks: list[tuple[Adapter, RunConfig]]) -> list[list[tuple[Adapter, RunConfig]]]:
    """Tasks of batching adapters in batches of BATCH_RUNS, the most expensive first (steps x bp), runs of one
    adapter and policy layout together (the order never changes a result, only the wall time)."""
    def cost(task):
        cfg = task[1]
        return cfg.budget // max(cfg.n, 1)

    order = sorted(tasks, key=lambda t: (t[0].name, str(t[1].model), -cost(t), t[1].run_id))
    out: list[list[tuple[Adapter, RunConfig]]] = []
    for task in order:
        last = out[-1] if out else None
        if last and len(last) < BATCH_RUNS and last[0][0] is task[0] and last[0][1].model == task[1].model:
            last.append(task)
        else:
            out.append([task])
    return out


def _run_batched(tasks: list[tuple[Adapter, RunConfig]], threads: int,
                 on_result: Callable[[Result], None]) -> None:
    """Batching adapters (`run_many(cfgs, threads)`, the simulator) advance many runs per call on threads in
    this process (issue 15); a batch that raises falls back to one run at a time, so a failing config gets
    its own traceback and the others still finish."""
    for batch in _batches(tasks):
        adapter = batch[0][0]
        cfgs = [cfg for _, cfg in batch]
        t0 = time.perf_counter()
        try:
            outs = adapter.run_many(cfgs, threads=threads)
        except Exception:  # noqa: BLE001 - retried one by one below
            for a, cfg in batch:
                on_result(execute_one(a, cfg))
            continue
        wall = (time.perf_counter() - t0) / len(cfgs)
        for cfg, out in zip(cfgs, outs, strict=True):
            on_result((cfg.run_id, out, None, wall))


def _run_local(tasks: list[tuple[Adapter, RunConfig]], jobs: int,
               on_result: Callable[[Result], None]) -> None:
    batching = [t for t in tasks if callable(getattr(t[0], "run_many", None))]
    if batching:
        _run_batched(batching, max(1, jobs), on_result)
        tasks = [t for t in tasks if not callable(getattr(t[0], "run_many", None))]
    if not tasks:
        return
    if jobs <= 1 or len(tasks) <= 1:
        for adapter, cfg in tasks:
            on_result(execute_one(adapter, cfg))
        return
    # spawn, not fork: the parent may hold threads (tqdm monitor, Ray) that fork would copy mid-state.
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=mp.get_context("spawn"),
                               initializer=_worker_init)
    try:
        pending = {pool.submit(execute_one, adapter, cfg): cfg for adapter, cfg in tasks}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                cfg = pending.pop(fut)
                try:
                    result = fut.result()
                except Exception:  # noqa: BLE001 - a worker that died (e.g. out of memory)
                    result = (cfg.run_id, None, traceback.format_exc(), 0.0)
                on_result(result)
    except BaseException:
        # Ctrl-C or an error while storing: stop the workers now instead of finishing the queue.
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Fail in seconds, in one line, on an unreachable HOST:PORT (Ray itself retries for minutes)."""
    if not address or address == "auto" or address.startswith("local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise StudiesError(f"--address must read HOST:PORT, ray://HOST:PORT or auto, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise StudiesError(f"cannot reach Ray at {address}: {e.strerror or e}") from None


@contextlib.contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Connect to Ray (or start a local instance) unless the caller already did; shut down what we started."""
    try:
        import ray
    except ImportError:
        raise StudiesError("the ray executor needs Ray: pip install 'isocompute[ray]'") from None
    if ray.is_initialized():
        yield
        return
    _check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as e:
        where = address or "a new local instance"
        raise StudiesError(f"cannot start or reach Ray at {where}: {_one_line(str(e))}") from None
    try:
        yield
    finally:
        ray.shutdown()


def _one_line(msg: str) -> str:
    return " ".join(msg.split())[:300]


def _run_ray(tasks: list[tuple[Adapter, RunConfig]], on_result: Callable[[Result], None]) -> None:
    """One Ray task per run (inside `ray_session`); results are stored by the caller as they complete."""
    import ray

    remote = ray.remote(execute_one)
    refs = {}
    try:
        for adapter, cfg in tasks:
            # GPU runs (LLM on cuda) reserve a whole GPU so that tasks never share one.
            opts = {"num_cpus": 1, "num_gpus": 1 if adapter.needs_gpu(cfg) else 0, "max_retries": 0}
            refs[remote.options(**opts).remote(adapter, cfg)] = cfg
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                cfg = refs.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception:  # noqa: BLE001 - a task or worker that died
                    result = (cfg.run_id, None, traceback.format_exc(), 0.0)
                on_result(result)
    except BaseException:
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise


def run_sweep(configs: list[RunConfig], store: ResultStore, *, executor: str = "local",
              jobs: int | None = None, address: str | None = None, force: bool = False, progress: bool = True,
              desc: str = "runs") -> SweepSummary:
    """Run every config not yet finished in `store` (all of them with `force`) and store each as it ends.

    All configs are validated by their backends before anything runs, so a typo fails in a second, not
    after an hour of runs.
    """
    if executor not in EXECUTORS:
        raise StudiesError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    if jobs is not None and jobs < 1:
        raise StudiesError(f"jobs must be >= 1, got {jobs}")
    t0 = time.perf_counter()
    unique = list({c.run_id: c for c in configs}.values())
    adapters = {}
    for cfg in unique:
        adapter = get_backend(cfg.backend)
        adapter.validate(cfg)
        adapters[cfg.run_id] = adapter
    store.register(unique)
    if force:
        for cfg in unique:
            store.invalidate(cfg.run_id)
        store.write_manifest()
    todo = [c for c in unique if not store.is_finished(c.run_id)]
    if executor == "ray" and todo:
        with ray_session(address):
            return _dispatch(todo, adapters, store, "ray", 1, progress, desc, t0, len(unique))
    return _dispatch(todo, adapters, store, "local", jobs, progress, desc, t0, len(unique))


def _dispatch(todo: list[RunConfig], adapters: dict[str, Adapter], store: ResultStore, executor: str,
              jobs: int | None, progress: bool, desc: str, t0: float, total: int) -> SweepSummary:
    summary = SweepSummary(total=total, skipped=total - len(todo))
    by_id = {c.run_id: c for c in todo}
    bar = tqdm(total=len(todo), desc=desc, unit="run", disable=not progress or not todo, dynamic_ncols=True,
               file=sys.stderr)
    bar.set_postfix(failed=0, diverged=0, refresh=False)

    def on_result(result: Result) -> None:
        run_id, out, err, wall = result
        cfg = by_id[run_id]
        rec = None
        if out is not None:
            try:
                rec = store.write_run(cfg, out, wall_s=round(wall, 3))
            except (ValueError, TypeError, KeyError, RuntimeError) as e:  # an adapter's table we cannot store
                err = f"{type(e).__name__}: {e}"
        if rec is None:
            store.mark_failed(cfg, err or "")
            summary.failed[run_id] = (err or "").strip().splitlines()[-1] if err else "unknown error"
        else:
            summary.done += 1
            if rec["status"] == "diverged":
                summary.diverged.append(run_id)
        bar.update(1)
        bar.set_postfix(failed=len(summary.failed), diverged=len(summary.diverged), refresh=False)

    tasks = [(adapters[c.run_id], c) for c in todo]
    try:
        if executor == "ray":
            _run_ray(tasks, on_result)
        else:
            _run_local(tasks, jobs or os.cpu_count() or 1, on_result)
    finally:
        bar.close()
    summary.wall_s = time.perf_counter() - t0
    return summary
