"""The first run: with an empty Numba cache the CLI says on stderr that it compiles, before any run
finishes; with the kernels cached or compiled it says nothing."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from sandbox import SimConfig, _cache, run, runner

ISOCOMPUTE = Path(sys.executable).with_name("isocompute")
TINY_RUN = dict(model="tabular", n=2, bp=8, d=16, d_val=16, budget=2**8, n_evals=4)


def _reader(stream, q, name):
    for line in iter(stream.readline, ""):
        q.put((name, line))
    q.put((name, None))


def test_cold_cache_cli_says_it_compiles_before_the_first_run(tmp_path):
    """`isocompute demo` with an empty NUMBA_CACHE_DIR: the notice is the first thing after the progress bar
    appears and before any run ends (stdout empty, the bar at 0). The process is stopped once the notice has
    been read: the point is what comes before the compile, not the compile itself (~40 s+)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONUNBUFFERED="1")
    cmd = [str(ISOCOMPUTE), "demo", "--seeds", "1", "--budget", "2^13", "--out", str(tmp_path / "demo")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            errors="replace")
    q: queue.Queue = queue.Queue()
    for name, stream in (("out", proc.stdout), ("err", proc.stderr)):
        threading.Thread(target=_reader, args=(stream, q, name), daemon=True).start()
    seen = {"out": [], "err": []}
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            try:
                name, line = q.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            seen[name].append(line)
            if _cache.NOTICE in line:
                break
    finally:
        proc.kill()
        proc.wait()
    err = "".join(seen["err"])
    assert _cache.NOTICE in err, err[-2000:]
    before = err[: err.index(_cache.NOTICE)]
    assert seen["out"] == []  # no run output yet
    assert "1/" not in before and "Traceback" not in before  # no run has finished


def test_notice_only_when_a_kernel_would_compile(capsys):
    cfg = SimConfig(**TINY_RUN)
    run(cfg)  # compiled (or loaded) in this process now
    capsys.readouterr()  # that run's own notice, printed if this process started with a cold cache
    _cache._checked.discard(True)
    assert runner.notice_if_cold(cfg) is False
    assert _cache.NOTICE not in capsys.readouterr().err
    assert runner.notice_if_cold(cfg) is False  # checked once per process and kind of run
    st = runner.prepare(cfg)
    assert _cache.is_compiled(runner.grpo.initial_log_probs, (*st.policy.args(), st.theta, cfg.K))
    assert not _cache.is_compiled(runner.grpo.initial_log_probs, (*st.policy.args(), st.theta, 8.0))
