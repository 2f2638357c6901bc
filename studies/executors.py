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

from isocompute.contract.progress import Progress
from isocompute.contract.status import DIVERGED
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


def _cost_order(tasks: list[tuple[Adapter, RunConfig]]) -> list[tuple[Adapter, RunConfig]]:
    """Tasks of one adapter and policy layout together, the most expensive first within them (steps x bp;
    the order never changes a result, only the wall time: the longest runs do not start last)."""
    def cost(task):
        cfg = task[1]
        return cfg.budget // max(cfg.n, 1)

    return sorted(tasks, key=lambda t: (t[0].name, str(t[1].model), -cost(t), t[1].run_id))


def _run_threaded(tasks: list[tuple[Adapter, RunConfig]], threads: int,
                  on_result: Callable[[Result], None]) -> None:
    """Batching adapters (`run_many(cfgs, threads, on_result)`, the simulator): the runs of each adapter and
    policy layout on `threads` threads of this process, handed out one at a time, and each result stored
    as it arrives, so a sweep interrupted at any moment keeps every run that finished before (this thread
    only waits: Ctrl-C acts at once, and the command line leaves the runs in flight). If the batch raises
    (a config that fails), the runs it had not finished go one at a time, so the failing one gets its own
    traceback and the others still finish."""
    order = _cost_order(tasks)
    groups: list[list[tuple[Adapter, RunConfig]]] = []
    for task in order:
        if groups and groups[-1][0][0] is task[0] and groups[-1][0][1].model == task[1].model:
            groups[-1].append(task)
        else:
            groups.append([task])
    for group in groups:
        adapter, cfgs = group[0][0], [cfg for _, cfg in group]
        stored: set[int] = set()

        def store(i: int, out: RunOutput, seconds: float, cfgs=cfgs, stored=stored) -> None:
            stored.add(i)
            on_result((cfgs[i].run_id, out, None, seconds))

        try:
            adapter.run_many(cfgs, threads=threads, on_result=store)
        except Exception:  # noqa: BLE001 - the rest retried one by one below
            for i, cfg in enumerate(cfgs):
                if i not in stored:
                    on_result(execute_one(adapter, cfg))


def _run_local(tasks: list[tuple[Adapter, RunConfig]], jobs: int,
               on_result: Callable[[Result], None]) -> None:
    batching = [t for t in tasks if callable(getattr(t[0], "run_many", None))]
    if batching:
        _run_threaded(batching, max(1, jobs), on_result)
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


RAY_MAX_RETRIES = 2
"""Ray reruns a run whose worker process or node died (never one whose code raised: `retry_exceptions` stays
off, so a failing config is still reported once). A node that leaves the cluster mid-sweep thus costs its runs
in flight a restart on another node, not the sweep; runs are deterministic, so the retry stores the same
tables."""

SHIPPED_PACKAGES = ("studies", "sandbox", "llm_backend")
"""What a Ray worker imports to run a config (the executor, the adapters and the engines): the packages
`--ship-code` sends to the cluster (docs/DESIGN.md arrows: nothing above studies runs on a worker)."""


def _is_remote(address: str | None) -> bool:
    return bool(address) and address != "auto" and not address.startswith("local")


def _resolve_address(address: str | None) -> str:
    """No address: RAY_ADDRESS if set, else a new local instance ("local"). Left to Ray, None would also join
    whatever /tmp/ray/ray_current_cluster names (the last `ray start --head`, alive or killed)."""
    return address or os.environ.get("RAY_ADDRESS") or "local"


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Fail in seconds, in one line, on an unreachable HOST:PORT (Ray itself retries for minutes)."""
    if not _is_remote(address):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise StudiesError(f"--address must read HOST:PORT, ray://HOST:PORT or auto, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise StudiesError(f"cannot reach Ray at {address}: {e.strerror or e}") from None


def _enable_client_token_auth() -> bool:
    """Send the token when one is at hand, as `ray start --head` does (Ray >= 2.59, ray-project/ray PR 64755).

    `ray start --head` turns token authentication on whenever a token exists (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token, which any earlier local `ray.init()` writes), but
    `ray.init(address=HOST:PORT)` with RAY_AUTH_MODE unset sends none: only `address=None/"auto"`
    auto-enables it (ray/_private/worker.py). So, with RAY_AUTH_MODE unset, we call the function that
    `ray start --head` calls. A cluster without auth accepts a token, so this never breaks a connection that
    worked. Returns whether it switched token mode on: False where RAY_AUTH_MODE is set (the user's choice
    wins), no token exists, or this Ray has no token authentication."""
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return False
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # Ray < 2.59: `ray start --head` never turns token auth on by itself either
        return False
    # its "Token authentication is enabled for this Ray cluster" warning speaks to a head node, not to us
    log = logging.getLogger(maybe_enable_token_auth_if_token_available.__module__)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        log.setLevel(level)


def _auth_error(address: str) -> StudiesError:
    """The one line for a cluster that refused us for want of the right token, naming the fixing setting."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode == "token":
        return StudiesError(
            f"the Ray cluster at {address} refused this machine's auth token (RAY_AUTH_TOKEN, "
            "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token): use the cluster's token (`ray get-auth-token` on "
            "its head node)")
    if mode is not None:
        return StudiesError(
            f"the Ray cluster at {address} uses token authentication but RAY_AUTH_MODE={mode} here: unset "
            "RAY_AUTH_MODE (or set RAY_AUTH_MODE=token) with the cluster's token in ~/.ray/auth_token or "
            "RAY_AUTH_TOKEN")
    return StudiesError(
        f"the Ray cluster at {address} uses token authentication and no token was found here: put the "
        "cluster's token (`ray get-auth-token` on its head node) in ~/.ray/auth_token or RAY_AUTH_TOKEN "
        "(RAY_AUTH_MODE=token is then used), or start the cluster with RAY_AUTH_MODE=disabled")


