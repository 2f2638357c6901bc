"""A real two-node Ray cluster on this machine, started as a user starts one.

`ray start --head` and `ray start --address` give two raylets with one CPU each; `isocompute sweep
--executor ray --address` runs a small simulator sweep on them. Checked: runs land on both nodes (each record
names its node), the tables equal the local executor's bit for bit (same machine), SIGKILL of the worker node
while it runs a run loses nothing (Ray retries the run on the head), token authentication as Ray >= 2.59 turns
it on (the head finds a token in ~/.ray/auth_token, the client's RAY_AUTH_MODE is unset), and a client
without the right token gets one line and exit 2. Both nodes are killed whatever happens (their process
groups, SIGKILL), and no process of theirs may survive.

Loopback only: the head's node address is 127.0.0.2, because Ray rewrites 127.0.0.1 and localhost to the
machine's routable address (ray._private.services.resolve_ip_for_localhost) while any other loopback
address is kept. Each node has its own temp dir under a short /tmp path (Ray's socket paths must stay under
108 bytes), HOME is a temp dir (the real ~/.ray is never read or written) and every port is chosen free.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from studies.backends import get_backend
from studies.config import RunConfig
from studies.io import load_table

psutil = pytest.importorskip("psutil")  # a dependency of Ray
pytest.importorskip("ray")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900, method="signal")]  # signal: the finally still runs

HOST = "127.0.0.2"
RAY = str(Path(sys.executable).with_name("ray"))
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")
GRID = ["n-vs-m", "--backend", "sim", "--model", "interference", "--n", "2,4,8", "--bp", "16",
        "--budget", "2^20", "--seeds", "2", "--no-progress"]
TASK_TITLE = "ray::_execute_on_node"  # a Ray worker's process title while it runs one of our runs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
    return dict(env, HOME=str(home), RAY_USAGE_STATS_ENABLED="0", **extra)


def _home(root: Path, name: str, token: str | None) -> Path:
    home = root / name
    (home / ".ray").mkdir(parents=True)
    if token is not None:
        (home / ".ray" / "auth_token").write_text(token)
    return home


def _sweep(out: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "isocompute", "sweep", *GRID, "--out", str(out), *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _alive(procs) -> list[psutil.Process]:
    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out


def _wait_for(what: str, cond, timeout: float, procs=()) -> None:
    t_end = time.monotonic() + timeout
    while not cond():
        for p in procs:
            assert p.poll() is None, f"{what}: a node exited early (rc {p.returncode})"
        assert time.monotonic() < t_end, f"timed out waiting for {what}"
        time.sleep(0.2)


def _records(out: Path) -> dict[str, dict]:
    recs = {}
    for f in (out / "runs").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            rec = json.loads(f.read_text())
            recs[rec["run_id"]] = rec
    return recs


def _equal_tables(a: Path, b: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("table", "pass1"):
            pd.testing.assert_frame_equal(load_table(a, kind=kind), load_table(b, kind=kind))


class Node:
    """One `ray start --block` in its own process group, its output in a log file. The raylet starts its
    workers in process groups of their own, so a node's processes are that group and the start's
    descendants."""

    def __init__(self, root: Path, name: str, args: list[str], env: dict[str, str]):
        self.log = root / f"{name}.log"
        self.proc = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats", "--num-cpus", "1",
                                      "--temp-dir", str(root / name), "--min-worker-port", "0",
                                      "--max-worker-port", "0",
                                      "--dashboard-agent-listen-port", str(_free_port()), *args],
                                     env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.seen: dict[int, psutil.Process] = {}

    def started(self) -> bool:
        return "Ray runtime started" in self.log.read_text(errors="replace")

    def processes(self) -> list[psutil.Process]:
        """Its live processes now (each one seen is remembered, for the check that all died)."""
        found = []
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.proc.pid)
            found = [root, *root.children(recursive=True)]
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getpgid(p.pid) == self.proc.pid:
                    found.append(p)
        self.seen.update({p.pid: p for p in found})
        return _alive(found)

    def node_id(self) -> str | None:
        for p in self.processes():
            with contextlib.suppress(psutil.Error):
                cmd = p.cmdline()
                if cmd and cmd[0].endswith("/raylet"):
                    return next((a.split("=", 1)[1] for a in cmd if a.startswith("--node_id=")), None)
        return None

    def busy(self) -> bool:
        """Whether one of its workers runs a run now (Ray titles a busy worker after its task)."""
        for p in self.processes():
            with contextlib.suppress(psutil.Error):
                if " ".join(p.cmdline()).startswith(TASK_TITLE):
                    return True
        return False

    def kill(self) -> None:
        """SIGKILL, all of it at once, as a machine that dies."""
        procs = self.processes()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)


def _stop(nodes: list[Node], others: list[subprocess.Popen]) -> list[str]:
    """Kill everything started here; what still lives afterwards (then killed by pid) is returned."""
    for p in others:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=30)
    for node in nodes:
        node.kill()
    seen = [p for node in nodes for p in node.seen.values()]
    for _ in range(50):  # SIGKILLed: gone at once, or a zombie soon
        if not _alive(seen):
            break
        time.sleep(0.1)
    left = []
    for p in _alive(seen):
        with contextlib.suppress(psutil.Error):
            left.append(f"{p.pid} {' '.join(p.cmdline())[:100]}")
            p.kill()
    return left


def _log(t0: float, what: str) -> None:
    print(f"{time.monotonic() - t0:6.1f} s  {what}", flush=True)  # shown with the failure report


def test_a_sweep_on_a_two_node_cluster(tmp_path):
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="icray-", dir="/tmp"))
    token = secrets.token_hex(16)
    home = _home(root, "home", token)
    port = _free_port()
    address = f"{HOST}:{port}"
    nodes: list[Node] = []
    others: list[subprocess.Popen] = []
    try:
        # the head turns token auth on by itself (RAY_AUTH_MODE unset, a token in ~/.ray/auth_token), as the
        # head a user starts after any local ray.init() does
        head_args = ["--head", "--port", str(port), "--node-ip-address", HOST, "--include-dashboard=false",
                     "--ray-client-server-port", str(_free_port())]
        head = Node(root, "head", head_args, _env(home))
        nodes.append(head)
        # meanwhile, the reference: the same sweep on the local executor (batched, sandbox.run_many), and one
        # tiny run through sandbox.run, the path of a Ray task, so that both nodes' workers find its numba
        # kernels cached instead of compiling them at once
        reference = _sweep(tmp_path / "local", _env(home), "--jobs", "1")
        others.append(reference)
        get_backend("sim").run(RunConfig(model="interference", n=2, bp=16, budget=2**9, seed=0))
        rc, out, err = _finish(reference, 420)
        assert rc == 0, err
        _log(t0, "local reference done")
        _wait_for("the head", head.started, 180, [head.proc])
        _log(t0, "head up")
        # a node joining a token cluster needs RAY_AUTH_MODE=token (`ray start --address` never turns it on)
        worker = Node(root, "worker", ["--address", address], _env(home, RAY_AUTH_MODE="token"))
        nodes.append(worker)

        # clients without the cluster's token: one line, exit 2, the setting named (while the worker starts)
        on_cluster = ("--executor", "ray", "--address", address)
        wrong = _sweep(tmp_path / "wrong", _env(_home(root, "wrong", secrets.token_hex(16))), *on_cluster)
        none = _sweep(tmp_path / "none", _env(_home(root, "none", None)), *on_cluster)
        others += [wrong, none]
        for proc, says in ((wrong, "refused this machine's auth token"), (none, "no token was found here")):
            rc, out, err = _finish(proc, 120)
            lines = err.strip().splitlines()
            assert rc == 2 and out == "" and len(lines) == 1, err
            assert lines[0].startswith(f"error: the Ray cluster at {address}") and says in lines[0], err
        assert not (tmp_path / "wrong").exists() and not (tmp_path / "none").exists()  # refused before --out
        _log(t0, "auth refusals checked")
        assert "RAY_AUTH_MODE" in lines[0] and "~/.ray/auth_token" in lines[0]

        _wait_for("the worker node", worker.started, 180, [head.proc, worker.proc])
        head_id, worker_id = head.node_id(), worker.node_id()
        assert head_id and worker_id and head_id != worker_id
        _log(t0, "worker node up")

        # the sweep on the cluster: runs on both nodes, the local executor's tables
        rc, out, err = _finish(_sweep(tmp_path / "ray", _env(home), *on_cluster), 300)
        assert rc == 0 and "6 runs (6 run now, 0 already finished, 0 diverged, 0 failed)" in out, err
        placed = {rid: r["info"]["ray_node"] for rid, r in _records(tmp_path / "ray").items()}
        assert len(placed) == 6 and set(placed.values()) == {head_id, worker_id}, placed
        _equal_tables(tmp_path / "ray", tmp_path / "local")
        _log(t0, f"sweep on both nodes done ({sorted(placed.values()).count(worker_id)} of 6 on the worker)")

        # again, and SIGKILL the worker node while it runs a run: Ray retries that run on the head
        sweep = _sweep(tmp_path / "killed", _env(home), *on_cluster)
        others.append(sweep)

        def worker_busy() -> bool:
            assert sweep.poll() is None, "the sweep ended before the worker node ran a run"
            return worker.busy()

        _wait_for("a run in flight on the worker node", worker_busy, 240)
        worker.kill()
        _log(t0, "worker node killed")
        done_at_kill = set(_records(tmp_path / "killed"))
        assert len(done_at_kill) < 6  # mid-sweep
        rc, out, err = _finish(sweep, 300)
        assert rc == 0 and "6 runs (6 run now, 0 already finished, 0 diverged, 0 failed)" in out, err
        placed = {rid: r["info"]["ray_node"] for rid, r in _records(tmp_path / "killed").items()}
        assert len(placed) == 6
        assert {placed[rid] for rid in placed.keys() - done_at_kill} == {head_id}  # the lost run among them
        _equal_tables(tmp_path / "killed", tmp_path / "local")
        _log(t0, "sweep through the node's death done")
    finally:
        survivors = _stop(nodes, others)
        shutil.rmtree(root, ignore_errors=True)
    assert not survivors, f"processes outlived the cluster: {survivors}"