def _probe_auth(address: str, timeout: float = 10.0) -> None:
    """Ask the cluster's GCS for its id once, with this process's auth settings, so that a missing or wrong
    token fails in seconds and in one line (`ray.init` retries for 20 s and prints an InvalidAuthToken
    warning a second). Anything but an authentication refusal is left to `ray.init` to report."""
    hostport = address.split("://", 1)[-1]
    if "://" in address:  # Ray Client (ray://): not a GCS port
        return
    try:
        import grpc
        from ray._private.grpc_utils import init_grpc_channel  # adds the token metadata in token mode
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # another Ray layout: ray.init reports any failure itself
        return
    channel = init_grpc_channel(hostport)
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise _auth_error(address) from None
    finally:
        channel.close()


def check_ray_address(address: str | None) -> None:
    """What `ray_session` checks before it connects (reachable, the token accepted), for a caller that wants
    a bad address or token refused before it creates anything (the sweep command, before its --out)."""
    address = _resolve_address(address)
    if not _is_remote(address):
        return
    _check_reachable(address)
    try:
        import ray  # noqa: F401 - the probe's grpc stubs come with it
    except ImportError:
        raise StudiesError("the ray executor needs Ray: pip install 'isocompute[ray]'") from None
    switched = _enable_client_token_auth()
    try:
        _probe_auth(address)
    finally:
        if switched:
            os.environ.pop("RAY_AUTH_MODE", None)


def _is_auth_failure(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def code_runtime_env() -> dict:
    """A Ray runtime_env that ships this installation's SHIPPED_PACKAGES to every worker (`py_modules`, put
    ahead of the node's own install on sys.path), so that the nodes need only the dependencies (numpy, numba,
    pandas, ...; torch and transformers for llm runs). The packages, not the working tree: no .venv or
    results is uploaded and a worker's working directory stays the node's own. Numba caches are left out
    (they are keyed on the source file's path and mtime, which the copy does not keep)."""
    import importlib.util

    paths = []
    for name in SHIPPED_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise StudiesError(f"cannot ship package {name!r}: it is not importable here")
        paths.append(str(list(spec.submodule_search_locations)[0]))
    return {"py_modules": paths, "excludes": ["__pycache__/", "*.pyc", "*.nbi", "*.nbc"]}


@contextlib.contextmanager
def ray_session(address: str | None, runtime_env: dict | None = None) -> Iterator[None]:
    """Connect to Ray (or start a local instance) unless the caller already did; shut down what we started.
    `runtime_env` is the job's (Ray uploads local py_modules at the job level only, in `ray.init`).

    With an address: token authentication as `ray start --head` has it (_enable_client_token_auth), and a
    refusal for want of the right token is one line naming the setting (_auth_error)."""
    try:
        import ray
    except ImportError:
        raise StudiesError("the ray executor needs Ray: pip install 'isocompute[ray]'") from None
    if ray.is_initialized():
        if runtime_env:
            raise StudiesError("--ship-code needs the executor to start its own Ray session; with Ray "
                               "already initialised, pass runtime_env=studies.executors.code_runtime_env() "
                               "to ray.init")
        yield
        return
    address = _resolve_address(address)
    _check_reachable(address)
    switched = _is_remote(address) and _enable_client_token_auth()
    try:
        if _is_remote(address):
            _probe_auth(address)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING, runtime_env=runtime_env)
        except (ConnectionError, ValueError, RuntimeError) as e:
            if _is_remote(address) and _is_auth_failure(e):
                raise _auth_error(address) from None
            where = address if _is_remote(address) else "a new local instance"
            raise StudiesError(f"cannot start or reach Ray at {where}: {_one_line(str(e))}") from None
        try:
            yield
        finally:
            ray.shutdown()
    finally:
        if switched:  # this process's environment as we found it (children started later see no change)
            os.environ.pop("RAY_AUTH_MODE", None)


def _one_line(msg: str) -> str:
    return " ".join(msg.split())[:300]


def ray_task_options(adapter: Adapter, cfg: RunConfig, node_cpus: int) -> dict:
    """The Ray resource request of one run: its CPUs and, where it runs on cuda, one whole GPU (so two runs
    never share a GPU). CPUs: `adapter.cpus(cfg)` where the adapter says (None: all of a node's CPUs,
    `node_cpus`, the smallest node's count, e.g. torch's intra-op threads of an llm run on cpu), else one.
    Ray sets OMP_NUM_THREADS to the request in the worker, so a run also uses what it reserved."""
    cpus_of = getattr(adapter, "cpus", None)
    cpus = cpus_of(cfg) if callable(cpus_of) else 1
    return {"num_cpus": node_cpus if cpus is None else cpus, "num_gpus": 1 if adapter.needs_gpu(cfg) else 0,
            "max_retries": RAY_MAX_RETRIES}


def _alive_nodes() -> list[dict[str, float]]:
    import ray

    return [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]


def _check_feasible(requests: list[dict], nodes: list[dict[str, float]]) -> None:
    """A request no node can hold would wait forever (Ray only warns): one line instead."""
    for req in {(r["num_cpus"], r["num_gpus"]) for r in requests}:
        cpus, gpus = req
        if not any(n.get("CPU", 0) >= cpus and n.get("GPU", 0) >= gpus for n in nodes):
            have = ", ".join(f"{n.get('CPU', 0):g} CPU/{n.get('GPU', 0):g} GPU" for n in nodes) or "none"
            raise StudiesError(f"no node of the Ray cluster can take a run asking for {cpus} CPU and {gpus} "
                               f"GPU (alive nodes: {have}); add such a node or run on the cpu")


def _execute_on_node(adapter: Adapter, cfg: RunConfig) -> Result:
    """execute_one in a Ray worker, the id of the node it ran on kept in the run's record (info.ray_node)."""
    import ray

    result = execute_one(adapter, cfg)
    if result[1] is not None:
        result[1].info["ray_node"] = ray.get_runtime_context().get_node_id()
    return result


def _run_ray(tasks: list[tuple[Adapter, RunConfig]], on_result: Callable[[Result], None]) -> None:
    """One Ray task per run (inside `ray_session`); results are stored by the caller as they complete."""
    import ray

    nodes = _alive_nodes()
    node_cpus = int(min((n["CPU"] for n in nodes if n.get("CPU", 0) >= 1), default=1))
    opts = [ray_task_options(adapter, cfg, node_cpus) for adapter, cfg in tasks]
    _check_feasible(opts, nodes)
    remote = ray.remote(_execute_on_node)
    refs = {}
    try:
        for (adapter, cfg), opt in zip(tasks, opts, strict=True):
            refs[remote.options(**opt).remote(adapter, cfg)] = cfg
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                cfg = refs.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception:  # noqa: BLE001 - a task whose retries ran out, a worker that died
                    result = (cfg.run_id, None, traceback.format_exc(), 0.0)
                on_result(result)
    except BaseException:
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise


def run_sweep(configs: list[RunConfig], store: ResultStore, *, executor: str = "local",
              jobs: int | None = None, address: str | None = None, force: bool = False, progress: bool = True,
              desc: str = "runs", ship_code: bool = False) -> SweepSummary:
    """Run every config not yet finished in `store` (all of them with `force`) and store each as it ends.

    All configs are validated by their backends before anything runs, so a typo fails in a second, not
    after an hour of runs. `ship_code` (ray): send this installation's packages to the workers
    (code_runtime_env) instead of relying on the project being installed on every node.
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
        with ray_session(address, runtime_env=code_runtime_env() if ship_code else None):
            return _dispatch(todo, adapters, store, "ray", 1, progress, desc, t0, len(unique))
    return _dispatch(todo, adapters, store, "local", jobs, progress, desc, t0, len(unique))


def _dispatch(todo: list[RunConfig], adapters: dict[str, Adapter], store: ResultStore, executor: str,
              jobs: int | None, progress: bool, desc: str, t0: float, total: int) -> SweepSummary:
    summary = SweepSummary(total=total, skipped=total - len(todo))
    by_id = {c.run_id: c for c in todo}
    bar = Progress(desc, len(todo), "run", enabled=progress and bool(todo))

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
            if rec["status"] == DIVERGED:
                summary.diverged.append(run_id)
        bar.update(summary.done + len(summary.failed),
                   failed=f"{len(summary.failed)} failed" if summary.failed else None,
                   diverged=f"{len(summary.diverged)} diverged" if summary.diverged else None)

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
